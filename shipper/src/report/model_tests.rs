//! The report model's tests: records combined per node and run, and the advice.

use super::*;
use serde_json::json;

fn summary(node: &str, cpu: f64, cores: f64, elapsed: f64, peak: f64, req: f64) -> Value {
    let mut m = serde_json::Map::new();
    m.insert(r::TYPE.name.into(), json!(kinds::JOB_SUMMARY));
    m.insert(r::NODE_NAME.name.into(), json!(node));
    m.insert(r::JOB_ID.name.into(), json!("9"));
    m.insert(r::CPU_SECONDS.name.into(), json!(cpu));
    m.insert(r::CORES_ALLOCATED.name.into(), json!(cores));
    m.insert(r::ELAPSED_SECONDS.name.into(), json!(elapsed));
    m.insert(r::MEMORY_PEAK.name.into(), json!(peak));
    m.insert(r::MEMORY_REQUESTED.name.into(), json!(req));
    m.insert(r::LAST_SEEN.name.into(), json!("2026-11-23T10:00:00Z"));
    Value::Object(m)
}

#[test]
fn nodes_add_up_and_peaks_take_the_largest() {
    let rep = combine(
        "9",
        &[
            summary("a", 100.0, 4.0, 100.0, 2.0 * GIB, 64.0 * GIB),
            summary("b", 50.0, 4.0, 100.0, 3.0 * GIB, 64.0 * GIB),
        ],
    );
    assert_eq!(rep.cpu_seconds, 150.0);
    assert_eq!(rep.cores_allocated, 8.0);
    assert_eq!(rep.cpu_efficiency_percent, Some(150.0 / 800.0 * 100.0));
    assert_eq!(rep.memory_peak_bytes, Some(3.0 * GIB));
    assert_eq!(rep.per_node.len(), 2);
    assert!(!rep.incomplete);
    let advice = advise(&rep);
    assert!(advice.iter().any(|a| a.contains("`--mem=4G`")), "{advice:?}");
    assert!(advice.iter().any(|a| a.contains("`-c 1`")), "{advice:?}");
}

#[test]
fn a_job_on_two_nodes_costs_what_both_summaries_say() {
    let mut a = summary("a", 100.0, 4.0, 3600.0, GIB, 4.0 * GIB);
    let mut b = summary("b", 100.0, 4.0, 3600.0, GIB, 4.0 * GIB);
    for (s, usd, waste) in [(&mut a, 1.70, 0.85), (&mut b, 0.68, 0.34)] {
        s[r::COST_USD.name] = json!(usd);
        s[r::WASTE_USD.name] = json!(waste);
        s[r::HOURLY_PRICE.name] = json!(usd);
        s[r::SHARE.name] = json!(1.0);
    }
    let rep = combine("9", &[a, b]);
    let (usd, waste) = (rep.cost_usd.unwrap(), rep.waste_usd.unwrap());
    assert!((usd - 2.38).abs() < 1e-9 && (waste - 1.19).abs() < 1e-9, "{usd} {waste}");
    let out = super::super::render::text(&rep, false);
    assert!(out.contains("Cost    $2.38 on 2 node(s), of it wasted $1.19"), "{out}");
    assert!(out.contains("cost $1.70  1.000 of the node at $1.70/h"), "{out}");
}

#[test]
fn idle_gpus_and_memory_near_the_limit_are_advised() {
    let mut s = summary("g1", 90.0, 1.0, 100.0, 3.9 * GIB, 4.0 * GIB);
    s[r::GPUS.name] = json!(4);
    s[r::GPU_IDLE_PERCENT.name] = json!(95.0);
    let rep = combine("9", &[s]);
    assert_eq!((rep.per_node[0].gpus, rep.per_node[0].gpu_idle_percent), (Some(4.0), Some(95.0)));
    let advice = advise(&rep);
    assert_eq!(advice.len(), 2, "{advice:?}");
    assert!(advice[0].contains("98% of the 4.0 GiB requested"), "{advice:?}");
    assert!(advice[1].starts_with("GPUs idle for 95 % of the job"), "{advice:?}");
}

#[test]
fn gpu_memory_the_job_barely_needed_is_advised() {
    let mut s = summary("g1", 90.0, 1.0, 7200.0, 3.0 * GIB, 4.0 * GIB);
    s[r::GPUS.name] = json!(1);
    s[r::GPU_MEMORY_PEAK.name] = json!(2.0 * GIB);
    s[r::GPU_MEMORY_TOTAL.name] = json!(141.0 * GIB);
    let rep = combine("9", &[s]);
    assert_eq!(rep.per_node[0].gpu_memory_total_bytes, Some(141.0 * GIB));
    let advice = advise(&rep);
    assert!(
        advice.iter().any(|a| a.starts_with("GPU memory peaked at 2.0 GiB of the GPUs' 141.0 GiB (1%)")),
        "{advice:?}"
    );
}

#[test]
fn samples_alone_and_gpus() {
    let s = |t: &str, usage: f64, mem: f64| {
        json!({"Type": "job_sample", "NodeName": "g1", "JobId": "9", "Time": t, "Samples": 2,
               "CpuUsage": usage, "CpusAllocated": 2, "MemoryMax": mem,
               "GpuUtilization": 50.0, "GpuMemoryUsed": 1e9})
    };
    let rep = combine("9", &[s("2026-11-23T10:00:00Z", 1.0, 1e8), s("2026-11-23T10:00:10.5Z", 2.0, 3e8)]);
    let n = &rep.per_node[0];
    assert!(rep.incomplete);
    assert_eq!((n.elapsed_seconds, n.cpu_seconds, n.samples), (10.5, 15.75, 4.0));
    assert_eq!((n.cpu_efficiency_percent, n.memory_peak_bytes), (Some(75.0), Some(3e8)));
    assert_eq!(rep.gpus.len(), 1, "the job's figures over its GPUs: one row, `all`");
    assert_eq!(rep.gpus[0].gpu, "all");
    assert_eq!(rep.gpus[0].utilization_mean_percent, Some(50.0));
    assert_eq!(rep.gpus[0].memory_used_peak_bytes, Some(1e9));
}

/// A job Slurm requeued onto a node of the same name (a Spot node replaced) runs there twice:
/// each run's summary counts (before, the later replaced the earlier, and its cost was lost),
/// a sample without Slurm's start goes to the run started by its time, and the cores held on
/// the node are those of one run, not their sum.
#[test]
fn a_job_requeued_onto_the_same_node_counts_each_run() {
    let run = |start: &str, cpu: f64, elapsed: f64, usd: f64| {
        let mut s = summary("a", cpu, 8.0, elapsed, GIB, 4.0 * GIB);
        s[r::SLURM_START.name] = json!(start);
        s[r::COST_USD.name] = json!(usd);
        s
    };
    let first = run("2026-11-23T08:00:00Z", 400.0, 100.0, 10.0);
    let second = run("2026-11-23T09:00:00Z", 200.0, 50.0, 5.0);
    let mut sample = json!({ "Type": kinds::JOB_SAMPLE, "NodeName": "a", "JobId": "9" });
    sample[r::TIME.name] = json!("2026-11-23T09:00:30Z");
    let rep = combine("9", &[first, sample, second]);
    let names: Vec<&str> = rep.per_node.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(names, ["a (run from 2026-11-23T08:00:00Z)", "a (run from 2026-11-23T09:00:00Z)"]);
    assert_eq!(rep.cost_usd, Some(15.0));
    assert_eq!(rep.cores_allocated, 8.0);
    assert_eq!(rep.cpu_efficiency_percent, Some(600.0 / 1200.0 * 100.0));
    assert!(!rep.incomplete, "the sample is the second run's, which has its summary");
}

/// A run cut short (its Spot node reclaimed) writes samples and no summary; Slurm requeues the
/// job onto a node of the same name, whose run ends with one. Both runs count: $64 of the
/// first's samples and $32 of the second's summary (before, the one start known was the
/// summary's, every record went to it, and the report said $32, complete).
#[test]
fn a_run_with_samples_alone_beside_a_summarized_one_counts() {
    let sample = |start: &str, time: &str, usd: f64| {
        json!({ "Type": kinds::JOB_SAMPLE, "NodeName": "a", "JobId": "9", "SlurmStart": start,
                "Time": time, "CostUsd": usd })
    };
    let mut second = summary("a", 100.0, 8.0, 100.0, GIB, 4.0 * GIB);
    second[r::SLURM_START.name] = json!("2026-11-23T10:00:00Z");
    second[r::COST_USD.name] = json!(32.0);
    let recs = [
        sample("2026-11-23T08:00:00Z", "2026-11-23T08:30:00Z", 32.0),
        sample("2026-11-23T08:00:00Z", "2026-11-23T09:00:00Z", 64.0),
        second,
    ];
    let rep = combine("9", &recs);
    assert_eq!(rep.per_node.len(), 2, "{:?}", rep.per_node);
    assert_eq!(rep.cost_usd, Some(96.0));
    assert!(rep.incomplete, "the first run has no summary");
}

/// A cloud node powered up for the job: Slurm moved its start from 08:00 to 08:05, and the
/// daemon, asking Slurm again hourly, wrote samples with the first start until 09:00. One run,
/// not two: its summary's $54 alone (before, $36 of old-start samples were added, $90, and the
/// report stayed "records still arriving" for a run that had no summary).
#[test]
fn a_start_slurm_moved_later_within_a_run_is_one_run() {
    let sample = |start: &str, time: &str, usd: f64| {
        json!({ "Type": kinds::JOB_SAMPLE, "NodeName": "a", "JobId": "9", "SlurmStart": start,
                "Time": time, "CostUsd": usd })
    };
    let mut last = summary("a", 100.0, 8.0, 100.0, GIB, 4.0 * GIB);
    last[r::SLURM_START.name] = json!("2026-11-23T08:05:00Z");
    last[r::TIME.name] = json!("2026-11-23T09:35:00Z");
    last[r::COST_USD.name] = json!(54.0);
    let recs = [
        sample("2026-11-23T08:00:00Z", "2026-11-23T08:30:00Z", 15.0),
        sample("2026-11-23T08:00:00Z", "2026-11-23T09:00:00Z", 36.0),
        sample("2026-11-23T08:05:00Z", "2026-11-23T09:30:00Z", 51.0),
        last,
    ];
    let rep = combine("9", &recs);
    assert_eq!(rep.per_node.len(), 1, "{:?}", rep.per_node);
    assert_eq!(rep.per_node[0].node, "a");
    assert_eq!(rep.cost_usd, Some(54.0));
    assert!(!rep.incomplete);
}

/// A 4-node job whose node d's records are still in its spool: the report names d and says it
/// is not complete (before, "Cost $96 on 3 node(s)", complete, for a $128 job).
#[test]
fn a_node_slurm_names_without_records_is_named_and_the_report_incomplete() {
    let recs: Vec<Value> = ["a", "b", "c"]
        .iter()
        .map(|n| {
            let mut s = summary(n, 100.0, 8.0, 100.0, GIB, 4.0 * GIB);
            s[r::COST_USD.name] = json!(32.0);
            s
        })
        .collect();
    let rep = combine("9", &recs);
    assert_eq!(missing_nodes(&rep, "[a-d]"), Vec::<String>::new(), "no such hostlist: read nothing");
    assert_eq!(missing_nodes(&rep, "a,b,c,d"), ["d"]);
    assert_eq!(
        missing_nodes(&rep, "n[1-4]"),
        Vec::<String>::new(),
        "other names: none matched, none claimed"
    );
    let mut rep = rep;
    rep.nodes_without_records = missing_nodes(&rep, "a,b,c,d");
    let text = crate::report::render::text(&rep, false);
    assert!(
        text.contains("no records yet from 1 of Slurm's node(s): d; their cost is not in the total"),
        "{text}"
    );
}

/// An 8-core job at 50 % for 10 h whose node's daemon restarted 9 h in: its summary's
/// CpuSeconds is the cgroup's whole count (40 core-hours), its elapsed time the last hour. The
/// report says 50 %, the summary's own figure, not 500 %.
#[test]
fn a_nodes_cpu_efficiency_is_its_own_not_its_whole_cpu_time_over_the_time_seen() {
    let mut s = summary("a", 144_000.0, 8.0, 3_600.0, GIB, 4.0 * GIB);
    s[r::CPU_EFFICIENCY.name] = json!(50.0);
    let mut b = summary("b", 14_400.0, 8.0, 3_600.0, GIB, 4.0 * GIB);
    b[r::CPU_EFFICIENCY.name] = json!(100.0);
    let rep = combine("9", &[s.clone()]);
    assert_eq!(rep.cpu_efficiency_percent, Some(50.0));
    let rep = combine("9", &[s, b]);
    assert_eq!(rep.cpu_efficiency_percent, Some(75.0), "two nodes of equal core-seconds");
}

/// A batch job of several steps: its first step's TaskEpilog wrote a summary ($5), the job ran
/// on ($300 by its last sample) and its node went before its end. The samples are the newer
/// word; a summary the samples do not pass stays the word.
#[test]
fn a_summary_older_than_the_samples_after_it_gives_way_to_them() {
    let sample = |usd: f64| {
        json!({ "Type": kinds::JOB_SAMPLE, "NodeName": "a", "JobId": "9", "Time": "2026-11-23T12:00:00Z",
                "CostUsd": usd })
    };
    let mut early = summary("a", 100.0, 8.0, 100.0, GIB, 4.0 * GIB);
    early[r::COST_USD.name] = json!(5.0);
    let rep = combine("9", &[early.clone(), sample(300.0)]);
    assert_eq!(rep.cost_usd, Some(300.0));
    assert!(rep.incomplete);
    let rep = combine("9", &[early, sample(5.0)]);
    assert_eq!(rep.cost_usd, Some(5.0));
    assert!(!rep.incomplete);
}
