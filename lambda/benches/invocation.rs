//! One invocation of the real `bootstrap` against LocalStack holding a cluster's worth of
//! metrics and job records, so that every stage runs: duration from the event handed out to the
//! response, the function's own CPU time, its peak memory and the API calls it made.
//!
//! `eval "$(scripts/bench/localstack.sh start)"; cargo bench -p slurm-cw-lambda --bench invocation`
//! (JOBS, GPU_JOBS and NODES override the sizes.) What the function reads does not grow with
//! jobs: per-job detail is in the job records, of which a run reads the findings of its
//! event-time window alone, and its metric series are a fixed set per partition. At cluster
//! scale, LocalStack with indexed CloudWatch storage keeps the seeding quick:
//!
//! ```sh
//! eval "$(LOCALSTACK_PORT=4590 LOCALSTACK_INDEXED_CW=1 scripts/bench/localstack.sh start)"
//! JOBS=5000 GPU_JOBS=1000 NODES=1000 cargo bench -p slurm-cw-lambda --bench invocation
//! LOCALSTACK_PORT=4590 scripts/bench/localstack.sh stop
//! ```
//!
//! The seeded data is what the shippers send: the head node's backlog, each node's job totals
//! (JobCoresUsed, JobCoresAllocated, JobGpusIdle, JobAllocations) for the minute, and per job
//! five minutes of `job_sample` records and, for every tenth job, a `job_finding` in the minute
//! the run reads.

#[path = "../tests/it/common/runtime.rs"]
mod runtime;

use slurm_cw_catalog::metrics::*;
use slurm_cw_catalog::records;
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
    let at = now - now.rem_euclid(60) - 4 * 60;
    let minutes = |count: i64| (0..count).map(move |k| at - k * 60);

    // What the shippers of such a cluster would have sent.
    let mut data: Vec<Datum> = Vec::new();
    let partitions: Vec<String> = (0..10).map(|p| format!("q{p}")).collect();
    // The head node's autoscaling signal per partition, this minute and the one before.
    for p in &partitions {
        let pd = d(&[("Partition", p.clone())]);
        for t in minutes(2) {
            data.push(datum(&cluster, &BACKLOG_NODES, &pd, t + 30, 7.0));
            data.push(datum(&cluster, &IDLE_NODES, &pd, t + 30, 0.0));
        }
    }
    for i in 0..nodes {
        data.push(datum(&cluster, &SHIPPER_MEMORY_RSS, &d(&[("NodeName", format!("n{i}"))]), at + 30, 9e6));
    }
    // Each node's job totals for the minute, at its own flush offset, by partition and account.
    for i in 0..nodes {
        let part = partitions[i % partitions.len()].clone();
        let account = format!("a{}", i % 13);
        let on_node = jobs.div_ceil(nodes.max(1)) as f64;
        let gpu_idle = if i < gpu_jobs { 1.0 } else { 0.0 };
        for dims in [vec![], d(&[("Partition", part.clone())]), d(&[("Account", account.clone())])] {
            let t = at + (i % 60) as i64;
            data.push(datum(&cluster, &JOB_ALLOCATIONS, &dims, t, on_node));
            data.push(datum(&cluster, &JOB_CORES_USED, &dims, t, on_node * 6.0));
            data.push(datum(&cluster, &JOB_CORES_ALLOCATED, &dims, t, on_node * 8.0));
            data.push(datum(&cluster, &JOB_GPUS_IDLE, &dims, t, gpu_idle));
        }
    }
    // Each job's records on its node: five minutes of samples, and a finding for every tenth job
    // in the minute before `at` (what a first run reads).
    let mut streams: Vec<Vec<(i64, String)>> = vec![Vec::new(); nodes.max(1)];
    for j in 0..jobs {
        let node = j % nodes.max(1);
        let job = format!("{}", 100_000 + j);
        let base = serde_json::json!({
            records::JOB_ID.name: job,
            records::USER.name: format!("u{}", j % 97),
            records::ACCOUNT.name: format!("a{}", j % 13),
            records::PARTITION.name: partitions[j % partitions.len()],
            records::NODE_NAME.name: format!("n{node}"),
        });
        for (k, t) in minutes(5).enumerate() {
            let mut r = base.clone();
            r[records::TYPE.name] = records::kinds::JOB_SAMPLE.into();
            r[records::RECORD_ID.name] = format!("{job}-{node}-s{k}").into();
            r[CPU_UTILIZATION.name] = (if j % 10 == 0 { 5.0 } else { 85.0 }).into();
            r[MEMORY_RSS.name] = 2e9.into();
            streams[node].push(((t + 20) * 1000, r.to_string()));
        }
        if j % 10 == 0 {
            let mut r = base.clone();
            r[records::TYPE.name] = records::kinds::JOB_FINDING.into();
            r[records::RECORD_ID.name] = format!("{job}-{node}-low_cpu_efficiency").into();
            r[records::FINDING.name] = records::findings::LOW_CPU_EFFICIENCY.into();
            r[records::DETAIL.name] = "CPU efficiency under 20% for 60 minutes".into();
            streams[node].push(((at - 30) * 1000, r.to_string()));
        }
    }
    let events: usize = streams.iter().map(Vec::len).sum();
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
        let logs = aws_sdk_cloudwatchlogs::Client::new(&sdk);
        let group = format!("/slurm-cw/{cluster}/jobs");
        logs.create_log_group().log_group_name(&group).send().await.expect("CreateLogGroup");
        for (i, mut events) in streams.into_iter().enumerate() {
            let stream = format!("n{i}");
            logs.create_log_stream()
                .log_group_name(&group)
                .log_stream_name(&stream)
                .send()
                .await
                .expect("CreateLogStream");
            events.sort_by_key(|(t, _)| *t);
            for chunk in events.chunks(5_000) {
                let batch: Vec<aws_sdk_cloudwatchlogs::types::InputLogEvent> = chunk
                    .iter()
                    .filter_map(|(t, m)| {
                        aws_sdk_cloudwatchlogs::types::InputLogEvent::builder()
                            .timestamp(*t)
                            .message(m)
                            .build()
                            .ok()
                    })
                    .collect();
                logs.put_log_events()
                    .log_group_name(&group)
                    .log_stream_name(&stream)
                    .set_log_events(Some(batch))
                    .send()
                    .await
                    .expect("PutLogEvents");
            }
        }
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
        "seeded {datums} datums and {events} job records ({jobs} jobs, {gpu_jobs} with GPUs, {nodes} nodes) in {:.0?}",
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
        "invocation: {:.2} s, of it {:.3} s CPU in the function; peak RSS {:.1} MB; {} GetMetricData calls reading {} metrics, {} ListMetrics calls, {} FilterLogEvents pages; {} datums published; {} findings; failed stages {}",
        took.as_secs_f64(),
        seconds(u.ru_utime) + seconds(u.ru_stime),
        peak_kb / 1024.0,
        summary["get_metric_data_calls"],
        summary["metrics_read"],
        summary["list_metrics_calls"],
        summary["filter_log_events_pages"],
        summary["datums_published"],
        summary["findings"].as_array().map_or(0, Vec::len),
        summary["failed_stages"]
    );
}
