//! The table of contents of a run: the settings merged with the command line, the cluster and
//! role resolved, one route per destination (sinks/route.rs, built by the registry in
//! sinks/mod.rs), the pipeline (pipeline.rs) over the collectors (sources/table.rs), then
//! `--once` or the daemon loop (daemon.rs). Each part is given its own section of the settings.

use crate::Exit;
use crate::cli::Cli;
use crate::settings::Settings;
use crate::sinks::{Records, SinkKind};

pub use crate::daemon::SHUTDOWN_GRACE;
pub use crate::pipeline::{Flushed, Pipeline};
pub use crate::sinks::route::{Route, open_spool};

pub async fn run(cli: Cli, mut config: Settings) -> Exit {
    cli.apply_to(&mut config);
    if cli.check {
        return crate::check::run(&config).await;
    }
    let slurm_conf = config.slurm_conf_path();
    // slurm.conf's SlurmUser is never the token user (`--check` has a row for it).
    if let Some(entries) = slurm_conf.as_deref().and_then(|p| crate::slurm_conf::entries(p).ok())
        && let Err(e) = config.head.check_with_slurm_conf(&entries)
    {
        return Exit::BadConfig(e.to_string());
    }
    let cluster = match config.resolve_cluster_name() {
        Ok((name, _)) => name,
        Err(e) => return Exit::BadConfig(e.to_string()),
    };
    let namespace = match config.namespace_for(&cluster) {
        Ok(ns) => ns,
        Err(e) => return Exit::BadConfig(e.to_string()),
    };
    let (role, why) = match crate::role::detect(config.role, &config.node.proc_root, slurm_conf.as_deref()) {
        Ok(r) => r,
        Err(e) => return Exit::BadConfig(e.to_string()),
    };
    let node = config.node_name();
    let sinks: Vec<&str> = config.sink.iter().map(SinkKind::as_str).collect();
    tracing::info!(role = role.as_str(), why, cluster, namespace, node, ?sinks, "starting");
    for note in &config.deprecated {
        tracing::warn!(note = %note, "configuration key renamed; the old name still works");
    }
    let cx = config.sink_context(&cluster, &namespace, &node, slurm_conf.as_deref());
    let (spool, delivery) = (&config.spool, &config.delivery);
    let mut metrics = Vec::new();
    let mut live = Vec::new();
    for kind in config.sink.iter() {
        let sink = match crate::sinks::metric_sink(kind, &config, &cx).await {
            Ok(s) => s,
            Err(e) if e.bad_config => return Exit::BadConfig(e.to_string()),
            Err(e) => return Exit::Failed(e.to_string()),
        };
        live.push(sink.live());
        metrics.push((kind, Route::open(spool, delivery, &namespace, kind.spool_dir(&spool.dir), sink)));
    }
    let records = if config.writes_records(role) && cx.records != Records::None {
        let group = config.logs.group_for(&cluster);
        let sink = match crate::sinks::logs::build(&cx, &group).await {
            Ok(s) => s,
            Err(e) => return Exit::Failed(e.to_string()),
        };
        let dir = (cx.records == Records::Logs).then(|| spool.dir.join("logs"));
        Some(Route::open(spool, delivery, &group, dir, sink))
    } else {
        None
    };
    // Job costs: the price and node sizes, looked up off the collection thread.
    let cost = (role.runs_node() && config.cost.enabled).then(|| {
        let lookup =
            crate::cost::lookup::Lookup::new(&config.cost, config.slurm.commands(), Default::default());
        // This host's own node is asked for at once, so that its first job has a size.
        lookup.prices().size(&node);
        lookup
    });
    // Beside the spool, where this process holds one: it is what makes delivery durable, and a
    // `--once` beside the daemon (whose spool it is) must not count the daemon's time.
    let counted = (cost.is_some() && metrics.iter().any(|(_, r)| r.spool.is_some()))
        .then(|| crate::cost::counted::Counted::in_dir(&config.spool.dir));
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
        resume_from: counted.as_ref().and_then(|c| c.read(std::time::SystemTime::now())),
    };
    let metrics = metrics.into_iter().map(|(_, r)| r).collect();
    let options = config.pipeline();
    let schedule = config.schedule(role);
    // The collectors are built on the collection thread, which they then live on; the node
    // collector tells the hook socket whose jobs run here.
    let owners = crate::sources::JobOwners::default();
    let publish = owners.clone();
    let make = move || {
        let collectors = crate::sources::table::build(&config, role, &parts.node, publish);
        Pipeline::new(&options, role, collectors, parts).showing_live(live)
    };
    if cli.once {
        crate::daemon::once(make(), metrics, records, cost, counted).await
    } else {
        crate::daemon::daemon(make, metrics, records, &schedule, cost, counted, owners).await
    }
}
