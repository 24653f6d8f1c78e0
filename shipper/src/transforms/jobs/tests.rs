//! The job table's records, from typed readings.

use super::*;
use crate::sample::{GpuFigures, GpuLabel, JobFigures, JobInfo, JobReading, OneGpu};
use crate::transforms::population;
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::metrics::*;
use slurm_cw_formats::datum::format_timestamp;
use std::time::Duration;

fn t(s: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
}

fn info(id: &str) -> JobInfo {
    JobInfo {
        id: id.into(),
        names: Default::default(),
        node: "n1".into(),
        user: "alice".into(),
        account: "phys".into(),
        partition: "cpu".into(),
    }
}

fn reading(id: &str, node: &str, figures: Vec<(&'static Metric, f64)>) -> JobReading {
    let mut i = info(id);
    i.node = node.into();
    JobReading { info: i, job: JobFigures::from_figures(figures), gpus: None, held: Default::default() }
}

fn collection(at: u64, jobs: &[(&str, f64, f64)]) -> Batch {
    let mut b = Batch::new(t(at));
    b.all_jobs = true;
    for (id, cores, rss) in jobs {
        let mut r = reading(
            id,
            "n1",
            vec![
                (&CPU_USAGE, *cores),
                (&CPU_UTILIZATION, cores / 2.0 * 100.0),
                (&CPUS_ALLOCATED, 2.0),
                (&CPU_TIME, cores * at as f64),
                (&MEMORY_RSS, *rss),
                (&MEMORY_LIMIT, 4e9),
            ],
        );
        r.job.threads = vec![("running", 3.0)];
        b.jobs.push(r);
    }
    b
}

fn parse(r: &Record) -> Value {
    serde_json::from_str(&r.message).unwrap()
}

#[test]
fn one_sample_record_per_job_and_flush_then_a_summary_when_the_cgroup_goes() {
    let mut jobs = Jobs::new(Thresholds::default(), None);
    jobs.observe(&collection(0, &[("7", 1.0, 300e6)]));
    jobs.observe(&collection(30, &[("7", 1.0, 310e6), ("8", 0.0, 1e6)]));
    let recs = jobs.flush(t(31));
    let samples: Vec<Value> = recs.iter().map(parse).collect();
    assert_eq!(samples.len(), 2);
    let seven = &samples[0];
    assert_eq!(seven["Type"], "job_sample");
    assert_eq!(
        (seven["JobId"].as_str(), seven["Account"].as_str(), seven["Partition"].as_str()),
        (Some("7"), Some("phys"), Some("cpu"))
    );
    assert_eq!(seven["MemoryRss"], 305e6, "the mean over the flush");
    assert_eq!(seven["Samples"], 2);
    assert_eq!(seven["ThreadCount"]["running"], 3.0);
    assert!(jobs.flush(t(40)).is_empty(), "nothing new, nothing sent");

    jobs.observe(&collection(60, &[("8", 0.0, 1e6)]));
    let recs = jobs.flush(t(61));
    let summary = recs.iter().map(parse).find(|v| v["Type"] == "job_summary").expect("job 7 ended");
    assert_eq!(summary["JobId"], "7");
    assert_eq!(summary["EndedBy"], "cgroup_gone");
    assert_eq!(summary["ElapsedSeconds"], 30.0);
    assert_eq!(summary["CpuSeconds"], 30.0, "the cgroup counter");
    assert_eq!(summary["CpuEfficiency"], 50.0, "1 of 2 cores");
    assert_eq!(summary["MemoryPeakBytes"], 310e6);
    assert_eq!(summary["MemoryRequestedBytes"], 4e9);
    assert_eq!(summary["RecordId"], "n1:7:1800000000:summary", "no Slurm start: first seen");
    assert_eq!(jobs.len(), 1);
}

/// Slurm requeues a job (a Spot node reclaimed) and it runs again on a node of the same name:
/// the same job id, a new start. Each run keeps its own summary (and its cost): before, the
/// second had the first's RecordId and replaced it wherever the latest summary wins.
#[test]
fn a_job_requeued_onto_the_same_node_has_a_summary_per_run() {
    let mut jobs = Jobs::new(Thresholds::default(), None);
    let started = |at: u64, from: u64| {
        let mut b = collection(at, &[("7", 1.0, 1e6)]);
        b.jobs[0].held.started = Some(t(from));
        b
    };
    jobs.observe(&started(10, 5));
    jobs.observe(&collection(40, &[]));
    jobs.observe(&started(100, 95));
    jobs.observe(&collection(130, &[]));
    let recs: Vec<Value> = jobs.flush(t(131)).iter().map(parse).collect();
    let ids: Vec<&str> =
        recs.iter().filter(|v| v["Type"] == "job_summary").filter_map(|v| v["RecordId"].as_str()).collect();
    assert_eq!(ids, ["n1:7:1800000005:summary", "n1:7:1800000095:summary"], "{recs:?}");
}

/// A short job's final sample comes before Slurm's start is known; the summary at its
/// cgroup's end, after, keeps the first's id, so the latest still replaces it.
#[test]
fn a_runs_summaries_keep_one_id_when_slurms_start_comes_between_them() {
    let mut jobs = Jobs::new(Thresholds::default(), None);
    let mut last = collection(3, &[("9", 2.0, 1e6)]);
    last.all_jobs = false;
    jobs.observe(&last);
    let mut later = collection(20, &[("9", 2.0, 2e6)]);
    later.jobs[0].held.started = Some(t(1));
    jobs.observe(&later);
    jobs.observe(&collection(30, &[]));
    let recs: Vec<Value> = jobs.flush(t(31)).iter().map(parse).collect();
    let ids: Vec<&str> =
        recs.iter().filter(|v| v["Type"] == "job_summary").filter_map(|v| v["RecordId"].as_str()).collect();
    assert_eq!(ids.len(), 2, "{recs:?}");
    assert_eq!(ids, ["n1:9:1800000003:summary"; 2], "first seen, not the start that came later");
}

#[test]
fn a_final_sample_writes_the_summary_once() {
    let mut jobs = Jobs::new(Thresholds::default(), None);
    jobs.observe(&collection(0, &[("9", 2.0, 1e6)]));
    let mut last = collection(10, &[("9", 2.0, 1e6)]);
    last.all_jobs = false;
    jobs.observe(&last);
    jobs.observe(&collection(30, &[]));
    let summaries: Vec<Value> =
        jobs.flush(t(31)).iter().map(parse).filter(|v| v["Type"] == "job_summary").collect();
    assert_eq!(summaries.len(), 1, "the cgroup's end adds nothing new");
    assert_eq!(summaries[0]["EndedBy"], "task_epilog");
    assert_eq!(summaries[0]["CpuEfficiency"], 100.0);
}

#[test]
fn a_job_asked_for_again_while_it_runs_gets_samples_and_one_more_summary_at_its_end() {
    let mut jobs = Jobs::new(Thresholds::default(), None);
    jobs.observe(&collection(0, &[("9", 2.0, 1e6)]));
    for at in 1..=50 {
        let mut again = collection(at, &[("9", 2.0, 2e6)]);
        again.all_jobs = false;
        jobs.observe(&again);
    }
    let recs: Vec<Value> = jobs.flush(t(51)).iter().map(parse).collect();
    let summaries: Vec<&Value> = recs.iter().filter(|v| v["Type"] == "job_summary").collect();
    assert_eq!(summaries.len(), 1, "{recs:?}");
    assert_eq!(summaries[0]["LastSeen"], format_timestamp(t(1)));
    let sample = recs.iter().find(|v| v["Type"] == "job_sample").unwrap();
    assert_eq!(sample["Samples"], 51, "every final sample is a sample");
    jobs.observe(&collection(60, &[]));
    let recs: Vec<Value> = jobs.flush(t(61)).iter().map(parse).collect();
    let last = recs.iter().find(|v| v["Type"] == "job_summary").expect("the end's summary");
    assert_eq!(last["EndedBy"], "cgroup_gone");
    assert_eq!(last["LastSeen"], format_timestamp(t(50)), "covers the later samples");
    assert_eq!(last["MemoryPeakBytes"], 2e6);
}

#[test]
fn gpu_figures_go_to_the_record_of_the_node_whose_gpus_they_are() {
    // Two slurmd on one host run parts of job 5; only n2's part holds GPUs.
    let mut jobs = Jobs::new(Thresholds::default(), None);
    for at in [0, 60] {
        let mut b = Batch::new(t(at));
        b.all_jobs = true;
        b.jobs.push(reading("5", "n1", vec![(&CPUS_ALLOCATED, 2.0)]));
        let mut on_n2 = reading("5", "n2", vec![(&CPUS_ALLOCATED, 2.0)]);
        let mut gpus = GpuFigures::new(2.0, 0.0, vec![(&GPU_UTILIZATION, 80.0)]);
        gpus.joules = Some(3.6e6);
        on_n2.gpus = Some(gpus);
        b.jobs.push(on_n2);
        jobs.observe(&b);
    }
    let recs: Vec<Value> = jobs.flush(t(61)).iter().map(parse).collect();
    let sample =
        |node: &str| recs.iter().find(|v| v["NodeName"] == node && v["Type"] == "job_sample").unwrap();
    assert_eq!(sample("n2")["GpuCount"], 2.0);
    assert_eq!(sample("n2")["GpuUtilization"], 80.0);
    assert!(sample("n1").get("GpuCount").is_none(), "n1's part holds none: {recs:?}");
    let mut end = Batch::new(t(90));
    end.all_jobs = true;
    jobs.observe(&end);
    let recs: Vec<Value> = jobs.flush(t(91)).iter().map(parse).collect();
    let summary =
        |node: &str| recs.iter().find(|v| v["NodeName"] == node && v["Type"] == "job_summary").unwrap();
    assert_eq!(summary("n2")["Gpus"], 2.0);
    assert_eq!(summary("n2")["GpuEnergyKwh"], 2.0, "both readings' joules, on n2");
    assert!(summary("n1").get("Gpus").is_none() && summary("n1").get("GpuEnergyKwh").is_none());
}

/// One GPU of a job as the GPU collector gives it: `figures`, and `joules` since the last
/// collection.
fn one_gpu(label: &str, figures: Vec<(&'static Metric, f64)>, joules: f64) -> OneGpu {
    OneGpu { label: GpuLabel::Index(label.into()), figures, joules: Some(joules) }
}

#[test]
fn each_gpus_figures_and_energy_go_to_the_records_of_a_job_on_several_gpus_only() {
    const GIB: f64 = 1_073_741_824.0;
    let mut jobs = Jobs::new(Thresholds::default(), None);
    // Job 7 on GPUs 0 and 1, job 8 on GPU 2; two collections a minute apart.
    let minute = [
        ((90.0, 60.0, 400.0, 7.2e6), (10.0, GIB, 100.0, 1.8e6)),
        ((70.0, 40.0, 300.0, 3.6e6), (30.0, 3.0 * GIB, 140.0, 1.8e6)),
    ];
    for (at, ((u0, sm0, w0, j0), (u1, m1, w1, j1))) in [0, 60].into_iter().zip(minute) {
        let mut b = Batch::new(t(at));
        b.all_jobs = true;
        let mut two = reading("7", "n1", vec![(&CPUS_ALLOCATED, 2.0)]);
        let mut g = GpuFigures::new(2.0, 0.0, vec![(&GPU_UTILIZATION, (u0 + u1) / 2.0)]);
        g.joules = Some(j0 + j1);
        let total = (&GPU_MEMORY_TOTAL, 80.0 * GIB);
        g.each = vec![
            one_gpu(
                "0",
                vec![
                    (&GPU_UTILIZATION, u0),
                    (&GPU_SM_ACTIVITY, sm0),
                    (&GPU_MEMORY_USED, 4.0 * GIB),
                    total,
                    (&GPU_POWER, w0),
                    (&GPU_TEMPERATURE, 50.0),
                ],
                j0,
            ),
            one_gpu("1", vec![(&GPU_UTILIZATION, u1), (&GPU_MEMORY_USED, m1), total, (&GPU_POWER, w1)], j1),
        ];
        two.gpus = Some(g);
        let mut one = reading("8", "n1", vec![(&CPUS_ALLOCATED, 2.0)]);
        let mut g = GpuFigures::new(1.0, 0.0, vec![(&GPU_UTILIZATION, 50.0)]);
        g.joules = Some(3.6e6);
        g.each = vec![one_gpu("2", vec![(&GPU_UTILIZATION, 50.0), (&GPU_POWER, 200.0)], 3.6e6)];
        one.gpus = Some(g);
        b.jobs.extend([two, one]);
        jobs.observe(&b);
    }
    let recs: Vec<Value> = jobs.flush(t(61)).iter().map(parse).collect();
    let sample = |id: &str| recs.iter().find(|v| v["JobId"] == id && v["Type"] == "job_sample").unwrap();
    // Means of the two collections; GPU 1 has no GPM (no SM activity), temperature is not kept.
    let each = json!({
        "0": {"GpuUtilization": 80.0, "GpuSmActivity": 50.0, "GpuMemoryUsed": 4.0 * GIB, "GpuMemoryTotal": 80.0 * GIB, "GpuPower": 350.0},
        "1": {"GpuUtilization": 20.0, "GpuMemoryUsed": 2.0 * GIB, "GpuMemoryTotal": 80.0 * GIB, "GpuPower": 120.0},
    });
    assert_eq!(sample("7")["PerGpu"], each);
    assert_eq!(sample("7")["GpuUtilization"], 50.0, "the job's mean stays");
    assert!(sample("8").get("PerGpu").is_none(), "one GPU: its figures are the job's");
    let mut end = Batch::new(t(90));
    end.all_jobs = true;
    jobs.observe(&end);
    let recs: Vec<Value> = jobs.flush(t(91)).iter().map(parse).collect();
    let summary = |id: &str| recs.iter().find(|v| v["JobId"] == id && v["Type"] == "job_summary").unwrap();
    // GPU 0: 7.2 + 3.6 MJ = 3 kWh; GPU 1: 1.8 + 1.8 MJ = 1 kWh; together 4 kWh.
    assert_eq!(summary("7")["GpuEnergyKwh"], 4.0);
    assert_eq!(summary("7")["PerGpu"], json!({"0": {"GpuEnergyKwh": 3.0}, "1": {"GpuEnergyKwh": 1.0}}));
    assert_eq!(summary("8")["GpuEnergyKwh"], 2.0);
    assert!(summary("8").get("PerGpu").is_none());
}

#[test]
fn a_job_on_sixty_four_mig_instances_named_by_uuid_fits_one_log_event_uncut() {
    let mut jobs = Jobs::new(Thresholds::default(), None);
    let mut r = reading("9", "n1", vec![(&CPUS_ALLOCATED, 2.0)]);
    let mut g = GpuFigures::new(64.0, 0.0, vec![]);
    // The most a job could hold: 8 GPUs of 7 instances and more, every figure there.
    let figures = vec![
        (&GPU_UTILIZATION, 12.3456),
        (&GPU_SM_ACTIVITY, 12.3456),
        (&GPU_MEMORY_USED, 12_345_678_901.0),
        (&GPU_MEMORY_TOTAL, 98_765_432_109.0),
        (&GPU_POWER, 123.456),
    ];
    g.each = (0..64)
        .map(|i| OneGpu {
            label: GpuLabel::Uuid(format!("MIG-{i:08x}-aaaa-bbbb-cccc-dddddddddddd")),
            figures: figures.clone(),
            joules: Some(1.0),
        })
        .collect();
    r.gpus = Some(g);
    let mut b = Batch::new(t(0));
    b.jobs.push(r);
    jobs.observe(&b);
    let recs = jobs.flush(t(1));
    let v = parse(&recs[0]);
    assert_eq!(v["PerGpu"].as_object().map(|o| o.len()), Some(64));
    // Under 200 bytes an instance: about 13 kB, far under the 1 MiB one event holds.
    assert!(recs[0].message.len() < 64 * 200 + 1000, "{}", recs[0].message.len());
    assert_eq!(jobs.trimmed, 0);
}

#[test]
fn an_unlimited_limit_is_none_for_records_findings_and_population_alike() {
    let mut jobs = Jobs::new(Thresholds::default(), None);
    let unlimited = 9.223372036854772e18;
    let mut b = Batch::new(t(0));
    b.all_jobs = true;
    b.jobs.push(reading("3", "n1", vec![(&MEMORY_MAX, 1e9), (&MEMORY_LIMIT, unlimited)]));
    b.jobs.push(reading("4", "n1", vec![(&MEMORY_MAX, 1e9), (&MEMORY_LIMIT, 4e9)]));
    let held = jobs.observe(&b);
    let mut pop = Batch::new(t(0));
    population::push(&b.jobs, &held, false, 5.0, &mut pop);
    let shares: Vec<_> = pop.of(&JOB_MEMORY_PEAK_SHARE).filter(|s| s.dims.is_empty()).collect();
    assert_eq!(shares[0].value, crate::sample::Observed::Distribution(vec![25.0]), "job 4's only");
    jobs.observe(&Batch { all_jobs: true, ..Batch::new(t(30)) });
    let recs: Vec<Value> = jobs.flush(t(31)).iter().map(parse).collect();
    let summary = |id: &str| recs.iter().find(|v| v["JobId"] == id && v["Type"] == "job_summary").unwrap();
    assert!(summary("3").get("MemoryRequestedBytes").is_none(), "{recs:?}");
    assert!(summary("3").get("MemoryPeakPercent").is_none());
    assert_eq!(summary("4")["MemoryRequestedBytes"], 4e9);
    assert_eq!(summary("4")["MemoryPeakPercent"], 25.0, "the share population shows");
}

#[test]
fn idle_gpus_are_decided_once_for_records_and_population() {
    // 4 GPUs, one without a process; utilisation 50% then 1% (threshold 5%).
    let mut jobs = Jobs::new(Thresholds::default(), None);
    let mut pop = Vec::new();
    for (at, util) in [(0, 50.0), (60, 50.0), (120, 1.0)] {
        let mut b = Batch::new(t(at));
        b.all_jobs = true;
        let mut r = reading("6", "n1", vec![]);
        r.gpus = Some(GpuFigures::new(4.0, 1.0, vec![(&GPU_UTILIZATION, util)]));
        b.jobs.push(r);
        let held = jobs.observe(&b);
        let mut out = Batch::new(t(at));
        population::push(&b.jobs, &held, false, 5.0, &mut out);
        pop.push(out.value(&JOB_GPUS_IDLE, &[]));
    }
    assert_eq!(pop, vec![Some(1.0), Some(1.0), Some(4.0)], "the one without a process, then all");
    jobs.observe(&Batch { all_jobs: true, ..Batch::new(t(180)) });
    let recs: Vec<Value> = jobs.flush(t(181)).iter().map(parse).collect();
    let s = recs.iter().find(|v| v["Type"] == "job_summary").unwrap();
    // GPU-seconds over 120 s: 4 x 120; idle: 1 x 60 + 4 x 60 (each reading covers the time before it).
    assert_eq!(s["GpuIdlePercent"], 62.5, "{s}");
}

#[test]
fn a_job_that_holds_a_141_gb_gpu_for_hours_and_peaks_at_2_gb_is_a_finding_and_its_summary_says_so() {
    let gib = 1024.0 * 1024.0 * 1024.0;
    let mut jobs = Jobs::new(Thresholds::default(), None);
    let mut findings = Vec::new();
    // One H200 (141 GiB as the catalog counts it here), busy, its memory 1 GiB then 2 GiB.
    for (minute, used) in [(0, 1.0), (30, 2.0), (61, 1.5), (120, 1.0)] {
        let mut b = Batch::new(t(minute * 60));
        b.all_jobs = true;
        let mut r = reading("8", "n1", vec![]);
        let figures =
            vec![(&GPU_UTILIZATION, 90.0), (&GPU_MEMORY_USED, used * gib), (&GPU_MEMORY_TOTAL, 141.0 * gib)];
        r.gpus = Some(GpuFigures::new(1.0, 0.0, figures));
        b.jobs.push(r);
        jobs.observe(&b);
        findings
            .extend(jobs.flush(t(minute * 60 + 1)).iter().map(parse).filter(|v| v["Type"] == "job_finding"));
    }
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0]["Finding"], "gpu_memory_underused");
    assert!(
        findings[0]["Detail"]
            .as_str()
            .unwrap()
            .starts_with("peak GPU memory 2.0 GiB of its GPUs' 141.0 GiB (1.4%)")
    );
    jobs.observe(&Batch { all_jobs: true, ..Batch::new(t(7300)) });
    let recs: Vec<Value> = jobs.flush(t(7301)).iter().map(parse).collect();
    let s = recs.iter().find(|v| v["Type"] == "job_summary").unwrap();
    assert_eq!(
        (s["GpuMemoryPeakBytes"].as_f64(), s["GpuMemoryTotalBytes"].as_f64()),
        (Some(2.0 * gib), Some(141.0 * gib))
    );
    assert_eq!(s["GpuMemoryPeakPercent"], 1.41844, "2 of 141: {s}");
}

mod cost;
mod cost_edges;
