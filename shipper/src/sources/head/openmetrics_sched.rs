//! slurmctld's /metrics/scheduler as sdiag's scheduler figures, for a head role that ships no
//! RPC statistics (`head.top_rpc_types = 0`): then sdiag need not run at all.
//!
//! The names below are the endpoint's for the figures `sdiag --json` gives (checked on the real
//! 26.05.5 captures, formats/tests/fixtures/slurm/26.05-real/). Its counters reset at midnight
//! UTC as sdiag's do; the derive transform turns both into reset-aware increases. The endpoint
//! lacks sdiag's cycles per minute and pending RPCs: not shipped from it.

use crate::sample::{Batch, Dims};
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::metrics::*;
use slurm_cw_formats::slurm::openmetrics::Exposition;
use slurm_cw_formats::slurm::sdiag::mean_of_nothing;

const NAMES: &[(&str, &Metric)] = &[
    ("slurm_server_thread_cnt", &SERVER_THREAD_COUNT),
    ("slurm_agent_queue_size", &AGENT_QUEUE_SIZE),
    ("slurm_agent_cnt", &AGENT_COUNT),
    ("slurm_agent_thread_cnt", &AGENT_THREAD_COUNT),
    ("slurm_slurmdbd_queue_size", &DBD_AGENT_QUEUE_SIZE),
    ("slurm_sdiag_jobs_submitted", &JOBS_SUBMITTED),
    ("slurm_sdiag_jobs_started", &JOBS_STARTED),
    ("slurm_sdiag_jobs_completed", &JOBS_COMPLETED),
    ("slurm_sdiag_jobs_canceled", &JOBS_CANCELED),
    ("slurm_sdiag_jobs_failed", &JOBS_FAILED),
    ("slurm_sdiag_jobs_pending", &JOBS_PENDING),
    ("slurm_sdiag_jobs_running", &JOBS_RUNNING),
    ("slurm_schedule_cycle_last", &MAIN_SCHED_LAST_CYCLE),
    ("slurm_schedule_cycle_max", &MAIN_SCHED_MAX_CYCLE),
    ("slurm_schedule_cycle_cnt", &MAIN_SCHED_TOTAL_CYCLES),
    ("slurm_sched_mean_cycle", &MAIN_SCHED_MEAN_CYCLE),
    ("slurm_sched_mean_depth_cycle", &MAIN_SCHED_MEAN_DEPTH),
    ("slurm_schedule_queue_len", &MAIN_SCHED_LAST_QUEUE_LENGTH),
    ("slurm_backfilled_jobs", &BACKFILL_JOBS_SINCE_START),
    ("slurm_last_backfilled_jobs", &BACKFILL_JOBS_SINCE_CYCLE_START),
    ("slurm_bf_cycle_cnt", &BACKFILL_TOTAL_CYCLES),
    ("slurm_bf_cycle_last", &BACKFILL_LAST_CYCLE),
    ("slurm_bf_cycle_max", &BACKFILL_MAX_CYCLE),
    ("slurm_bf_mean_cycle", &BACKFILL_MEAN_CYCLE),
    ("slurm_bf_last_depth", &BACKFILL_LAST_DEPTH),
    ("slurm_bf_last_depth_try", &BACKFILL_LAST_DEPTH_TRY),
    ("slurm_bf_depth_mean", &BACKFILL_DEPTH_MEAN),
    ("slurm_bf_try_depth_mean", &BACKFILL_DEPTH_MEAN_TRY),
    ("slurm_bf_queue_len", &BACKFILL_QUEUE_LENGTH),
    ("slurm_bf_queue_len_mean", &BACKFILL_QUEUE_LENGTH_MEAN),
];

/// Emits the scheduler figures the exposition has; returns how many (0: not the scheduler's).
/// A mean over no cycle (the endpoint gives 0 before a scheduler's first) is left out, as text
/// sdiag leaves it.
pub fn emit(e: &Exposition, out: &mut Batch) -> usize {
    let value = |m: &'static Metric| {
        let name = NAMES.iter().find(|(_, k)| std::ptr::eq(*k, m))?.0;
        e.value(name).filter(|v| v.is_finite() && *v >= 0.0)
    };
    let mut n = 0;
    for (_, metric) in NAMES {
        if let Some(v) = value(metric).filter(|_| !mean_of_nothing(metric, value)) {
            out.push(metric, Dims::new(), v);
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::head::sdiag;
    use slurm_cw_formats::slurm::openmetrics::parse;

    #[test]
    fn real_26_05_scheduler_figures_equal_sdiags() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../formats/tests/fixtures/slurm/26.05-real/");
        let e = parse(&std::fs::read_to_string(format!("{dir}openmetrics-scheduler.txt")).unwrap());
        let mut b = Batch::new(std::time::SystemTime::UNIX_EPOCH);
        // That capture was taken before the backfill's first cycle: its four means are 0
        // there and in sdiag --json, and left out of both.
        assert_eq!(emit(&e, &mut b), NAMES.len() - 4);
        assert_eq!(b.value(&BACKFILL_MEAN_CYCLE, &[]), None);
        assert!(b.value(&MAIN_SCHED_MEAN_CYCLE, &[]).is_some());
        // sdiag --json of the same second (its req_time is the endpoint's sched_stats_timestamp).
        let s =
            sdiag::parse_json(&std::fs::read_to_string(format!("{dir}sdiag-26.05.json")).unwrap()).unwrap();
        for (_, m) in NAMES {
            let want = s.get(m);
            // sdiag counts its own RPC's server thread; the endpoint's GET is no RPC.
            let want = if m.name == SERVER_THREAD_COUNT.name { want.map(|v| v - 1.0) } else { want };
            assert_eq!(b.value(m, &[]), want, "{}", m.name);
        }
    }
}
