//! The real test bench, as integration tests see it: LocalStack and Slurm started by
//! `scripts/bench/*.sh`, found through the variables those scripts print.
//!
//! A test that needs a bench is marked `#[ignore = "needs <bench>: scripts/test.sh runs it"]`,
//! so a plain `cargo test` reports it ignored; scripts/test.sh runs it with `--include-ignored`.
//! Run so without its bench, it prints why and passes outside CI; with CI=true it fails.
#![allow(dead_code)]

pub mod emf;
pub mod proxy;
mod receivers;
pub mod sdiag_forms;
pub mod sinfo_rows;
mod slurm;

pub use receivers::*;
pub use slurm::*;

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

/// Serialises tests that change the bench Slurm (nodes down, jobs, slurmctld restarts).
pub static SLURM_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

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
