//! The real test bench, as integration tests see it: LocalStack and Slurm started by
//! `scripts/bench/*.sh`, found through the variables those scripts print.
//!
//! A test that needs a bench is marked `#[ignore = "needs <bench>: scripts/test.sh runs it"]`,
//! so a plain `cargo test` reports it ignored; scripts/test.sh runs it with `--include-ignored`.
//! Run so without its bench, it prints why and passes outside CI; with CI=true it fails.
#![allow(dead_code)]

pub mod emf;
pub mod proxy;
pub mod sdiag_forms;
pub mod sinfo_rows;

use aws_sdk_cloudwatch::Client;
use aws_sdk_cloudwatch::types::{Dimension, Metric, MetricDataQuery, MetricStat};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

fn missing(what: &str, how: &str) {
    if in_ci() {
        panic!("{what} is not available and CI=true requires it: {how}");
    }
    eprintln!("SKIPPED: {what} is not available ({how})");
}

/// LocalStack's URL, or None (outside CI) when it is not running.
pub fn localstack() -> Option<String> {
    match std::env::var("BENCH_LOCALSTACK_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            missing("LocalStack", "run `eval \"$(scripts/bench/localstack.sh start)\"`");
            None
        }
    }
}

/// The bench Prometheus' URL (scripts/bench/prometheus.sh: it scrapes 127.0.0.1:29100 every
/// second), or None (outside CI) when it is not running.
#[allow(dead_code)]
pub fn prometheus() -> Option<String> {
    match std::env::var("BENCH_PROMETHEUS_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            missing("the bench Prometheus", "run `eval \"$(scripts/bench/prometheus.sh start)\"` as root");
            None
        }
    }
}

/// Where the bench Prometheus scrapes a shipper's pull endpoint.
#[allow(dead_code)]
pub const PROMETHEUS_SCRAPES: &str = "127.0.0.1:29100";

/// Where it scrapes a pull endpoint guarded by a token: with the token in
/// `BENCH_PROMETHEUS_TOKEN_FILE` (job `slurm-cw-shipper-token`) and without (`-no-token`).
#[allow(dead_code)]
pub const PROMETHEUS_SCRAPES_GUARDED: &str = "127.0.0.1:29101";

/// GET /metrics from a pull endpoint at `addr`: the body of a 200, None otherwise.
pub fn scrape(addr: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// The series a PromQL instant query answers: (labels, value); none when it does not answer.
#[allow(dead_code)]
pub fn promql(url: &str, query: &str) -> Vec<(serde_json::Value, f64)> {
    let (ok, out, _) = try_cmd(
        "curl",
        &[
            "-fsS",
            "-m",
            "5",
            "-G",
            &format!("{url}/api/v1/query"),
            "--data-urlencode",
            &format!("query={query}"),
        ],
    );
    let v: serde_json::Value =
        if ok { serde_json::from_str(&out).unwrap_or_default() } else { Default::default() };
    let result = v["data"]["result"].as_array().cloned().unwrap_or_default();
    result
        .into_iter()
        .filter_map(|s| Some((s["metric"].clone(), s["value"][1].as_str()?.parse().ok()?)))
        .collect()
}

/// The bench's OTLP receiver (VictoriaMetrics, scripts/bench/victoria-metrics.sh): its OTLP
/// endpoint and its PromQL base, or None (outside CI) when it is not running.
#[allow(dead_code)]
pub fn otlp_receiver() -> Option<(String, String)> {
    match (std::env::var("BENCH_OTLP_URL"), std::env::var("BENCH_OTLP_QUERY_URL")) {
        (Ok(otlp), Ok(query)) if !otlp.is_empty() && !query.is_empty() => Some((otlp, query)),
        _ => {
            missing(
                "the bench OTLP receiver",
                "run `eval \"$(scripts/bench/victoria-metrics.sh start)\"` as root",
            );
            None
        }
    }
}

#[allow(dead_code)]
pub const MIB: f64 = 1024.0 * 1024.0;

/// A job on the first node that holds 300 MiB of anonymous memory for two minutes, account
/// `physics`, partition `batch`: (job id, node), returned once its processes hold it.
#[allow(dead_code)]
pub fn memory_job(conf: &Path) -> (String, String) {
    let node = nodes()[0].clone();
    let w = workload(conf);
    let job = sbatch(&[
        "-p",
        "batch",
        "-w",
        &node,
        "-A",
        "physics",
        "--mem=600M",
        "--wrap",
        &format!("python3 {w} memory 300 120"),
    ]);
    wait_until("the memory job to hold 300 MiB", Duration::from_secs(90), || {
        job_state(&job) == "RUNNING" && job_rss_bytes(&job, &node) >= 300.0 * MIB
    });
    (job, node)
}

/// What a destination read back of a real job's memory: see [`job_memory_read_back`].
#[allow(dead_code)]
pub struct ReadBack {
    pub job: String,
    pub node: String,
    /// The series PromQL answered for the job's `slurm_memory_rss_bytes`.
    pub series: Vec<(serde_json::Value, f64)>,
    /// The job's processes' resident memory when it answered.
    pub truth: f64,
    pub daemon: Running,
}

/// A 300 MiB job ([`memory_job`], pushed to `cleanup`) and the node role beside it sending to
/// `sink` alone (cluster `<sink>test`; `env`, the destination's settings; a collection a second,
/// a flush every two), until PromQL at `query_url` answers the job's memory. The daemon's log
/// stays in the bench directory, named when nothing answers.
#[allow(dead_code)]
pub fn job_memory_read_back(
    conf: &Path,
    sink: &str,
    env: &[(&str, &std::ffi::OsStr)],
    query_url: &str,
    cleanup: &mut SlurmCleanup,
) -> ReadBack {
    let (job, node) = memory_job(conf);
    cleanup.jobs.push(job.clone());
    let log = bench_dir(conf).join(format!("{sink}-sink-test.log"));
    let daemon = shipper()
        .args(["--role", "node", "--sink", sink])
        .env("SLURM_CW_CLUSTER_NAME", format!("{sink}test"))
        .env("SLURM_CW_COLLECT_INTERVAL", "1s")
        .env("SLURM_CW_FLUSH_INTERVAL", "2s")
        .env("SLURM_CW_DELIVERY__FLUSH_JITTER", "false")
        .env("SLURM_CW_NODE__HOOK_SOCKET", bench_dir(conf).join(format!("hook-{sink}-test.sock")))
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("the daemon's log"))
        .spawn()
        .map(Running::new)
        .expect("the shipper starts");
    let query = format!("slurm_memory_rss_bytes{{job_id=\"{job}\"}}");
    let mut series = Vec::new();
    let what =
        format!("{query} at {query_url} to answer the job's memory (the daemon's log: {})", log.display());
    // The first answers may be low: on cgroup v1 the kernel updates memory.stat's counters
    // lazily (a CI run read total_rss 1.2 MiB beside usage_in_bytes 323 MB right after the
    // job allocated), and a period's mean carries such a reading. The job's memory no longer
    // changes: wait for the answer to reach it, as the callers then assert.
    wait_until(&what, Duration::from_secs(60), || {
        series = promql(query_url, &query);
        let truth = job_rss_bytes(&job, &node);
        !series.is_empty()
            && series.iter().all(|(_, v)| *v >= 300.0 * MIB && (v - truth).abs() <= truth * 0.05)
    });
    let truth = job_rss_bytes(&job, &node);
    eprintln!(
        "{sink}: PromQL {query}: {:?} MiB; the job's processes in /proc: {:.1} MiB",
        series.iter().map(|(_, v)| (v / MIB * 10.0).round() / 10.0).collect::<Vec<_>>(),
        truth / MIB
    );
    ReadBack { job, node, series, truth, daemon }
}

/// The resident memory of a job's processes, from Slurm's own list of them and /proc.
#[allow(dead_code)]
pub fn job_rss_bytes(job: &str, node: &str) -> f64 {
    job_pids(job, node).iter().map(|p| proc_status(*p, "VmRSS")).sum::<u64>() as f64 * 1024.0
}

/// The bench slurm.conf, or None (outside CI) when the bench Slurm is not running.
pub fn slurm() -> Option<PathBuf> {
    match std::env::var("BENCH_SLURM_CONF") {
        Ok(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            missing("the bench Slurm", "run `eval \"$(scripts/bench/slurm.sh start)\"` as root");
            None
        }
    }
}

/// What the cgroup v2 VM bench (scripts/bench/vm.sh) left for a Slurm release ("24.11":
/// `BENCH_VM_OUT_24_11`), or None (outside CI) when scripts/test.sh has not run it.
pub fn vm_out(version: &str) -> Option<PathBuf> {
    let var = format!("BENCH_VM_OUT_{}", version.replace('.', "_"));
    match std::env::var(&var) {
        Ok(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            missing(
                &format!("the cgroup v2 VM bench for Slurm {version} (${var})"),
                "scripts/test.sh runs it: scripts/bench/vm.sh test, as root",
            );
            None
        }
    }
}

/// A real cgroup hierarchy this test may make directories in (v2's root, or v1's memory
/// controller), or None (outside CI) when there is none or this is not root.
pub fn cgroupfs() -> Option<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    let hierarchy =
        if root.join("cgroup.controllers").is_file() { root.to_owned() } else { root.join("memory") };
    // One name a call: tests of one process run in parallel and would race on a shared one.
    static PROBES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = hierarchy.join(format!("slurm-cw-probe-{}-{n}", std::process::id()));
    if std::fs::create_dir(&probe).is_ok() && std::fs::remove_dir(&probe).is_ok() {
        return Some(hierarchy);
    }
    missing("a writable cgroup hierarchy", "run as root on a host with cgroup v2 or v1's memory controller");
    None
}

/// The bench's nodes (`BENCH_SLURM_NODES`): c1..c4 on the 22.05 bench, n1..n4 on 24.11. Both
/// benches have partition `batch` = the first three and `debug` = the last two; the last one
/// has two GPUs.
pub fn nodes() -> Vec<String> {
    let listed = std::env::var("BENCH_SLURM_NODES").unwrap_or_default();
    let nodes: Vec<String> = listed.split_whitespace().map(str::to_owned).collect();
    if nodes.len() >= 4 { nodes } else { ["c1", "c2", "c3", "c4"].map(String::from).to_vec() }
}

/// The bench's Slurm release as (major, minor), from `BENCH_SLURM_VERSION` (22.05 when unset).
pub fn slurm_version() -> (u32, u32) {
    let v = std::env::var("BENCH_SLURM_VERSION").unwrap_or_default();
    let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor),
        _ => (22, 5),
    }
}

/// The bench's directory (state, logs, the TaskEpilog), two levels above its slurm.conf. On the
/// 24.11 bench it has the same path inside the chroot the jobs run in, so files the jobs need
/// go here.
pub fn bench_dir(conf: &Path) -> PathBuf {
    conf.parent().and_then(Path::parent).expect("bench dir").to_owned()
}

/// `from` copied to `to` by a new name and a rename, so a job never runs half a file.
fn put(from: &Path, to: &Path) {
    let tmp = to.with_extension(format!("new-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    // A hard link where it can (the 60 MiB shipper), else a copy.
    if std::fs::hard_link(from, &tmp).is_err() {
        std::fs::copy(from, &tmp)
            .unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), tmp.display()));
    }
    std::fs::rename(&tmp, to).unwrap_or_else(|e| panic!("rename to {}: {e}", to.display()));
    // rename(2) leaves both names when they were links to one file already.
    let _ = std::fs::remove_file(&tmp);
}

/// scripts/bench/workload.py where the bench's jobs can run it (the bench directory: a 24.11
/// job runs in the chroot, which sees no checkout).
pub fn workload(conf: &Path) -> String {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/bench/workload.py");
    let dst = bench_dir(conf).join("workload.py");
    put(&src, &dst);
    dst.display().to_string()
}

/// Puts the binary under test where the bench's TaskEpilog runs it (`$bench/shipper`): the
/// file itself, not a link, as the 24.11 bench's epilog runs in the chroot.
pub fn install_hook(conf: &Path) {
    put(Path::new(env!("CARGO_BIN_EXE_slurm-cw-shipper")), &bench_dir(conf).join("shipper"));
}

/// The Slurm commands tests run: taken from the bench's `BENCH_SLURM_BIN_DIR` (client
/// commands) or `BENCH_SLURM_SBIN_DIR` (daemons), so each bench's own Slurm answers.
const SLURM_PROGRAMS: &[&str] =
    &["sinfo", "squeue", "sdiag", "scontrol", "sbatch", "scancel", "srun", "sacct", "slurmctld", "slurmd"];

/// Where `program` is: a Slurm command in the bench's directories, else `program` as given.
pub fn program(program: &str) -> PathBuf {
    if SLURM_PROGRAMS.contains(&program) {
        for var in ["BENCH_SLURM_BIN_DIR", "BENCH_SLURM_SBIN_DIR"] {
            if let Ok(dir) = std::env::var(var)
                && !dir.is_empty()
                && Path::new(&dir).join(program).is_file()
            {
                return Path::new(&dir).join(program);
            }
        }
        if program.starts_with("slurm") {
            return Path::new("/usr/sbin").join(program);
        }
    }
    PathBuf::from(program)
}

/// A namespace no other test (or earlier run) writes to.
pub fn unique_namespace(test: &str) -> String {
    let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos();
    format!("SlurmTest/{test}/{}-{nanos}", std::process::id())
}

/// The SDK configuration for LocalStack, with test credentials.
async fn localstack_sdk(url: &str) -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(url)
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_cloudwatch::config::Credentials::new(
            "test", "test", None, None, "bench",
        ))
        .load()
        .await
}

/// A CloudWatch client for LocalStack.
pub async fn cloudwatch(url: &str) -> Client {
    Client::new(&localstack_sdk(url).await)
}

/// A CloudWatch Logs client for LocalStack.
pub async fn logs(url: &str) -> aws_sdk_cloudwatchlogs::Client {
    aws_sdk_cloudwatchlogs::Client::new(&localstack_sdk(url).await)
}

/// Creates a job log group of its own for one test (the Terraform module does it for a
/// cluster); returns its name.
pub async fn job_log_group(logs: &aws_sdk_cloudwatchlogs::Client, test: &str) -> String {
    let group = format!("/slurm-cw/{}/jobs", unique_namespace(test).replace('/', "-"));
    logs.create_log_group().log_group_name(&group).send().await.expect("CreateLogGroup in LocalStack");
    group
}

/// The job records in `group` whose fields have these values, every page, as JSON; retried for
/// a few seconds until some arrive (LocalStack stores them a moment later). The first field is
/// filtered by CloudWatch Logs (a JSON filter pattern), all of them here: LocalStack 4.13 does
/// not apply `&&` in a pattern.
pub async fn records(
    logs: &aws_sdk_cloudwatchlogs::Client,
    group: &str,
    fields: &[(&str, &str)],
) -> Vec<serde_json::Value> {
    let pattern = fields.first().map(|(k, v)| format!("{{ $.{k} = \"{v}\" }}")).unwrap_or_default();
    let wanted =
        |r: &serde_json::Value| fields.iter().all(|(k, v)| r.get(*k).and_then(|x| x.as_str()) == Some(*v));
    for _ in 0..20 {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            let page = logs
                .filter_log_events()
                .log_group_name(group)
                .filter_pattern(&pattern)
                .set_next_token(token)
                .send()
                .await
                .expect("FilterLogEvents");
            for e in page.events() {
                let v: serde_json::Value =
                    serde_json::from_str(e.message().unwrap_or("")).expect("a record is one JSON object");
                if wanted(&v) {
                    out.push(v);
                }
            }
            token = page.next_token().map(str::to_owned);
            if token.is_none() {
                break;
            }
        }
        if !out.is_empty() {
            return out;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Vec::new()
}

/// The environment the shipper binary needs to talk to LocalStack.
pub fn shipper_env(url: &str, namespace: &str) -> Vec<(String, String)> {
    vec![
        ("AWS_ENDPOINT_URL".into(), url.into()),
        ("AWS_ACCESS_KEY_ID".into(), "test".into()),
        ("AWS_SECRET_ACCESS_KEY".into(), "test".into()),
        ("AWS_REGION".into(), "us-east-1".into()),
        ("AWS_EC2_METADATA_DISABLED".into(), "true".into()),
        ("SLURM_CW_NAMESPACE".into(), namespace.into()),
        ("SLURM_CW_CLOUDWATCH__MAX_RETRIES".into(), "2".into()),
        ("SLURM_CW_CLOUDWATCH__RETRY_BASE_DELAY".into(), "100ms".into()),
    ]
}

/// The shipper binary, with a spool of its own (never the system's /var/lib one) and none of
/// the developer's SLURM_CW_* settings.
pub fn shipper() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_slurm-cw-shipper"));
    for (k, _) in std::env::vars() {
        if k.starts_with("SLURM_CW_") {
            c.env_remove(k);
        }
    }
    // The bench's Slurm, as a cluster's slurm.bin_dir would name it.
    if let Ok(dir) = std::env::var("BENCH_SLURM_BIN_DIR")
        && !dir.is_empty()
    {
        c.env("SLURM_CW_SLURM__BIN_DIR", dir);
    }
    let spool = tempfile::Builder::new().prefix("slurm-cw-test-spool-").tempdir().map(|d| d.keep());
    if let Ok(dir) = spool {
        c.env("SLURM_CW_SPOOL__DIR", dir);
    }
    c
}

/// The dimension sets `metric` is listed with in `namespace` (each sorted by name): exact, where
/// a LocalStack read of a set also takes in its supersets.
pub async fn dimension_sets(cw: &Client, namespace: &str, metric: &str) -> Vec<Vec<(String, String)>> {
    let listed =
        cw.list_metrics().namespace(namespace).metric_name(metric).send().await.expect("ListMetrics");
    listed
        .metrics()
        .iter()
        .map(|m| {
            let mut d: Vec<(String, String)> = m
                .dimensions()
                .iter()
                .map(|d| (d.name().unwrap_or_default().to_owned(), d.value().unwrap_or_default().to_owned()))
                .collect();
            d.sort();
            d
        })
        .collect()
}

/// One statistic of one metric over the last `window` (one bucket from now - window, so
/// Maximum, Average and Sum are over every datum sent in it); None when there is no datapoint
/// after a few seconds (LocalStack stores what it accepted a moment later).
pub async fn statistic(
    cw: &Client,
    namespace: &str,
    metric: &str,
    dims: &[(&str, &str)],
    stat: &str,
    window: Duration,
) -> Option<f64> {
    for _ in 0..20 {
        if let Some(v) = statistic_now(cw, namespace, metric, dims, stat, window).await {
            return Some(v);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}

async fn statistic_now(
    cw: &Client,
    namespace: &str,
    metric: &str,
    dims: &[(&str, &str)],
    stat: &str,
    window: Duration,
) -> Option<f64> {
    // One period from at least `window` ago to a minute ahead: LocalStack stores whole seconds
    // and reads [start, end), so an end of "now" would leave out what was sent this second.
    let period = (window.as_secs() + 60).div_ceil(60) * 60;
    let end = SystemTime::now() + Duration::from_secs(60);
    let start = end - Duration::from_secs(period);
    let dimensions: Vec<Dimension> =
        dims.iter().map(|(n, v)| Dimension::builder().name(*n).value(*v).build()).collect();
    let query = MetricDataQuery::builder()
        .id("q")
        .metric_stat(
            MetricStat::builder()
                .metric(
                    Metric::builder()
                        .namespace(namespace)
                        .metric_name(metric)
                        .set_dimensions(Some(dimensions))
                        .build(),
                )
                .period(period as i32)
                .stat(stat)
                .build(),
        )
        .build();
    let out = cw
        .get_metric_data()
        .metric_data_queries(query)
        .start_time(aws_smithy_types::DateTime::from(start))
        .end_time(aws_smithy_types::DateTime::from(end))
        .send()
        .await
        .expect("GetMetricData against LocalStack");
    let values: Vec<f64> = out.metric_data_results().iter().flat_map(|r| r.values().to_vec()).collect();
    assert!(values.len() <= 1, "{metric}: one bucket expected, got {values:?}");
    values.first().copied()
}

/// Runs a command (argv, no shell; a Slurm command from the bench, see [`program`]) and returns
/// its standard output; panics with stderr on failure.
pub fn cmd(program: &str, args: &[&str]) -> String {
    let out =
        Command::new(self::program(program)).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a command and returns (success, stdout, stderr) without judging.
pub fn try_cmd(program: &str, args: &[&str]) -> (bool, String, String) {
    match Command::new(self::program(program)).args(args).output() {
        Ok(o) => (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        ),
        Err(e) => (false, String::new(), e.to_string()),
    }
}

/// `sbatch --parsable ARGS`; returns the job id.
pub fn sbatch(args: &[&str]) -> String {
    let mut full = vec!["--parsable", "--output=/dev/null"];
    full.extend_from_slice(args);
    let out = cmd("sbatch", &full);
    out.trim().split(';').next().unwrap_or("").to_owned()
}

/// A copy of this test binary that other users can run (the checkout may sit in a directory
/// only root enters), in `dir`, which is opened to them.
pub fn exe_for_others(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let me = dir.join(std::env::current_exe().unwrap().file_name().unwrap());
    std::fs::copy(std::env::current_exe().unwrap(), &me).unwrap();
    me
}

/// Polls `f` every 200 ms until it returns true or `limit` passes; panics with `what` then.
pub fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("timed out after {limit:?} waiting for {what}");
}

/// The state of one job, as squeue prints %T (empty once slurmctld forgot it).
pub fn job_state(id: &str) -> String {
    let (_, out, _) = try_cmd("squeue", &["-h", "-j", id, "-t", "all", "-o", "%T"]);
    out.lines().next().unwrap_or("").trim().to_owned()
}

/// The pending reason of one job.
pub fn job_reason(id: &str) -> String {
    let (_, out, _) = try_cmd("squeue", &["-h", "-j", id, "-t", "all", "-o", "%r"]);
    out.lines().next().unwrap_or("").trim().to_owned()
}

/// Serialises tests that change the bench Slurm (nodes down, jobs, slurmctld restarts).
pub static SLURM_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Leaves the bench Slurm as it found it: cancels this test's jobs and waits (at most a minute)
/// until none is pending, running or completing, so that the next test's daemon does not see
/// them (a daemon prices a job it first sees from its Slurm start); resumes nodes it took out.
pub struct SlurmCleanup {
    pub jobs: Vec<String>,
    pub nodes: Vec<String>,
}

impl Drop for SlurmCleanup {
    fn drop(&mut self) {
        if !self.jobs.is_empty() {
            let mut args: Vec<&str> = vec!["--quiet"];
            args.extend(self.jobs.iter().map(String::as_str));
            let _ = try_cmd("scancel", &args);
            let ids = self.jobs.join(",");
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while std::time::Instant::now() < deadline {
                let (ok, out, _) = try_cmd("squeue", &["-h", "-j", &ids, "-t", "PD,R,CG,CF,S", "-o", "%i"]);
                if !ok || out.trim().is_empty() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        for n in &self.nodes {
            let _ = try_cmd("scontrol", &["update", &format!("nodename={n}"), "state=resume"]);
        }
    }
}

/// The pids Slurm itself lists for a job on a node (`scontrol listpids JOB NODE`): an
/// independent view of a job's processes.
pub fn job_pids(job: &str, node: &str) -> Vec<u32> {
    let (_, out, _) = try_cmd("scontrol", &["listpids", job, node]);
    out.lines().skip(1).filter_map(|l| l.split_whitespace().next()?.parse().ok()).collect()
}

/// A field of /proc/<pid>/status (`Threads`; `VmRSS` in KiB, its unit left off), or 0 when the
/// process is gone.
pub fn proc_status(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(&format!("{field}:"))?.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// utime + stime of a process in seconds (0 when gone).
pub fn proc_cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    let Some(rest) = stat.rsplit(')').next() else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields after the command: state is 0, utime 11, stime 12.
    let ticks: f64 = f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// A spawned shipper that is killed if the test panics before stopping it, so no daemon
/// outlives its test.
pub struct Running(Option<std::process::Child>);

impl Running {
    pub fn new(child: std::process::Child) -> Self {
        Running(Some(child))
    }

    pub fn pid(&self) -> u32 {
        self.0.as_ref().map_or(0, |c| c.id())
    }

    pub fn child(&mut self) -> &mut std::process::Child {
        self.0.as_mut().expect("running")
    }

    /// Its standard output (piped), line by line as it comes, read on a thread of its own.
    pub fn stdout_lines(&mut self) -> std::sync::mpsc::Receiver<String> {
        use std::io::BufRead;
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = self.child().stdout.take().expect("a piped stdout");
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        rx
    }

    /// SIGTERM, then what it printed; asserts a clean exit 0.
    pub fn stop(mut self) -> std::process::Output {
        let child = self.0.take().expect("running");
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let out = child.wait_with_output().expect("wait for the shipper");
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        out
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The golden node's sys root in `dir`: EFA ports, RAPL zones and a Lustre client (debugfs),
/// from tests/fixtures/sys.
pub fn golden_sys_root(dir: &Path) -> PathBuf {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sys");
    let sys = dir.join("sys");
    for tree in ["efa-2.17", "rapl-2-socket", "lustre-2.15"] {
        copy_tree(&fixtures.join(tree), &sys);
    }
    sys
}

/// `cp -a` (symbolic links kept), so tests can change a copy of a fixture tree.
/// Runs `start` (a spawn or output of a program the test just copied) again while exec fails
/// with ETXTBSY: a test beside it may fork while the copy's write descriptor is open, and its
/// child holds that descriptor until it execs.
pub fn past_etxtbsy<T>(mut start: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    for _ in 0..100 {
        match start() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            done => return done,
        }
    }
    start()
}

pub fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let t = e.file_type().unwrap();
        if t.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if t.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// The first of `records` (a flush's, in order) whose `Type` is `kind`, parsed.
pub fn record_of_type(records: &[slurm_cw_formats::record::Record], kind: &str) -> Option<serde_json::Value> {
    records
        .iter()
        .map(|r| serde_json::from_str::<serde_json::Value>(&r.message).unwrap())
        .find(|v| v["Type"] == kind)
}

/// An `scontrol` in `dir` that logs each call to `calls`, prints `answer` (exit 0, as 24.11 and
/// 26.05 print an unknown job) and answers `ping` with 0 (slurmctld up); called again, it
/// changes the answer.
pub fn scripted_scontrol(dir: &Path, answer: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    let d = dir.display();
    // Written once: written again while the daemon runs it, it is busy (ETXTBSY); made under
    // another name and renamed, so never run half written.
    if !dir.join("scontrol").exists() {
        let body =
            format!("#!/bin/sh\necho \"$@\" >> {d}/calls\n[ \"$1\" = ping ] && exit 0\ncat {d}/answer\n");
        std::fs::write(dir.join("scontrol.new"), body).unwrap();
        std::fs::set_permissions(dir.join("scontrol.new"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(dir.join("scontrol.new"), dir.join("scontrol")).unwrap();
    }
    std::fs::write(dir.join("answer.new"), answer).unwrap();
    std::fs::rename(dir.join("answer.new"), dir.join("answer")).unwrap();
}
