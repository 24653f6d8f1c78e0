//! The table of contents of a run: the configuration merged with the command line, the
//! cluster and role resolved, one route per destination (sinks/route.rs), the pipeline
//! (pipeline.rs), then `--once` or the daemon loop (daemon.rs).

use crate::Exit;
use crate::cli::Cli;
use crate::config::Config;
use crate::sinks::route::{build_record_sink, build_sink};

pub use crate::daemon::SHUTDOWN_GRACE;
pub use crate::pipeline::{Flushed, Pipeline};
pub use crate::sinks::route::{Route, cloudwatch_settings, logs_settings, open_spool};

pub async fn run(cli: Cli, mut config: Config) -> Exit {
    cli.apply_to(&mut config);
    if cli.check {
        return crate::check::run(&config).await;
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
        Err(e) => return Exit::BadConfig(e),
    };
    let node = config.node_name();
    tracing::info!(role = role.as_str(), why, cluster, namespace, node, "starting");
    for note in &config.deprecated {
        tracing::warn!(note = %note, "configuration key renamed; the old name still works");
    }
    let group = config.logs.group_for(&cluster);
    let sink = match build_sink(&config, &namespace).await {
        Ok(s) => s,
        Err(e) => return Exit::Failed(e.to_string()),
    };
    let metrics = Route::open(&config, &namespace, config.spool.dir.clone(), sink);
    let records = if role.runs_node() && config.node.job_metrics.records() {
        let sink = match build_record_sink(&config, &group, &node).await {
            Ok(s) => s,
            Err(e) => return Exit::Failed(e.to_string()),
        };
        Some(Route::open(&config, &group, config.spool.dir.join("logs"), sink))
    } else {
        None
    };
    let (stats, record_stats) = (metrics.stats.clone(), records.as_ref().map(|r| r.stats.clone()));
    let (spool, pipeline_config) = (metrics.spool.clone(), config.clone());
    let make = move || Pipeline::new(&pipeline_config, role, cluster, node, stats, record_stats, spool);
    if cli.once {
        crate::daemon::once(make(), metrics, records).await
    } else {
        crate::daemon::daemon(make, metrics, records, &config, role).await
    }
}
