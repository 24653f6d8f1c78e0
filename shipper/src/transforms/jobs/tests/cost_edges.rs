//! What a job costs at the edges: Slurm scheduling no memory, a final sample between
//! collections (the restart mark, the crowd it ran in), dollars in the thousands.

use super::cost::job_5;
use super::*;
use crate::cost::{Basis, Price, Prices};
use crate::sample::Held;
use slurm_cw_formats::slurm::node::NodeSize;

#[test]
fn where_slurm_schedules_no_memory_the_cgroups_limit_of_the_whole_node_sets_no_share() {
    // CR_Core with ConstrainRAMSpace: Slurm gives the job 4 of 96 cores and no memory, and its
    // cgroup's limit is all of the node's memory. It pays 4/96 of $32 an hour, not all of it.
    let size = NodeSize { cpus: 96.0, memory_bytes: 1e12, gpus: 0.0 };
    let prices = Prices::fixed(Price { hourly: 32.0, basis: Basis::Configured }, &[("n1", size)]);
    let mut jobs = Jobs::new(Thresholds::default(), Some(prices));
    for at in [0, 3600] {
        let mut b = Batch::new(t(at));
        b.all_jobs = true;
        let mut r = reading("9", "n1", vec![(&CPUS_ALLOCATED, 4.0), (&MEMORY_LIMIT, 1.05e12)]);
        r.held = Held { started: Some(t(0)), cpus: Some(4.0), memory_bytes: None };
        b.jobs.push(r);
        jobs.observe(&b);
    }
    let recs: Vec<Value> = jobs.flush(t(3601)).iter().map(parse).collect();
    let sample = recs.iter().find(|v| v["Type"] == "job_sample").unwrap();
    assert_eq!(sample["Share"].as_f64(), Some(0.0416667), "{sample}");
    assert_eq!(sample["CostUsd"].as_f64(), Some(1.33333), "$32 x 4/96 for an hour: {sample}");
    // Where Slurm said nothing of the job at all, the cgroup's limit still stands in.
    let mut jobs = Jobs::new(
        Thresholds::default(),
        Some(Prices::fixed(Price { hourly: 32.0, basis: Basis::Configured }, &[("n1", size)])),
    );
    for at in [0, 3600] {
        let mut b = Batch::new(t(at));
        b.all_jobs = true;
        b.jobs.push(reading("9", "n1", vec![(&CPUS_ALLOCATED, 4.0), (&MEMORY_LIMIT, 2.5e11)]));
        jobs.observe(&b);
    }
    let recs: Vec<Value> = jobs.flush(t(3601)).iter().map(parse).collect();
    let sample = recs.iter().find(|v| v["Type"] == "job_sample").unwrap();
    assert_eq!(sample["Share"].as_f64(), Some(0.25), "its cgroup's quarter of the memory: {sample}");
}

#[test]
fn the_cgroups_figures_stand_in_only_until_slurm_answers() {
    // CR_Core with ConstrainRAMSpace, slurmctld slow at the job's first collection: its cgroup
    // (the whole node's memory) stands in for an hour, then Slurm says 4 of 96 cores and no
    // memory. The second hour is billed at 4/96 of $32, not at the whole node for good.
    let size = NodeSize { cpus: 96.0, memory_bytes: 1e12, gpus: 0.0 };
    let prices = Prices::fixed(Price { hourly: 32.0, basis: Basis::Configured }, &[("n1", size)]);
    let mut jobs = Jobs::new(Thresholds::default(), Some(prices));
    for (at, slurm) in [(0, false), (3600, false), (7200, true), (10_800, false)] {
        let mut b = Batch::new(t(at));
        b.all_jobs = true;
        let mut r = reading("9", "n1", vec![(&CPUS_ALLOCATED, 4.0), (&MEMORY_LIMIT, 1.05e12)]);
        if slurm {
            r.held = Held { started: Some(t(0)), cpus: Some(4.0), memory_bytes: None };
        }
        b.jobs.push(r);
        jobs.observe(&b);
        if at == 3600 {
            let recs: Vec<Value> = jobs.flush(t(3601)).iter().map(parse).collect();
            let sample = recs.iter().find(|v| v["Type"] == "job_sample").unwrap();
            assert_eq!(sample["Share"].as_f64(), Some(1.0), "its cgroup's word meanwhile: {sample}");
        }
    }
    let recs: Vec<Value> = jobs.flush(t(10_801)).iter().map(parse).collect();
    let sample = recs.iter().find(|v| v["Type"] == "job_sample").unwrap();
    // Slurm's answer at 2 h bills the hour to it at the new share; a later reading without
    // Slurm's figures (an answer not come in time) does not bring the cgroup's back.
    assert_eq!(sample["Share"].as_f64(), Some(0.0416667), "{sample}");
    // $32 for the first hour, $1.33 for each of the next two.
    assert_eq!(sample["CostUsd"].as_f64(), Some(34.6667), "{sample}");
}

#[test]
fn a_final_sample_moves_the_restart_mark_no_further_than_the_last_collection() {
    // Jobs 5 and 6 read at 30 s; job 6's TaskEpilog sample at 55 s. Job 5 is counted to 30 s
    // only: a daemon restarted from 55 s would never count job 5's 30 to 55.
    let size = NodeSize { cpus: 4.0, memory_bytes: 0.0, gpus: 0.0 };
    let prices = Prices::fixed(Price { hourly: 10.0, basis: Basis::Configured }, &[("n1", size)]);
    let mut jobs = Jobs::new(Thresholds::default(), Some(prices));
    let mut b = Batch::new(t(30));
    b.all_jobs = true;
    for id in ["5", "6"] {
        let mut r = reading(id, "n1", vec![(&CPUS_ALLOCATED, 2.0)]);
        r.held = Held { started: Some(t(0)), cpus: Some(2.0), memory_bytes: None };
        b.jobs.push(r);
    }
    jobs.observe(&b);
    let mut last = Batch::new(t(55));
    let mut r = reading("6", "n1", vec![(&CPUS_ALLOCATED, 2.0)]);
    r.held = Held { started: Some(t(0)), cpus: Some(2.0), memory_bytes: None };
    last.jobs.push(r);
    jobs.observe(&last);
    assert_eq!(jobs.counted_to(), Some(t(30)));
}

#[test]
fn a_job_of_thousands_of_dollars_keeps_its_cents_in_its_records() {
    // The whole node at $1,234.49 an hour, for an hour: $1,234.49, not $1,234.
    let size = NodeSize { cpus: 4.0, memory_bytes: 0.0, gpus: 0.0 };
    let prices = Prices::fixed(Price { hourly: 1234.49, basis: Basis::Configured }, &[("n1", size)]);
    let mut jobs = Jobs::new(Thresholds::default(), Some(prices));
    for at in [0, 3600] {
        job_5(&mut jobs, at, Some(t(0)), 4.0, None);
    }
    let recs: Vec<Value> = jobs.flush(t(3601)).iter().map(parse).collect();
    assert_eq!(recs[0]["CostUsd"].as_f64(), Some(1234.49), "{:?}", recs[0]);
    assert_eq!(recs[0]["HourlyPrice"].as_f64(), Some(1234.49));
}

#[test]
fn a_job_seen_only_by_its_final_sample_crowds_the_others_for_the_time_it_ran() {
    // $32 an hour for 96 cores and 1 TB. L holds 72 cores (0.75) throughout, read at 0 and 30 s;
    // B holds 500 GB (0.5) from 1 s to its final sample at 25 s, in no collection. Together they
    // are 1.25 of the node: each divided by it while both ran. L: 0.75 to 1 s, 0.6 to 25 s and
    // 0.75 after, 18.9 node-seconds; B: 0.4 for 24 s, 9.6. Before, L was billed 0.75 for all
    // 30 s beside B's 0.4: 32.1 node-seconds in a 30 s interval.
    let size = NodeSize { cpus: 96.0, memory_bytes: 1e12, gpus: 0.0 };
    let prices = Prices::fixed(Price { hourly: 32.0, basis: Basis::Configured }, &[("n1", size)]);
    let mut jobs = Jobs::new(Thresholds::default(), Some(prices));
    jobs.since = t(0);
    let l = || {
        let mut r = reading("1", "n1", vec![(&CPUS_ALLOCATED, 72.0)]);
        r.held = Held { started: Some(t(0)), cpus: Some(72.0), memory_bytes: None };
        r
    };
    let mut first = Batch::new(t(0));
    first.all_jobs = true;
    first.jobs.push(l());
    jobs.observe(&first);
    let mut last = Batch::new(t(25));
    let mut b = reading("2", "n1", vec![]);
    b.held = Held { started: Some(t(1)), cpus: Some(1.0), memory_bytes: Some(5e11) };
    last.jobs.push(b);
    jobs.observe(&last);
    let mut next = Batch::new(t(30));
    next.all_jobs = true;
    next.jobs.push(l());
    jobs.observe(&next);
    let per_second = 32.0 / 3600.0;
    let recs: Vec<Value> = jobs.flush(t(31)).iter().map(parse).collect();
    let cost = |id: &str| recs.iter().find(|v| v["JobId"] == id).and_then(|v| v["CostUsd"].as_f64());
    assert_eq!(cost("1"), Some(round(18.9 * per_second)), "{recs:?}");
    assert_eq!(cost("2"), Some(round(9.6 * per_second)), "{recs:?}");
    let spent: f64 = jobs.take_spent().values().map(|s| s.0).sum();
    assert!((spent - 28.5 * per_second).abs() < 1e-9, "{spent}: at most the node's 30 s");
}

#[test]
fn a_job_requeued_here_between_collections_ends_its_run_and_starts_another() {
    // The whole node at $36 an hour: the job read at 0 and 30 s, started at 0; then at 60 s with
    // Slurm's start 50 s (requeued and started again here; no collection saw it gone). Its
    // first run ends at its last reading ($0.30 for 30 s) with its own summary; the second is
    // counted from its own start ($0.10 for 10 s), not merged into the first.
    let size = NodeSize { cpus: 4.0, memory_bytes: 0.0, gpus: 0.0 };
    let prices = Prices::fixed(Price { hourly: 36.0, basis: Basis::Configured }, &[("n1", size)]);
    let mut jobs = Jobs::new(Thresholds::default(), Some(prices));
    jobs.since = t(0);
    for at in [0, 30] {
        job_5(&mut jobs, at, Some(t(0)), 4.0, None);
    }
    job_5(&mut jobs, 60, Some(t(50)), 4.0, None);
    let recs: Vec<Value> = jobs.flush(t(61)).iter().map(parse).collect();
    let summary = recs.iter().find(|v| v["Type"] == "job_summary").expect("the first run's summary");
    assert_eq!(summary["CostUsd"].as_f64(), Some(0.3), "{summary}");
    assert_eq!(summary["SlurmStart"], format_timestamp(t(0)));
    let sample = recs.iter().find(|v| v["Type"] == "job_sample").expect("the second run's sample");
    assert_eq!(sample["CostUsd"].as_f64(), Some(0.1), "{sample}");
    assert_eq!(sample["SlurmStart"], format_timestamp(t(50)));
    let spent: f64 = jobs.take_spent().values().map(|s| s.0).sum();
    assert!((spent - 0.4).abs() < 1e-9, "{spent}: 40 s of the node, not 60");
}

#[test]
fn a_start_slurm_moves_within_the_run_is_no_new_run() {
    // A cloud node powered up for the job: Slurm resets its start to the power up, later than
    // it first said but before the readings since (asked again an hour on). The same run: no
    // summary, no second bill.
    let size = NodeSize { cpus: 4.0, memory_bytes: 0.0, gpus: 0.0 };
    let prices = Prices::fixed(Price { hourly: 36.0, basis: Basis::Configured }, &[("n1", size)]);
    let mut jobs = Jobs::new(Thresholds::default(), Some(prices));
    jobs.since = t(0);
    for at in [0, 1800, 3600] {
        job_5(&mut jobs, at, Some(t(0)), 4.0, None);
    }
    job_5(&mut jobs, 5400, Some(t(120)), 4.0, None);
    let recs: Vec<Value> = jobs.flush(t(5401)).iter().map(parse).collect();
    assert!(recs.iter().all(|v| v["Type"] != "job_summary"), "{recs:?}");
    let spent: f64 = jobs.take_spent().values().map(|s| s.0).sum();
    assert!((spent - 54.0).abs() < 1e-6, "{spent}: 5400 s at $36 an hour, once");
}
