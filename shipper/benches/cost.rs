//! What the shipper costs in CloudWatch a month, at list prices (us-east-1), for three clusters:
//!
//! - C: the most common ParallelCluster cluster: one queue of dynamic nodes scaling to zero, on
//!   average 2 busy 8 hours a day, 200 jobs a day of 5 minutes (3 accounts);
//! - A: 64 nodes, 2,000 jobs a day of 30 minutes (2 partitions, 10 accounts);
//! - B: 1,000 nodes, 100,000 jobs a day of 5 minutes (8 partitions, 50 accounts).
//!
//! Each is run at reduced scale against LocalStack: one simulated hour of a few of its nodes
//! (8 of A's, 16 of B's, each with the jobs the scenario gives a node: arrivals evenly spaced,
//! one job on one node, the scenario's duration), every 30 s a collection of synthetic per-job
//! samples as the node collector emits them (cgroup v1: every per-job metric of the catalog but
//! the GPU ones), and every `flush_interval` (120 s) a flush, through the shipper's own `pipeline::Pipeline` (the
//! transforms, the aggregator, the self-metrics) on simulated time, and
//! `sinks::route::Route` (intake, spool, delivery) into the real CloudWatch and CloudWatch Logs sinks.
//! The head node is the real head collector running fake `sinfo`/`squeue`/`sdiag` that print
//! the scenario's cluster. Then the real Lambda (`bootstrap`, through a stand-in Runtime API)
//! runs once for the last simulated minute. Counted: distinct metrics (ListMetrics),
//! PutMetricData requests, PutLogEvents bytes (message + 26 per event), the Lambda's
//! GetMetricData series and ListMetrics calls. Extrapolated to the whole cluster and a month,
//! priced, and compared with the target; then again with `node.job_metrics = "metrics"` (per-job
//! custom metrics, the old default), the baseline. See docs/cost.md for the model. In that run
//! the same flushes are also encoded as the OTLP sink sends them (cost/otlp.rs): its bytes a
//! month, priced at `COST_OTLP_PER_GB`, and as the `emf` destination sends them (cost/emf.rs):
//! the same metrics, no PutMetricData requests, their log bytes.
//!
//! `scripts/cost.sh` (LocalStack, the Lambda build, this bench). Alone:
//! `eval "$(scripts/bench/localstack.sh start)"; COST_LAMBDA_BOOTSTRAP=target/debug/bootstrap
//! cargo bench -p slurm-cw-shipper --bench cost`. `COST_SCENARIOS=A` runs one scenario,
//! `COST_MODES=logs` skips the baseline, `COST_DETAIL=1` adds the metrics by name,
//! `COST_EXCLUDE=Name,...` and `COST_TOP_RPC_TYPES=n` try `exclude_metrics` and
//! `head.top_rpc_types`.

#[path = "cost/emf.rs"]
mod emf;
#[path = "cost/host.rs"]
mod host;
#[path = "../../tests/support/http.rs"]
mod http;
#[path = "cost/lambda.rs"]
mod lambda;
#[path = "cost/listing.rs"]
mod listing;
#[path = "cost/month.rs"]
mod month;
#[path = "cost/otlp.rs"]
mod otlp;
#[path = "cost/scenario.rs"]
mod scenario;
#[path = "cost/slurm.rs"]
mod slurm;
#[path = "cost/views.rs"]
mod views;

use host::*;
use lambda::*;
use listing::*;
use month::*;
use scenario::*;
use slurm::{FakeSdiag, fake_slurm};

use slurm_cw_catalog::dims::{ACCOUNT, COLLECTOR, JOB_ID, NODE_NAME, USER};
use slurm_cw_catalog::metrics::*;
use slurm_cw_formats::slurm::node::NodeSize;
use slurm_cw_shipper::cost::{Basis, Price, Prices};
use slurm_cw_shipper::datum::format_timestamp;
use slurm_cw_shipper::pipeline::Delivered;
use slurm_cw_shipper::pipeline::{Parts, Pipeline};
use slurm_cw_shipper::role::Role;
use slurm_cw_shipper::sample::{Batch, Dims, JobFigures, JobInfo, JobReading};
use slurm_cw_shipper::settings::Settings;
use slurm_cw_shipper::sinks::cloudwatch::{self as cloudwatch, CloudWatchSink, retry::Backoff};
use slurm_cw_shipper::sinks::delivery::{Destination, Step};
use slurm_cw_shipper::sinks::logs::LogsSink;
use slurm_cw_shipper::sinks::logs::RecordSink;
use slurm_cw_shipper::sinks::route::Route;
use slurm_cw_shipper::sinks::{MetricSink, SinkKind};
use slurm_cw_shipper::sources::Collector;
use slurm_cw_shipper::sources::head::HeadCollector;
use slurm_cw_shipper::sources::head::command::SlurmCommands;
use slurm_cw_shipper::sources::shipper::ShipperCollector;
use slurm_cw_shipper::transforms::shape::JobMetrics;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::BufReader;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// One scenario in one mode, measured.
struct Run {
    scenario: Scenario,
    mode: JobMetrics,
    nodes: Sent,
    head: Sent,
    /// The head's distinct series in its first and second idle hour (scenarios whose nodes
    /// scale to zero; empty else).
    idle_series: Vec<usize>,
    /// Metric names the hosts sent in their warm-up hour (listed by their daily zero).
    listed_earlier: BTreeSet<String>,
    listing: Listing,
    /// The fields of the head's `scheduler_sample` records, as read back from CloudWatch Logs.
    record_fields: BTreeSet<String>,
    lambda: Option<LambdaRun>,
    seconds: f64,
    otlp_nodes: otlp::OtlpBytes,
    otlp_head: otlp::OtlpBytes,
    emf_nodes: emf::EmfBytes,
    emf_head: emf::EmfBytes,
}

async fn simulate(
    url: &str,
    sdk: &aws_config::SdkConfig,
    s: Scenario,
    mode: JobMetrics,
    bootstrap: Option<&Path>,
) -> Run {
    let started = Instant::now();
    let tag = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() % 100_000_000).unwrap_or(0);
    let mode_name = if mode == JobMetrics::Metrics { "metrics" } else { "logs" };
    let namespace = format!("CostBench/{}{mode_name}{tag}", s.name);
    let cluster = format!("cost{}{mode_name}{tag}", s.name.to_lowercase());
    let work = tempfile::Builder::new()
        .prefix("slurm-cw-cost")
        .tempdir_in(if Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" })
        .expect("a temporary directory");

    let mut config = Settings {
        namespace: Some(namespace.clone()),
        cluster_name: Some(cluster.clone()),
        ..Settings::default()
    };
    config.node.job_metrics = mode;
    // For trying a trimmed configuration (docs/cost.md): metric names never shipped, and fewer
    // RPC types by name.
    if let Some(n) = std::env::var("COST_TOP_RPC_TYPES").ok().and_then(|v| v.parse().ok()) {
        config.head.top_rpc_types = n;
    }
    if let Ok(names) = std::env::var("COST_EXCLUDE") {
        config.exclude_metrics =
            names.split(',').map(|n| n.trim().to_owned()).filter(|n| !n.is_empty()).collect();
    }
    let group = config.logs.group_for(&cluster);
    let logs_client = aws_sdk_cloudwatchlogs::Client::from_conf(
        aws_sdk_cloudwatchlogs::config::Builder::from(sdk)
            .retry_config(aws_sdk_cloudwatchlogs::config::retry::RetryConfig::disabled())
            .build(),
    );
    // The Terraform module creates it; the Lambda's findings stage reads it in either mode.
    logs_client.create_log_group().log_group_name(&group).send().await.expect("CreateLogGroup");
    let cw = aws_sdk_cloudwatch::Client::from_conf(
        aws_sdk_cloudwatch::config::Builder::from(sdk)
            .retry_config(aws_sdk_cloudwatch::config::retry::RetryConfig::disabled())
            .build(),
    );

    let now = epoch(SystemTime::now());
    let t_end = now - now % 60 - 60;
    let t0 = t_end - SIM_SECONDS;
    let names: Vec<String> = (0..s.sim_nodes).map(|i| node_name(&s, i)).collect();
    let all_jobs = jobs_for(&s, t0, &names);
    let bin = work.path().join("slurm");
    std::fs::create_dir_all(&bin).expect("mkdir");
    fake_slurm(&s, &bin, false);

    let make = |node: &str, collectors: Vec<Box<dyn Collector>>, runs_node: bool| {
        let mut c = config.clone();
        c.spool.dir = work.path().join("spool").join(node);
        let metric_sink: MetricSink =
            Box::new(CloudWatchSink::from_client(cw.clone(), cloudwatch_settings(&c, &namespace)));
        let metrics = Route::open(&c.spool, &c.delivery, &namespace, Some(c.spool.dir.clone()), metric_sink);
        let role = if runs_node { Role::Node } else { Role::Head };
        let records = c.writes_records(role).then(|| {
            let settings = slurm_cw_shipper::sinks::logs::settings(&c.cloudwatch, &c.logs, &group, node);
            let sink = RecordSink::Logs(LogsSink::from_client(logs_client.clone(), settings));
            Route::open(&c.spool, &c.delivery, &group, Some(c.spool.dir.join("logs")), sink)
        });
        // Two destinations, as `sink = ["cloudwatch", "otlp"]` makes them: CloudWatch's sent
        // for real, the OTLP one's datums (its own shape) only encoded (cost/otlp.rs).
        let parts = Parts {
            cluster: cluster.clone(),
            node: node.to_owned(),
            metrics: vec![
                Delivered {
                    sink: SinkKind::default(),
                    stats: metrics.stats.clone(),
                    spool: metrics.spool.clone(),
                },
                Delivered {
                    sink: SinkKind::named("otlp").expect("registered"),
                    stats: Default::default(),
                    spool: None,
                },
            ],
            records: records.as_ref().map(|r| r.stats.clone()),
            // Job costs on, as by default, at a configured price (c6i.16xlarge or c7i.48xlarge
            // On-Demand in us-east-1): the JobCost and JobWaste metrics count here too.
            prices: runs_node.then(|| {
                let cpus = if s.cores >= 16 { 64.0 } else { 192.0 };
                let price = Price { hourly: cpus * 0.0425, basis: Basis::Configured };
                Prices::fixed(
                    price,
                    &[(node, NodeSize { cpus, memory_bytes: cpus * 8.0 * (1u64 << 30) as f64, gpus: 0.0 })],
                )
            }),
            // The simulated daemons start in the simulated past (the warm-up hour), not now:
            // the cost metrics count from there, as a daemon counts from its own start.
            resume_from: Some(UNIX_EPOCH + Duration::from_secs(t0 - SIM_SECONDS)),
        };
        Host {
            node: node.to_owned(),
            pipeline: Pipeline::new(&c.pipeline(), role, collectors, parts),
            runs_node,
            metrics,
            records,
            sent: Sent::default(),
            seen: HashMap::new(),
            process_every: c.node.process_every.max(1),
            cluster: cluster.clone(),
            namespace: namespace.clone(),
            otlp: otlp::OtlpBytes::default(),
            emf: emf::EmfBytes::default(),
            sdiag: None,
        }
    };
    let mut hosts: Vec<(Host, Option<Vec<Job>>)> = Vec::new();
    for name in &names {
        let mine: Vec<Job> = all_jobs.iter().filter(|j| &j.info.node == name).cloned().collect();
        hosts.push((make(name, vec![Box::new(ShipperCollector::new(name.clone()))], true), Some(mine)));
    }
    let head_name = "head-node".to_owned();
    let head: Vec<Box<dyn Collector>> = vec![
        Box::new(HeadCollector::new(
            SlurmCommands::new(Some(bin.clone()), config.slurm.command_timeout),
            config.head.clone(),
        )),
        Box::new(ShipperCollector::new(head_name.clone())),
    ];
    let mut head = make(&head_name, head, false);
    head.sdiag = Some(FakeSdiag { dir: bin.clone(), scenario: s, t0, idle_from: None });
    hosts.push((head, None));

    // Every host on its own task, as every node runs its own shipper.
    let flush = config.flush_interval.as_secs().max(COLLECT);
    let local = tokio::task::LocalSet::new();
    // Where the nodes scale to zero, the cluster is idle the rest of the day.
    let idle_after = (s.busy_hours < 24.0).then(|| bin.clone());
    let tasks: Vec<_> = hosts
        .into_iter()
        .map(|(mut host, jobs)| {
            let idle_after = idle_after.clone().filter(|_| !host.runs_node);
            local.spawn_local(async move {
                // The head runs all day, and so do the nodes of a cluster that never scales
                // down: an hour before the busy one (the head's busy too, as the hour before most
                // of a day's busy hours is; a node's without jobs), so that the hour measured is
                // not the daemon's first (the zeros a daemon sends once a day are sent: on a
                // cluster that rests, in the first busy hour of the day, one of C's eight). The
                // nodes of a cluster that scales to zero start each day: their first hour is the
                // one measured.
                let mut warm = Vec::new();
                if !host.runs_node || s.busy_hours >= 24.0 {
                    warm = host.undelivered_hours("warm-up", t0 - SIM_SECONDS, 1, flush).await;
                }
                let refs: Option<Vec<&Job>> = jobs.as_ref().map(|j| j.iter().collect());
                for step in 0..SIM_SECONDS / COLLECT {
                    let t = t0 + step * COLLECT;
                    host.collect(t, refs.as_deref()).await;
                    if (step + 1) % (flush / COLLECT) == 0 {
                        host.flush(t + COLLECT - 1).await;
                    }
                }
                host.finish();
                // The head's series in the first two idle hours after the busy one.
                let idle = match idle_after {
                    Some(bin) => {
                        fake_slurm(&s, &bin, true);
                        if let Some(f) = &mut host.sdiag {
                            f.idle_from = Some(t0 + SIM_SECONDS);
                        }
                        host.undelivered_hours("idle", t0 + SIM_SECONDS, 2, flush).await
                    }
                    None => Vec::new(),
                };
                let idle = idle.iter().map(BTreeSet::len).collect::<Vec<_>>();
                // What the head sent while warming up: listed in CloudWatch as well (a series at
                // zero goes once a day), whether or not it had data in the hour measured.
                let warm: BTreeSet<String> =
                    warm.iter().flatten().filter_map(|k| k.split(' ').next()).map(str::to_owned).collect();
                (host.runs_node, host.sent, host.otlp, host.emf, idle, warm)
            })
        })
        .collect();
    let results = local
        .run_until(async {
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.expect("a simulated host"));
            }
            out
        })
        .await;
    let (mut nodes, mut head_sent) = (Sent::default(), Sent::default());
    let (mut otlp_nodes, mut otlp_head) = (otlp::OtlpBytes::default(), otlp::OtlpBytes::default());
    let (mut emf_nodes, mut emf_head) = (emf::EmfBytes::default(), emf::EmfBytes::default());
    let mut idle_series = Vec::new();
    let mut listed_earlier = BTreeSet::new();
    for (is_node, sent, otlp, emf, idle, warm) in &results {
        listed_earlier.extend(warm.iter().cloned());
        if *is_node {
            nodes.add(sent);
            otlp_nodes.add(otlp);
            emf_nodes.add(emf);
        } else {
            head_sent.add(sent);
            idle_series.clone_from(idle);
            otlp_head.add(otlp);
            emf_head.add(emf);
        }
    }
    let lambda = bootstrap.map(|b| {
        let (b, url, ns, cl) = (b.to_owned(), url.to_owned(), namespace.clone(), cluster.clone());
        // Blocking: it waits on a child process and a channel.
        std::thread::spawn(move || run_lambda(&b, &url, &ns, &cl, t_end - 60)).join().expect("the Lambda run")
    });
    let listing = list_metrics(&cw, &namespace).await;
    let record_fields = views::record_fields(&logs_client, &group).await;
    Run {
        scenario: s,
        mode,
        nodes,
        head: head_sent,
        idle_series,
        listed_earlier,
        listing,
        record_fields,
        lambda,
        seconds: started.elapsed().as_secs_f64(),
        otlp_nodes,
        otlp_head,
        emf_nodes,
        emf_head,
    }
}

fn cloudwatch_settings(c: &Settings, namespace: &str) -> cloudwatch::Settings {
    let mut s = cloudwatch::settings(&c.cloudwatch, namespace);
    // LocalStack answers slowly under load; the daemon's 10 s would only add retries here.
    s.attempt_timeout = Duration::from_secs(60);
    s.backoff = Backoff {
        base: Duration::from_millis(100),
        cap: Duration::from_secs(2),
        max_retries: s.backoff.max_retries,
    };
    s
}

fn main() {
    let Ok(url) = std::env::var("BENCH_LOCALSTACK_URL") else {
        println!("needs LocalStack: scripts/cost.sh, or eval \"$(scripts/bench/localstack.sh start)\" first");
        return;
    };
    let bootstrap = std::env::var_os("COST_LAMBDA_BOOTSTRAP").map(PathBuf::from).filter(|p| p.is_file());
    let wanted = std::env::var("COST_SCENARIOS").unwrap_or_else(|_| "C,A,B".into());
    let modes = std::env::var("COST_MODES").unwrap_or_else(|_| "logs,metrics".into());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    println!(
        "CloudWatch cost a month at us-east-1 list prices, 730 h; model and assumptions in docs/cost.md"
    );
    rt.block_on(async {
        let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(&url)
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_cloudwatch::config::Credentials::new(
                "test", "test", None, None, "cost",
            ))
            .load()
            .await;
        for s in SCENARIOS.iter().filter(|s| wanted.split(',').any(|w| w.trim() == s.name)) {
            let mut default_total = None;
            for (name, mode) in [("logs", JobMetrics::Logs), ("metrics", JobMetrics::Metrics)] {
                if !modes.split(',').any(|m| m.trim() == name) {
                    continue;
                }
                let run = simulate(&url, &sdk, *s, mode, bootstrap.as_deref()).await;
                let m = month(&run);
                print(&run, &m, if mode == JobMetrics::Metrics { default_total } else { None });
                if mode == JobMetrics::Logs {
                    default_total = Some(m.total);
                    // What the OTLP destination beside it sends: its own shape, per-job series
                    // included whatever node.job_metrics says.
                    otlp::print(
                        s.name,
                        s.sim_nodes,
                        s.nodes,
                        s.busy_hours / 24.0,
                        &run.otlp_nodes,
                        &run.otlp_head,
                        m.total,
                    );
                    emf::print(s, &run, &m);
                    views::print(s.name, &run.listing, &run.listed_earlier, &run.record_fields);
                }
            }
        }
    });
}
