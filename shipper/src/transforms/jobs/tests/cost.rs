//! What a job costs and wastes, in records and in the cost metrics.

use super::*;
use crate::cost::{Basis, Price, Prices};
use crate::sample::Held;
use slurm_cw_formats::slurm::node::NodeSize;

/// One collection of job 5 on n1 at `at` s, holding `cpus` cores (and its GPUs' worth
/// `billed`), started at `started` as far as Slurm has said.
pub(super) fn job_5(jobs: &mut Jobs, at: u64, started: Option<SystemTime>, cpus: f64, billed: Option<f64>) {
    let mut b = Batch::new(t(at));
    b.all_jobs = true;
    let mut r = reading("5", "n1", vec![(&CPUS_ALLOCATED, cpus)]);
    r.held = Held { started, cpus: Some(cpus), ..Held::default() };
    if let Some(billed) = billed {
        let mut g = GpuFigures::new(2.0, 0.0, vec![]);
        g.billed = billed;
        r.gpus = Some(g);
    }
    b.jobs.push(r);
    jobs.observe(&b);
}

#[test]
fn a_job_costs_price_times_share_times_the_hours_it_held_the_node_from_its_slurm_start() {
    // A 96-core, 8-GPU node at $32 an hour; the job holds 12 cores and 2 GPUs: a quarter of it
    // ($8 an hour). Slurm says it started an hour before this node's shipper first saw it.
    let size = NodeSize { cpus: 96.0, memory_bytes: 1e12, gpus: 8.0 };
    let prices = Prices::fixed(Price { hourly: 32.0, basis: Basis::Configured }, &[("n1", size)]);
    let mut jobs = Jobs::new(Thresholds::default(), Some(prices));
    let held = Held { started: Some(t(0)), cpus: Some(12.0), memory_bytes: Some(1e11) };
    for (at, util) in [(3600, 50.0), (5400, 50.0), (7200, 0.0)] {
        let mut b = Batch::new(t(at));
        b.all_jobs = true;
        let mut r =
            reading("9", "n1", vec![(&CPUS_ALLOCATED, 12.0), (&CPU_USAGE, 6.0), (&CPU_UTILIZATION, 50.0)]);
        r.held = held.clone();
        // Utilisation 50%, then idle: of the hour after the first reading, the first half busy
        // and the second idle (each reading covers the time before it).
        r.gpus = Some(GpuFigures::new(2.0, 0.0, vec![(&GPU_UTILIZATION, util)]));
        b.jobs.push(r);
        jobs.observe(&b);
    }
    let recs: Vec<Value> = jobs.flush(t(7201)).iter().map(parse).collect();
    let sample = recs.iter().find(|v| v["Type"] == "job_sample").unwrap();
    // Two hours from its start at $8: $16.
    assert_eq!(sample["CostUsd"], 16.0, "{sample}");
    assert_eq!((sample["HourlyPrice"].as_f64(), sample["Share"].as_f64()), (Some(32.0), Some(0.25)));
    assert_eq!(sample["CostBasis"], "configured");
    assert_eq!(sample["SlurmStart"], format_timestamp(t(0)));
    let spent = jobs.take_spent();
    // The metrics get what it cost so far, and its waste by the rule so far (half of it).
    assert_eq!(spent.get(&("phys".to_owned(), "cpu".to_owned())), Some(&(16.0, 8.0)));
    // The job ends: its summary says the total and the waste by the rule. GPUs set the share;
    // they idled 1 of the 2 GPU-hours read (GPU time counts from the first reading): half of $16.
    jobs.observe(&Batch { all_jobs: true, ..Batch::new(t(9000)) });
    let recs: Vec<Value> = jobs.flush(t(9001)).iter().map(parse).collect();
    let s = recs.iter().find(|v| v["Type"] == "job_summary").unwrap();
    assert_eq!(s["CostUsd"], 16.0, "the cgroup gone: no more time held after the last reading");
    assert_eq!((s["WasteResource"].as_str(), s["UnusedPercent"].as_f64()), (Some("gpu"), Some(50.0)), "{s}");
    assert_eq!(s["WasteUsd"], 8.0);
    assert!(jobs.take_spent().is_empty(), "nothing new since: counted once");
}

#[test]
fn a_job_pays_its_part_of_gpus_other_jobs_hold_too() {
    // $32 an hour for 96 cores and 8 GPUs. The job holds 6 cores and 2 GPUs, each shared with
    // another job (gres/shard): 1 GPU's worth, an eighth of the node, $4 an hour (not $8).
    let size = NodeSize { cpus: 96.0, memory_bytes: 1e12, gpus: 8.0 };
    let prices = Prices::fixed(Price { hourly: 32.0, basis: Basis::Configured }, &[("n1", size)]);
    let mut jobs = Jobs::new(Thresholds::default(), Some(prices));
    for at in [0, 3600] {
        let mut b = Batch::new(t(at));
        b.all_jobs = true;
        let mut r = reading("9", "n1", vec![(&CPUS_ALLOCATED, 6.0)]);
        r.held = Held { started: Some(t(0)), cpus: Some(6.0), memory_bytes: None };
        let mut g = GpuFigures::new(2.0, 0.0, vec![(&GPU_UTILIZATION, 90.0)]);
        g.billed = 1.0;
        r.gpus = Some(g);
        b.jobs.push(r);
        jobs.observe(&b);
    }
    let recs: Vec<Value> = jobs.flush(t(3601)).iter().map(parse).collect();
    let sample = recs.iter().find(|v| v["Type"] == "job_sample").unwrap();
    assert_eq!((sample["CostUsd"].as_f64(), sample["Share"].as_f64()), (Some(4.0), Some(0.125)), "{sample}");
}

#[test]
fn without_a_price_or_a_node_size_no_cost_figure_at_all() {
    for prices in [Prices::default(), Prices::fixed(Price { hourly: 1.0, basis: Basis::Spot }, &[])] {
        let mut jobs = Jobs::new(Thresholds::default(), Some(prices.clone()));
        jobs.observe(&collection(0, &[("1", 1.0, 1e9)]));
        jobs.observe(&collection(60, &[("1", 1.0, 1e9)]));
        let recs: Vec<Value> = jobs.flush(t(61)).iter().map(parse).collect();
        assert!(recs.iter().all(|r| r.get("CostUsd").is_none() && r.get("WasteUsd").is_none()), "{recs:?}");
        assert!(jobs.take_spent().is_empty());
        assert_eq!(jobs.uncosted, 1, "counted");
        assert_eq!(prices.wanted(), vec!["n1".to_owned()], "the node's size is asked for");
    }
}

#[test]
fn a_job_that_ran_before_the_daemon_adds_to_the_metrics_only_from_the_daemons_start() {
    // The whole node at $10 an hour; the job started two hours before this daemon, which then
    // reads it for one hour. Its records say $30; the metrics get the last hour's $10 (the
    // daemon before this one added the first $20 as it stopped).
    let size = NodeSize { cpus: 4.0, memory_bytes: 0.0, gpus: 0.0 };
    let prices = Prices::fixed(Price { hourly: 10.0, basis: Basis::Configured }, &[("n1", size)]);
    let mut jobs = Jobs::new(Thresholds::default(), Some(prices));
    jobs.since = t(7200);
    for at in [7200, 10800] {
        job_5(&mut jobs, at, Some(t(0)), 4.0, None);
    }
    let recs: Vec<Value> = jobs.flush(t(10801)).iter().map(parse).collect();
    assert_eq!(recs[0]["CostUsd"], 30.0, "{:?}", recs[0]);
    let spent = jobs.take_spent();
    // Slurm's start is to the second: the second after it is this daemon's to count too.
    let added: f64 = spent.values().map(|s| s.0).sum();
    assert!((added - (10.0 + 10.0 / 3600.0)).abs() < 1e-9, "{spent:?}");
}

#[test]
fn a_slurm_start_that_comes_late_is_counted_back_to_in_records_and_from_the_daemons_start_in_metrics() {
    // The whole node at $10 an hour. This daemon started at 7200 s, two hours into the job;
    // Slurm did not answer in time for its first reading (7220 s), and says at 10800 s that the
    // job started at 0. The records count from 0 ($30), not from 7220 ($9.94); the metrics,
    // from this daemon's start, the daemon before having counted the rest.
    let size = NodeSize { cpus: 4.0, memory_bytes: 0.0, gpus: 0.0 };
    let prices = Prices::fixed(Price { hourly: 10.0, basis: Basis::Configured }, &[("n1", size)]);
    let mut jobs = Jobs::new(Thresholds::default(), Some(prices));
    jobs.since = t(7200);
    let mut added = 0.0;
    for (at, started) in [(7220, None), (10800, Some(t(0)))] {
        job_5(&mut jobs, at, started, 4.0, None);
        let recs: Vec<Value> = jobs.flush(t(at + 1)).iter().map(parse).collect();
        if at == 10800 {
            assert_eq!(recs[0]["CostUsd"], 30.0, "{:?}", recs[0]);
        }
        added += jobs.take_spent().values().map(|s| s.0).sum::<f64>();
    }
    assert!((added - (10.0 + 10.0 / 3600.0)).abs() < 1e-9, "{added}");
}

#[test]
fn the_time_before_the_daemon_started_stays_out_of_the_metrics_at_the_rate_it_was_counted_at() {
    // $10 an hour for 4 cores and 4 GPUs. The job holds 1 core and 2 GPUs, shared until
    // 10800 s with another job that then ends (1 GPU's worth, $2.50/h; then 2, $5/h). This
    // daemon started at 7200 s; Slurm's start (0) came at 10800 s. The records: 0 to 10800 s at
    // $2.50 and 10800 to 14400 s at $5, $12.50. The metrics: from 7199 s on, $2.50/h to 10800 s
    // and $5 to 14400 s. Counted at the flush's rate, the hours before this daemon would be $10.
    let size = NodeSize { cpus: 4.0, memory_bytes: 0.0, gpus: 4.0 };
    let prices = Prices::fixed(Price { hourly: 10.0, basis: Basis::Configured }, &[("n1", size)]);
    let mut jobs = Jobs::new(Thresholds::default(), Some(prices));
    jobs.since = t(7200);
    for (at, started, billed) in [(7220, None, 1.0), (10800, Some(t(0)), 1.0), (14400, Some(t(0)), 2.0)] {
        job_5(&mut jobs, at, started, 1.0, Some(billed));
    }
    let recs: Vec<Value> = jobs.flush(t(14401)).iter().map(parse).collect();
    assert_eq!(recs[0]["CostUsd"], 12.5, "{:?}", recs[0]);
    let added: f64 = jobs.take_spent().values().map(|s| s.0).sum();
    let want = 2.5 * 3601.0 / 3600.0 + 5.0;
    assert!((added - want).abs() < 1e-9, "{added}, not {want}");
}

#[test]
fn a_nodes_jobs_are_billed_the_node_once_when_their_shares_add_up_to_more() {
    // $32 an hour for 96 cores and 1 TB. Job 5 holds 72 cores and 100 GB (0.75, by CPUs); job 6
    // 24 cores and 500 GB (0.5, by memory): 1.25 of the node. Divided by 1.25, 0.6 and 0.4:
    // $19.20 and $12.80 an hour, the node's $32 once. Job 6 ends after an hour; then job 5 is
    // alone at 0.75 ($24 the second hour).
    let size = NodeSize { cpus: 96.0, memory_bytes: 1e12, gpus: 0.0 };
    let prices = Prices::fixed(Price { hourly: 32.0, basis: Basis::Configured }, &[("n1", size)]);
    let mut jobs = Jobs::new(Thresholds::default(), Some(prices));
    let job = |id: &str, cpus: f64, memory: f64| {
        let mut r = reading(id, "n1", vec![(&CPUS_ALLOCATED, cpus)]);
        r.held = Held { started: Some(t(0)), cpus: Some(cpus), memory_bytes: Some(memory) };
        r
    };
    let batch = |at: u64, all: bool, ids: &[&str]| {
        let mut b = Batch::new(t(at));
        b.all_jobs = all;
        for id in ids {
            b.jobs.push(if *id == "5" { job("5", 72.0, 1e11) } else { job("6", 24.0, 5e11) });
        }
        b
    };
    let usd = |recs: &[Value], id: &str, kind: &str| -> Vec<(f64, f64)> {
        recs.iter()
            .filter(|r| r["JobId"] == id && r["Type"] == kind)
            .map(|r| (r["CostUsd"].as_f64().unwrap(), r["Share"].as_f64().unwrap()))
            .collect()
    };
    jobs.observe(&batch(0, true, &["5", "6"]));
    // Job 6's TaskEpilog half an hour in: job 5 still runs beside it, so 0.4, not 0.5.
    jobs.observe(&batch(1800, false, &["6"]));
    let recs: Vec<Value> = jobs.flush(t(1801)).iter().map(parse).collect();
    assert_eq!(usd(&recs, "6", "job_summary"), vec![(6.4, 0.4)], "{recs:?}");
    let mut spent = jobs.take_spent().values().map(|s| s.0).sum::<f64>();
    jobs.observe(&batch(3600, true, &["5", "6"]));
    let recs: Vec<Value> = jobs.flush(t(3601)).iter().map(parse).collect();
    assert_eq!(usd(&recs, "5", "job_sample"), vec![(19.2, 0.6)]);
    assert_eq!(usd(&recs, "6", "job_sample"), vec![(12.8, 0.4)]);
    spent += jobs.take_spent().values().map(|s| s.0).sum::<f64>();
    assert!((spent - 32.0).abs() < 1e-9, "the node's hour, once: {spent}");
    // Job 6's cgroup is gone: job 5 alone holds 0.75 of the node.
    jobs.observe(&batch(7200, true, &["5"]));
    let recs: Vec<Value> = jobs.flush(t(7201)).iter().map(parse).collect();
    assert_eq!(usd(&recs, "6", "job_summary"), vec![(12.8, 0.4)]);
    assert_eq!(usd(&recs, "5", "job_sample"), vec![(43.2, 0.75)]);
    let second: f64 = jobs.take_spent().values().map(|s| s.0).sum();
    assert!((second - 24.0).abs() < 1e-9, "{second}");
}

#[test]
fn a_restarted_daemon_counts_the_metrics_on_from_where_the_one_before_counted_to() {
    // The whole node at $10 an hour; the job started at 0. The daemon before this one counted
    // it to 3600 s and stopped; this one started at 7200 s and reads it at 7200 and 10800 s. The
    // records say $30 (from Slurm's start). The metrics get $20: the hour this node's daemon
    // was down counted, the first hour not again (the one before added it).
    let size = NodeSize { cpus: 4.0, memory_bytes: 0.0, gpus: 0.0 };
    let prices = Prices::fixed(Price { hourly: 10.0, basis: Basis::Configured }, &[("n1", size)]);
    let mut jobs = Jobs::new(Thresholds::default(), Some(prices));
    jobs.since = t(7200);
    let mut jobs = jobs.resuming(Some(t(3600))).resuming(None);
    for at in [7200, 10800] {
        job_5(&mut jobs, at, Some(t(0)), 4.0, None);
    }
    let recs: Vec<Value> = jobs.flush(t(10801)).iter().map(parse).collect();
    assert_eq!(recs[0]["CostUsd"], 30.0, "{:?}", recs[0]);
    let added: f64 = jobs.take_spent().values().map(|s| s.0).sum();
    // Counted from a second before the mark, as from a daemon's start (Slurm's start is to the second).
    assert!((added - (20.0 + 10.0 / 3600.0)).abs() < 1e-9, "{added}");
    assert_eq!(jobs.counted_to(), Some(t(10800)), "what the next daemon counts on from");
}

/// A job missing from one collection (Slurm listed it as ended a moment, or its cgroup was not
/// read) and there again: the same run. Its summary counts it from its Slurm start, and the
/// cost metrics count on from where they stood, not again from its start (before, the hour
/// they had counted was counted twice: $16 for three hours at $4).
#[test]
fn a_job_that_comes_back_after_a_collection_without_it_is_not_counted_twice_in_the_metrics() {
    let size = NodeSize { cpus: 96.0, memory_bytes: 1e12, gpus: 0.0 };
    let prices = Prices::fixed(Price { hourly: 32.0, basis: Basis::Configured }, &[("n1", size)]);
    let mut jobs = Jobs::new(Thresholds::default(), Some(prices));
    job_5(&mut jobs, 3600, Some(t(0)), 12.0, None);
    jobs.observe(&Batch { all_jobs: true, ..Batch::new(t(7200)) });
    job_5(&mut jobs, 10800, Some(t(0)), 12.0, None);
    let recs: Vec<Value> = jobs.flush(t(10801)).iter().map(parse).collect();
    let sample = recs.iter().find(|v| v["Type"] == "job_sample").unwrap();
    assert_eq!(sample["CostUsd"], 12.0, "three hours at $4 from its Slurm start: {sample}");
    let spent = jobs.take_spent();
    assert_eq!(spent.get(&("phys".to_owned(), "cpu".to_owned())).map(|s| s.0), Some(12.0), "{spent:?}");
}

#[test]
fn a_suspended_job_pays_for_its_memory_alone_and_its_idle_cores_are_not_waste() {
    // $10 an hour for 4 cores and 1000 GB. The job holds 2 cores (half the node) and 250 GB (a
    // quarter). It runs an hour using 1 of its 2 cores, is suspended an hour (Slurm lends its
    // cores to others, its memory stays), then runs another hour the same way.
    let size = NodeSize { cpus: 4.0, memory_bytes: 1e12, gpus: 0.0 };
    let prices = Prices::fixed(Price { hourly: 10.0, basis: Basis::Configured }, &[("n1", size)]);
    let mut jobs = Jobs::new(Thresholds::default(), Some(prices));
    let held = Held { started: Some(t(0)), cpus: Some(2.0), memory_bytes: Some(2.5e11) };
    let mut records = Vec::new();
    for (at, suspended) in [(0, false), (3600, false), (7200, true), (10800, false)] {
        let mut b = Batch::new(t(at));
        b.all_jobs = true;
        let (usage, util) = if suspended { (0.0, 0.0) } else { (1.0, 50.0) };
        let mut r =
            reading("9", "n1", vec![(&CPUS_ALLOCATED, 2.0), (&CPU_USAGE, usage), (&CPU_UTILIZATION, util)]);
        r.held = held.clone();
        r.job.suspended = suspended;
        b.jobs.push(r);
        jobs.observe(&b);
        records.extend(jobs.flush(t(at + 1)).iter().map(parse));
    }
    let sample_at = |at: u64| {
        records
            .iter()
            .find(|v| v["Type"] == "job_sample" && v["Time"] == format_timestamp(t(at + 1)))
            .unwrap_or_else(|| panic!("a sample at {at}: {records:?}"))
    };
    // Running: half the node. Suspended: its memory's quarter, the hour counted at it.
    let running = sample_at(3600);
    assert_eq!((running["Share"].as_f64(), running["CostUsd"].as_f64()), (Some(0.5), Some(5.0)), "{running}");
    assert!(running.get("SuspendedSeconds").is_none(), "never suspended: no field: {running}");
    let suspended = sample_at(7200);
    assert_eq!(
        (suspended["Share"].as_f64(), suspended["CostUsd"].as_f64()),
        (Some(0.25), Some(7.5)),
        "{suspended}"
    );
    assert_eq!(suspended["SuspendedSeconds"], 3600.0);
    let again = sample_at(10800);
    assert_eq!((again["Share"].as_f64(), again["CostUsd"].as_f64()), (Some(0.5), Some(12.5)), "{again}");
    // It ends: CPU-bound, half its cores idle while it ran; the suspended hour is not idle
    // time, and its $2.50 no waste: half of the $10 it cost running.
    jobs.observe(&Batch { all_jobs: true, ..Batch::new(t(12000)) });
    let recs: Vec<Value> = jobs.flush(t(12001)).iter().map(parse).collect();
    let s = recs.iter().find(|v| v["Type"] == "job_summary").unwrap();
    assert_eq!((s["CostUsd"].as_f64(), s["SuspendedSeconds"].as_f64()), (Some(12.5), Some(3600.0)), "{s}");
    assert_eq!((s["CpuEfficiency"].as_f64(), s["UnusedPercent"].as_f64()), (Some(50.0), Some(50.0)), "{s}");
    assert_eq!((s["WasteUsd"].as_f64(), s["WasteResource"].as_str()), (Some(5.0), Some("cpu")));
}

#[test]
fn a_job_first_seen_suspended_is_billed_as_running_until_its_next_reading() {
    // $10 an hour for 4 cores and 1000 GB; 2 cores (half) and no memory Slurm gave. First seen
    // an hour after its start, already suspended: that hour billed running ($5), for the node
    // cannot tell when the suspension began. The next hour, suspended and holding nothing
    // but CPUs: unbilled, and not billed later either.
    let size = NodeSize { cpus: 4.0, memory_bytes: 1e12, gpus: 0.0 };
    let prices = Prices::fixed(Price { hourly: 10.0, basis: Basis::Configured }, &[("n1", size)]);
    let mut jobs = Jobs::new(Thresholds::default(), Some(prices));
    let mut last = Value::Null;
    for (at, suspended) in [(3600, true), (7200, true), (10800, false)] {
        let mut b = Batch::new(t(at));
        b.all_jobs = true;
        let mut r = reading("9", "n1", vec![(&CPUS_ALLOCATED, 2.0)]);
        r.held = Held { started: Some(t(0)), cpus: Some(2.0), memory_bytes: None };
        r.job.suspended = suspended;
        b.jobs.push(r);
        jobs.observe(&b);
        let recs: Vec<Value> = jobs.flush(t(at + 1)).iter().map(parse).collect();
        last = recs.into_iter().find(|v| v["Type"] == "job_sample").unwrap();
        let want = match at {
            3600 => (Some(5.0), Some(0.5), None),
            7200 => (Some(5.0), Some(0.0), Some(3600.0)),
            _ => (Some(10.0), Some(0.5), Some(3600.0)),
        };
        let got = (last["CostUsd"].as_f64(), last["Share"].as_f64(), last["SuspendedSeconds"].as_f64());
        assert_eq!(got, want, "at {at}: {last}");
    }
    assert_eq!(last["CostBasis"], "configured");
}

#[test]
fn a_price_known_only_while_the_job_is_suspended_bills_the_time_before_as_running() {
    // $10 an hour for 4 cores and 1000 GB; 2 cores (half) and 250 GB (a quarter). It runs from
    // 0, half its cores busy, is suspended from 1.5 h on; the price and node size come at 3 h.
    let prices = Prices::default();
    let mut jobs = Jobs::new(Thresholds::default(), Some(prices.clone()));
    let held = Held { started: Some(t(0)), cpus: Some(2.0), memory_bytes: Some(2.5e11) };
    for (at, suspended) in [(3600, false), (5400, false), (7200, true), (10800, true), (14400, true)] {
        if at == 10800 {
            prices.set_price(Ok(Price { hourly: 10.0, basis: Basis::Configured }));
            prices.set_size("n1", NodeSize { cpus: 4.0, memory_bytes: 1e12, gpus: 0.0 });
        }
        let mut b = Batch::new(t(at));
        b.all_jobs = true;
        let cpu = if suspended { 0.0 } else { 1.0 };
        let mut r = reading(
            "9",
            "n1",
            vec![(&CPUS_ALLOCATED, 2.0), (&CPU_USAGE, cpu), (&CPU_UTILIZATION, cpu * 50.0)],
        );
        r.held = held.clone();
        r.job.suspended = suspended;
        b.jobs.push(r);
        jobs.observe(&b);
        jobs.flush(t(at + 1));
    }
    // The first count reaches back to its start: 3 h at half the node ($15), whether it ran then
    // the node cannot tell; then an hour suspended at its memory's quarter ($2.50). Its waste is
    // of the $15: half its cores idle while it ran.
    assert_eq!(jobs.take_spent().get(&("phys".to_owned(), "cpu".to_owned())), Some(&(17.5, 7.5)));
    jobs.observe(&Batch { all_jobs: true, ..Batch::new(t(15000)) });
    let recs: Vec<Value> = jobs.flush(t(15001)).iter().map(parse).collect();
    let s = recs.iter().find(|v| v["Type"] == "job_summary").unwrap();
    let got = (s["CostUsd"].as_f64(), s["WasteUsd"].as_f64(), s["SuspendedSeconds"].as_f64());
    assert_eq!(got, (Some(17.5), Some(7.5), Some(9000.0)), "{s}");
}
