//! What a run reads does not grow with the jobs that finished: two clusters, one with 30 and
//! one with 300 finished jobs of the last two weeks (their records, findings among them, and
//! per-job metrics as older shippers sent them) and the same few live jobs. A run makes the same
//! GetMetricData calls, reads the same series, lists as often and reads as many FilterLogEvents
//! pages in both, and notifies the live jobs' findings alone (those of the finished jobs were
//! ingested before an earlier run).

use crate::common;

use common::*;
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::metrics::*;
use slurm_cw_lambda::cw::{datum, epoch};
use slurm_cw_lambda::handler::{Summary, handle};
use std::collections::BTreeSet;
use std::time::SystemTime;

/// What one run did: (GetMetricData calls, series read, ListMetrics calls, FilterLogEvents pages).
type Counts = (u32, u32, u32, u32);

fn counts(s: &Summary) -> Counts {
    (s.get_metric_data_calls, s.metrics_read, s.list_metrics_calls, s.filter_log_events_pages)
}

async fn cluster_with(url: &str, finished: usize) -> (Summary, Counts) {
    let clients = clients(url).await;
    let (ns, cluster) = (unique("ScaleTest"), unique("c"));
    let group = job_group(&clients, &cluster).await;
    let at = minute_ago(6);
    let now = epoch(SystemTime::now());
    let ms = |secs: i64| secs * 1000;

    // Finished jobs: spread over the last 13 days, ended at least two hours ago; a few samples,
    // a summary, and for every third a finding, on ten nodes; their per-job metrics too.
    let mut records: Vec<Vec<(i64, String)>> = vec![Vec::new(); 10];
    let mut metrics = Vec::new();
    let span = 13 * 86_400 - 2 * 3_600;
    for j in 0..finished {
        let end = now - 2 * 3_600 - (span * j as i64) / finished as i64;
        let (job, node) = (format!("{}", 500_000 + j), format!("n{}", j % 10));
        let r = &mut records[j % 10];
        for k in 0..3 {
            r.push(sample(&format!("{job}-s{k}"), &job, &node, ms(end - 600 + k * 300)));
        }
        r.push((ms(end), format!(r#"{{"Type": "job_summary", "RecordId": "{job}-sum", "JobId": "{job}"}}"#)));
        if j % 3 == 0 {
            r.push(finding(&format!("{job}-f"), &job, &node, "idle_gpu", ms(end - 300)));
        }
        let dims: Vec<(String, String)> = [("JobId", job.as_str()), ("User", "u"), ("Account", "a")]
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect();
        for m in [&CPU_UTILIZATION, &MEMORY_MAX, &GPU_UTILIZATION] {
            for k in 0..3 {
                metrics.push(datum(&cluster, m, &dims, end - k * 60, 5.0));
            }
        }
    }
    // The finished jobs' records were there before: an earlier run has read them (and moved
    // the findings' cursor past them).
    for (i, r) in records.iter_mut().enumerate() {
        put_records(&clients.logs, &group, &format!("n{i}"), r).await;
        r.clear();
    }
    handle(&config(&ns, &cluster), &clients, invocation_for(at - 60)).await.expect("an earlier run");
    // Live jobs: samples and two findings in the minute before `at`, and the nodes' totals
    // for the minute.
    for (j, r) in records.iter_mut().enumerate().take(4) {
        let (job, node) = (format!("{}", 900_000 + j), format!("n{j}"));
        r.push(sample(&format!("{job}-live"), &job, &node, ms(at - 40)));
        if j < 2 {
            r.push(finding(&format!("{job}-f"), &job, &node, "low_cpu_efficiency", ms(at - 35)));
        }
    }
    for (part, offset) in [("p0", 10), ("p1", 40)] {
        let pd = vec![("Partition".to_owned(), part.to_owned())];
        let figures: [(&'static Metric, f64); 2] = [(&JOB_CORES_USED, 30.0), (&JOB_CORES_ALLOCATED, 40.0)];
        for (m, v) in figures {
            metrics.push(datum(&cluster, m, &[], at + offset, v));
            metrics.push(datum(&cluster, m, &pd, at + offset, v));
        }
        metrics.push(datum(&cluster, &JOB_GPUS_IDLE, &[], at + offset, 1.0));
        metrics.push(datum(&cluster, &CPUS_TOTAL, &pd, at + 30, 64.0));
        metrics.push(datum(&cluster, &CPUS_ALLOCATED, &pd, at + 30, 40.0));
    }
    put(url, &ns, metrics).await;
    for (i, r) in records.iter().enumerate().filter(|(_, r)| !r.is_empty()) {
        put_records(&clients.logs, &group, &format!("n{i}"), r).await;
    }

    let s = handle(&config(&ns, &cluster), &clients, invocation_for(at)).await.expect("run");
    let c = counts(&s);
    eprintln!(
        "{finished} finished jobs: {} GetMetricData calls, {} series read, {} ListMetrics calls, {} FilterLogEvents pages, {} findings",
        c.0,
        c.1,
        c.2,
        c.3,
        s.findings.len()
    );
    let found: BTreeSet<&str> = s.findings.iter().map(|f| f.job.as_str()).collect();
    assert_eq!(found, BTreeSet::from(["900000", "900001"]), "the live jobs' findings alone");
    let eff = read(&clients.cloudwatch, &ns, &cluster, &CLUSTER_CPU_EFFICIENCY, &[], at, at).await;
    assert_eq!(eff.get(&at), Some(&75.0));
    (s, c)
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn a_run_reads_as_much_with_300_finished_jobs_as_with_30() {
    let Some(url) = localstack() else { return };
    let (_, few) = cluster_with(&url, 30).await;
    let (_, many) = cluster_with(&url, 300).await;
    assert_eq!(few, many, "(GetMetricData calls, series, ListMetrics calls, FilterLogEvents pages)");
    // Fixed: the head's figures and the two partitions' job totals.
    assert!(few.1 > 0 && few.3 >= 1, "{few:?}");
}
