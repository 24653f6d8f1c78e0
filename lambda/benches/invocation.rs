//! One invocation of the real `bootstrap` against LocalStack holding a cluster's worth of
//! metrics, at a rollup minute so that every step runs: duration from the event handed out to
//! the response, the function's own CPU time, its peak memory and the API calls it made.
//!
//! `eval "$(scripts/bench/localstack.sh start)"; cargo bench -p slurm-cw-lambda --bench invocation`
//! (JOBS, GPU_JOBS and NODES override the sizes.) The default is small: stock LocalStack reads
//! every stored row of a metric once per period of each query, so its time grows with jobs
//! squared and the wall time is mostly LocalStack's. At cluster scale start LocalStack with
//! indexed CloudWatch storage (scripts/bench/localstack_indexed_cw.py):
//!
//! ```sh
//! eval "$(LOCALSTACK_PORT=4590 LOCALSTACK_INDEXED_CW=1 scripts/bench/localstack.sh start)"
//! JOBS=5000 GPU_JOBS=1000 NODES=1000 cargo bench -p slurm-cw-lambda --bench invocation
//! LOCALSTACK_PORT=4590 scripts/bench/localstack.sh stop
//! ```
//!
//! The seeded data is what the function reads: per job, 65 minutes of CpuUtilization,
//! MemoryMax and MemoryLimit (and 35 of the GPU series for GPU jobs).

#[path = "../tests/common/runtime.rs"]
mod runtime;

use slurm_cw_catalog::ALL;
use slurm_cw_catalog::metrics::*;
use slurm_cw_lambda::cw::{at_epoch, datum, epoch};
use slurm_cw_lambda::handler::DELAY_MINUTES;
use slurm_cw_sink::cloudwatch::retry::Backoff;
use slurm_cw_sink::cloudwatch::{CloudWatchSink, Settings};
use slurm_cw_sink::datum::Datum;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

fn size(var: &str, default: usize) -> usize {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn seconds(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}

fn d(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect()
}

fn main() {
    let Ok(url) = std::env::var("BENCH_LOCALSTACK_URL") else {
        println!("needs LocalStack: eval \"$(scripts/bench/localstack.sh start)\"");
        return;
    };
    let (jobs, gpu_jobs, nodes) = (size("JOBS", 50), size("GPU_JOBS", 10), size("NODES", 10));
    let n = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_nanos() % 1_000_000;
    let (ns, cluster) = (format!("LambdaBench{n}"), format!("bench{n}"));
    let now = epoch(SystemTime::now());
    let mut at = now - now.rem_euclid(60) - 4 * 60;
    at -= at.rem_euclid(300);
    let minutes = |count: i64| (0..count).map(move |k| at - k * 60);

    // What the shippers of such a cluster would have sent.
    let mut data: Vec<Datum> = Vec::new();
    let partitions: Vec<String> = (0..10).map(|p| format!("q{p}")).collect();
    for p in &partitions {
        let pd = d(&[("Partition", p.clone())]);
        for (m, v) in [
            (&CPUS_TOTAL, 6400.0),
            (&CPUS_ALLOCATED, 5000.0),
            (&GPUS_TOTAL, 80.0),
            (&GPUS_ALLOCATED, 60.0),
            (&PENDING_NODES, 12.0),
            (&PENDING_CPUS, 900.0),
        ] {
            data.push(datum(&cluster, m, &pd, at + 30, v));
        }
        for (state, v) in
            [("idle", 5.0), ("allocated", 80.0), ("mixed", 10.0), ("down", 1.0), ("drained", 4.0)]
        {
            data.push(datum(
                &cluster,
                &NODE_COUNT,
                &d(&[("Partition", p.clone()), ("State", state.into())]),
                at + 30,
                v,
            ));
        }
    }
    // The head shipper also sends the whole cluster's figures, without a Partition.
    for (m, v) in [
        (&CPUS_TOTAL, 64000.0),
        (&CPUS_ALLOCATED, 50000.0),
        (&GPUS_TOTAL, 800.0),
        (&GPUS_ALLOCATED, 600.0),
        (&PENDING_NODES, 120.0),
        (&PENDING_CPUS, 9000.0),
    ] {
        data.push(datum(&cluster, m, &[], at + 30, v));
    }
    for c in ALL.iter().filter(|m| m.rate_of.is_none() && m.kind == slurm_cw_catalog::Kind::Counter) {
        let types: Vec<Vec<(String, String)>> = if c.dimension_sets == [&[] as &[&str]] {
            vec![vec![]]
        } else {
            (0..20).map(|i| d(&[("MessageType", format!("REQUEST_TYPE_{i}"))])).collect()
        };
        for dims in types {
            for (k, t) in minutes(3).enumerate() {
                data.push(datum(&cluster, c, &dims, t + 30, 1000.0 - k as f64 * 10.0));
            }
        }
    }
    for i in 0..nodes {
        data.push(datum(&cluster, &SHIPPER_MEMORY_RSS, &d(&[("NodeName", format!("n{i}"))]), at + 30, 9e6));
    }
    for j in 0..jobs {
        let jd = d(&[
            ("JobId", format!("{}", 100_000 + j)),
            ("User", format!("u{}", j % 97)),
            ("Account", format!("a{}", j % 13)),
        ]);
        for t in minutes(65) {
            let cpu = if j % 10 == 0 { 5.0 } else { 85.0 };
            data.push(datum(&cluster, &CPU_UTILIZATION, &jd, t + 30, cpu));
            data.push(datum(&cluster, &MEMORY_MAX, &jd, t + 30, 2e9));
            data.push(datum(&cluster, &MEMORY_LIMIT, &jd, t + 30, if j % 7 == 0 { 32e9 } else { 4e9 }));
        }
        if j < gpu_jobs {
            for t in minutes(35) {
                let util = if j % 5 == 0 { 1.0 } else { 70.0 };
                data.push(datum(&cluster, &GPU_UTILIZATION, &jd, t + 30, util));
                data.push(datum(&cluster, &GPU_COUNT, &jd, t + 30, 4.0));
                data.push(datum(&cluster, &GPU_IDLE_COUNT, &jd, t + 30, 0.0));
            }
        }
    }
    let datums = data.len();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let seeding = Instant::now();
    rt.block_on(async {
        let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(&url)
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_cloudwatch::config::Credentials::new(
                "test", "test", None, None, "bench",
            ))
            .load()
            .await;
        let settings = Settings {
            namespace: ns.clone(),
            region: None,
            endpoint: None,
            backoff: Backoff {
                base: Duration::from_millis(100),
                cap: Duration::from_secs(2),
                max_retries: 5,
            },
            attempt_timeout: Duration::from_secs(60),
            storage_resolution: 60,
        };
        let mut tasks = Vec::new();
        let per = data.len().div_ceil(4);
        while !data.is_empty() {
            let part: Vec<Datum> = data.drain(..per.min(data.len())).collect();
            let mut sink =
                CloudWatchSink::from_client(aws_sdk_cloudwatch::Client::new(&sdk), settings.clone());
            tasks.push(tokio::spawn(async move { sink.put(part).await }));
        }
        for t in tasks {
            let out = t.await.unwrap();
            assert!(out.undelivered.is_empty() && out.rejected.is_empty(), "seeding: {:?}", out.last_error);
        }
    });
    println!(
        "seeded {datums} datums ({jobs} jobs, {gpu_jobs} with GPUs, {nodes} nodes) in {:.0?}",
        seeding.elapsed()
    );

    let api = runtime::RuntimeApi::start(runtime::scheduled_event(at_epoch(at + DELAY_MINUTES * 60 + 7)));
    let config = format!(
        r#"{{"namespace": "{ns}", "cluster_name": "{cluster}", "rules": {}}}"#,
        slurm_cw_catalog::alarms::default_rules_json()
    );
    let started = Instant::now();
    let mut child =
        runtime::bootstrap(&api, &url, &config).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let (path, body) = api.posted.recv_timeout(Duration::from_secs(600)).expect("a response");
    let took = started.elapsed();
    // The function's own peak: RUSAGE_CHILDREN's ru_maxrss would also count this process, whose
    // memory (the seeded data) the child shared until it exec'd.
    let peak_kb: f64 = std::fs::read_to_string(format!("/proc/{}/status", child.id()))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:")?.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(f64::NAN);
    let _ = child.kill();
    let _ = child.wait();
    // SAFETY: getrusage fills the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let summary: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    println!("{path}");
    println!(
        "invocation: {:.2} s, of it {:.3} s CPU in the function; peak RSS {:.1} MB; {} GetMetricData calls reading {} metrics; {} datums published; {} findings",
        took.as_secs_f64(),
        seconds(u.ru_utime) + seconds(u.ru_stime),
        peak_kb / 1024.0,
        summary["get_metric_data_calls"],
        summary["metrics_read"],
        summary["datums_published"],
        summary["findings"].as_array().map_or(0, Vec::len)
    );
}
