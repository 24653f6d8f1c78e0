//! A job's own part of a GPU that other jobs hold too: Slurm's `gres/shard` and `gres/mps`
//! give several jobs one GPU (AWS PCS configures both), and a job's process may land on a
//! neighbour's GPU. Seen on an H200: a second job allocated the busy GPU, with no process on
//! it, got the busy job's utilisation, power and memory as its own. Here a job's figures on
//! such a GPU are its processes': memory from their `usedGpuMemory`, utilisation from NVML's
//! per-process SM samples, power (and, in the collector, energy) by that utilisation's share;
//! a job with no process on it shows 0. The same holds for a job alone on a GPU beside a
//! process of no job (one an ended job left behind): seen on an H200 too. Through MPS, NVML
//! lists each client with its memory but gives the server every client's SM samples: there a
//! job's utilisation is absent and power is split evenly between the jobs with clients on it.
//! Temperature, clocks, ECC, throttling, Xid and GPM describe the whole device, not a process,
//! and stay whole (README *GPUs*).

use super::source::Reading;
use std::collections::HashSet;

/// The job's part of `r`, whose processes on it are `mine` (`busy` parties run processes on
/// it: jobs, and processes of no job as one more), and the share of its power and energy that
/// is the job's.
pub(super) fn own_part(r: &Reading, mine: &HashSet<u32>, busy: usize) -> (Reading, f64) {
    // Through MPS the server has every client's SM samples (seen on an H200, driver 580): no
    // client's own utilisation can be told, as where NVML gives none.
    let process_sm = r.process_sm.as_ref().filter(|_| r.mps_clients.is_empty());
    let sm_of = |pids: &dyn Fn(u32) -> bool| -> Option<f64> {
        process_sm.map(|ps| ps.iter().filter(|(p, _)| pids(*p)).map(|(_, u)| *u).sum())
    };
    let own_sm = sm_of(&|p| mine.contains(&p));
    let all_sm = sm_of(&|_| true);
    let part = match (own_sm, all_sm) {
        (Some(own), Some(all)) if all > 0.0 => own / all,
        // No utilisation to divide by: evenly between the jobs running processes on it.
        _ if mine.is_empty() => 0.0,
        _ => 1.0 / busy.max(1) as f64,
    };
    // Memory: what NVML says each of the job's processes holds; unknown when it cannot say
    // for one of them.
    let memory = mine
        .iter()
        .map(|p| r.process_memory.iter().find(|(q, _)| q == p).map(|(_, b)| *b))
        .sum::<Option<u64>>();
    let own = Reading {
        // No process of the job on it: none of its work, whatever NVML can split.
        utilization: if mine.is_empty() { Some(0.0) } else { own_sm.map(|u| u.min(100.0)) },
        // Memory bandwidth belongs to no process in NVML's figures.
        memory_utilization: None,
        memory_used: memory,
        power_watts: r.power_watts.map(|w| w * part),
        pids: r.pids.iter().copied().filter(|p| mine.contains(p)).collect(),
        process_memory: r.process_memory.iter().copied().filter(|(p, _)| mine.contains(p)).collect(),
        process_sm: process_sm.map(|ps| ps.iter().copied().filter(|(p, _)| mine.contains(p)).collect()),
        mps_clients: r.mps_clients.iter().copied().filter(|p| mine.contains(p)).collect(),
        ..r.clone()
    };
    (own, part)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared_gpu() -> Reading {
        Reading {
            utilization: Some(100.0),
            memory_utilization: Some(40.0),
            memory_used: Some(6_000_000_000),
            memory_total: Some(150_000_000_000),
            power_watts: Some(690.0),
            temperature: Some(60.0),
            pids: vec![10, 11, 20],
            process_memory: vec![(10, 4_000_000_000), (11, 1_000_000_000), (20, 1_000_000_000)],
            process_sm: Some(vec![(10, 60.0), (11, 15.0), (20, 25.0)]),
            ..Reading::default()
        }
    }

    #[test]
    fn each_job_gets_its_processes_memory_utilisation_and_power_share() {
        let r = shared_gpu();
        let (a, part) = own_part(&r, &HashSet::from([10, 11]), 2);
        assert_eq!((a.utilization, a.memory_used, part), (Some(75.0), Some(5_000_000_000), 0.75));
        assert_eq!(a.power_watts, Some(517.5));
        assert_eq!(
            (a.temperature, a.memory_total, a.memory_utilization),
            (Some(60.0), Some(150_000_000_000), None)
        );
        let (b, part) = own_part(&r, &HashSet::from([20]), 2);
        assert_eq!(
            (b.utilization, b.memory_used, b.power_watts, part),
            (Some(25.0), Some(1_000_000_000), Some(172.5), 0.25)
        );
    }

    #[test]
    fn a_job_without_a_process_on_it_shows_zero_not_its_neighbours_work() {
        let (idle, part) = own_part(&shared_gpu(), &HashSet::new(), 2);
        assert_eq!(
            (idle.utilization, idle.memory_used, idle.power_watts, part),
            (Some(0.0), Some(0), Some(0.0), 0.0)
        );
        assert!(idle.pids.is_empty());
    }

    #[test]
    fn where_nvml_has_no_process_figures_they_are_absent_and_power_is_split_evenly() {
        let r = Reading { process_sm: None, process_memory: Vec::new(), ..shared_gpu() };
        let (a, part) = own_part(&r, &HashSet::from([10]), 2);
        assert_eq!((a.utilization, a.memory_used, part), (None, None, 0.5), "absent, never the whole GPU's");
        assert_eq!(a.power_watts, Some(345.0));
    }
}
