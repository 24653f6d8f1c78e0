//! The table of contents of a run: the configuration merged with the command line, the
//! cluster and role resolved, one route per destination (sinks/route.rs, built by the registry
//! in sinks/mod.rs), the pipeline (pipeline.rs), then `--once` or the daemon loop (daemon.rs).

use crate::Exit;
use crate::cli::Cli;
use crate::config::Config;
use crate::sinks::{Context, Records, SinkKind};

pub use crate::daemon::SHUTDOWN_GRACE;
pub use crate::pipeline::{Flushed, Pipeline};
pub use crate::sinks::route::{Route, open_spool};

pub async fn run(cli: Cli, mut config: Config) -> Exit {
    cli.apply_to(&mut config);
    if cli.check {
        return crate::check::run(&config).await;
    }
    // slurm.conf's SlurmUser is never the token user (`--check` has a row for it).
    if let Some(entries) = config.slurm_conf_path().and_then(|p| crate::slurm_conf::entries(&p).ok())
        && let Err(e) = config.head.check_with_slurm_conf(&entries)
    {
        return Exit::BadConfig(e.0);
    }
    let cluster = match config.resolve_cluster_name() {
        Ok((name, _)) => name,
        Err(e) => return Exit::BadConfig(e.0),
    };
    let namespace = match config.namespace_for(&cluster) {
        Ok(ns) => ns,
        Err(e) => return Exit::BadConfig(e.0),
    };
    let (role, why) = match crate::role::detect(&config) {
        Ok(r) => r,
        Err(e) => return Exit::BadConfig(e.to_string()),
    };
    let node = config.node_name();
    let sinks: Vec<&str> = config.sink.iter().map(SinkKind::as_str).collect();
    tracing::info!(role = role.as_str(), why, cluster, namespace, node, ?sinks, "starting");
    for note in &config.deprecated {
        tracing::warn!(note = %note, "configuration key renamed; the old name still works");
    }
    let ctx = Context { config: &config, cluster: &cluster, namespace: &namespace, node: &node };
    let mut metrics = Vec::new();
    let mut live = Vec::new();
    for kind in config.sink.iter() {
        let sink = match crate::sinks::metric_sink(kind, &ctx).await {
            Ok(s) => s,
            Err(e) => return Exit::Failed(e.to_string()),
        };
        live.push(sink.live());
        metrics.push((kind, Route::open(&config, &namespace, spool_dir(&config, kind), sink)));
    }
    let to = crate::sinks::records_for(&config.sink);
    let records = if role.runs_node() && config.node.job_metrics.records() && to != Records::None {
        let group = config.logs.group_for(&cluster);
        let sink = match crate::sinks::logs::build(&ctx, &group).await {
            Ok(s) => s,
            Err(e) => return Exit::Failed(e.to_string()),
        };
        let dir = (to == Records::Logs).then(|| config.spool.dir.join("logs"));
        Some(Route::open(&config, &group, dir, sink))
    } else {
        None
    };
    // Job costs: the price and node sizes, looked up off the collection thread.
    let cost = (role.runs_node() && config.cost.enabled).then(|| {
        let cmds = crate::sources::head::command::SlurmCommands::new(
            config.slurm.bin_dir.clone(),
            config.slurm.command_timeout,
        );
        let lookup = crate::cost::lookup::Lookup::new(&config.cost, cmds, Default::default());
        // This host's own node is asked for at once, so that its first job has a size.
        lookup.prices().size(&node);
        lookup
    });
    let parts = crate::pipeline::Parts {
        cluster,
        node,
        metrics: metrics
            .iter()
            .map(|(kind, r)| crate::pipeline::Delivered {
                sink: *kind,
                stats: r.stats.clone(),
                spool: r.spool.clone(),
            })
            .collect(),
        records: records.as_ref().map(|r| r.stats.clone()),
        prices: cost.as_ref().map(|c| c.prices().clone()),
    };
    let metrics = metrics.into_iter().map(|(_, r)| r).collect();
    let pipeline_config = config.clone();
    let make = move || Pipeline::new(&pipeline_config, role, parts).showing_live(live);
    if cli.once {
        crate::daemon::once(make(), metrics, records, cost).await
    } else {
        crate::daemon::daemon(make, metrics, records, &config, role, cost).await
    }
}

/// A destination's spool directory ([`SinkKind::spool_dir`]).
pub fn spool_dir(config: &Config, kind: SinkKind) -> Option<std::path::PathBuf> {
    kind.spool_dir(&config.spool.dir)
}
