//! Who holds each GPU this cycle: the jobs running a process on it or given it by Slurm, each
//! one's part of its price, and whether a process of no job runs on it beside them.

use super::job_owner::{ProcSays, proc_says};
use super::source::{GpuId, Reading};
use super::{GpuCollector, GpuJob};
use slurm_cw_formats::slurm::gres_conf::GpuOrder;
use std::collections::{BTreeMap, HashMap, HashSet};

/// One cycle's holders, by index into the cycle's readings (`g`) and its jobs (`j`).
#[derive(Default)]
pub(super) struct Attribution {
    /// Job -> the GPUs it holds and whether it runs a process on each.
    pub held: BTreeMap<usize, Vec<(usize, bool)>>,
    /// Per reading.
    pub gpus: Vec<Holders>,
    /// (GPU, job) -> the job's processes on it.
    pub pids_on: HashMap<(usize, usize), HashSet<u32>>,
    /// (GPU, job) -> the job's part of the GPU's price: split among the jobs Slurm gave it
    /// to, or among those running on it where Slurm gave it to none. A job's process on a
    /// GPU allocated to another job (devices not constrained) moves none of its price.
    pub billed_part: HashMap<(usize, usize), f64>,
}

/// A reading's holders.
pub(super) struct Holders {
    /// Jobs holding it.
    pub jobs: usize,
    /// Jobs running a process on it.
    pub busy: usize,
    /// A process of no job runs on it.
    pub stranger: bool,
    /// A final sample's job holds it (every reading for a cycle over the node).
    pub in_scope: bool,
}

impl Attribution {
    /// GPUs no job holds.
    pub fn no_job(&self) -> usize {
        self.gpus.iter().filter(|h| h.jobs == 0).count()
    }
}

impl Holders {
    /// The reading is split: several jobs hold it (gres/shard, gres/mps, or one job's process
    /// on another's GPU), or one holds it beside a process of no job.
    pub fn shared(&self) -> bool {
        self.jobs > 1 || self.stranger
    }

    /// Parties its power is split among: strangers count as one more.
    pub fn parties(&self) -> usize {
        self.busy + usize::from(self.stranger)
    }
}

impl GpuCollector {
    /// Attributes each reading of `ok` to the `jobs` holding it; `only` is a final sample's
    /// job. The jobs' allocations are those already known (`self.allocations`).
    pub(super) fn attribute(
        &self,
        ok: &[(GpuId, Reading)],
        jobs: &[GpuJob],
        only: Option<&str>,
    ) -> Attribution {
        let mut pid_job: HashMap<u32, usize> = HashMap::new();
        for (i, job) in jobs.iter().enumerate() {
            for p in &job.pids {
                pid_job.insert(*p, i);
            }
        }
        // How each job's node numbers its GPUs.
        let orders: Vec<GpuOrder> = jobs
            .iter()
            .map(|j| self.gres.gpu_order(j.r.node.as_deref().unwrap_or(&self.node_name)))
            .collect();
        let mut a = Attribution::default();
        for (g, (id, r)) in ok.iter().enumerate() {
            let mut holders: BTreeMap<usize, bool> = BTreeMap::new();
            let mut allocated: Vec<usize> = Vec::new();
            let mut stranger = false;
            for pid in &r.pids {
                // /proc's word first: a job's pid list can be older than this cycle (a cut
                // subtree's, read every `process_every`), and a pid in it may since have been
                // reused by another job's process. The lists where /proc does not show it.
                let job = match proc_says(&self.node, *pid, jobs) {
                    ProcSays::Job(j) => Some(j),
                    ProcSays::NoJob => None,
                    ProcSays::Unread => pid_job.get(pid).copied(),
                };
                match job {
                    Some(j) => {
                        holders.insert(j, true);
                        a.pids_on.entry((g, j)).or_default().insert(*pid);
                    }
                    // A process of no job that this host's /proc shows: one an ended job left
                    // behind, a health check, an admin's tool. Seen on an H200: a job alone on
                    // the GPU got such a process's memory and power as its own. A pid /proc
                    // does not show (gone since NVML listed it) is no evidence either way, and
                    // an MPS server works for the jobs' clients.
                    None => {
                        let mps_server = !r.mps_clients.is_empty() && !r.mps_clients.contains(pid);
                        stranger |= !mps_server && self.node.proc_root.join(pid.to_string()).exists();
                    }
                }
            }
            for (j, job) in jobs.iter().enumerate() {
                if self.allocations.get(&job.r.key()).is_some_and(|al| al.holds(id, r.minor, &orders[j])) {
                    holders.entry(j).or_insert(false);
                    allocated.push(j);
                }
            }
            let payers: Vec<usize> =
                if allocated.is_empty() { holders.keys().copied().collect() } else { allocated };
            for &j in &payers {
                a.billed_part.insert((g, j), 1.0 / payers.len() as f64);
            }
            a.gpus.push(Holders {
                jobs: holders.len(),
                busy: holders.values().filter(|b| **b).count(),
                stranger,
                in_scope: only.is_none_or(|id| holders.keys().any(|&j| jobs[j].r.id == id)),
            });
            for (j, busy) in holders {
                a.held.entry(j).or_default().push((g, busy));
            }
        }
        a
    }
}

impl GpuCollector {
    /// After a final sample, what it read that is other jobs': a GPU the ending job does not
    /// hold is measured again from the last cycle, its Xid errors reported then; one it holds
    /// beside others too (its errors are theirs as well, as in a cycle every holder has the
    /// device's), and each other job's part of the energy it accounted kept for that job's
    /// next reading. (A GPU the ending job held alone was its, to the end.)
    pub(super) fn give_back(
        &mut self,
        ok: &[(GpuId, Reading)],
        a: &Attribution,
        (jobs, ending): (&[GpuJob], &str),
        joules: &[Option<f64>],
    ) {
        let none = HashSet::new();
        for (j, gpus) in &a.held {
            for &(g, _) in gpus {
                let (id, r) = &ok[g];
                let holders = &a.gpus[g];
                let (Some(used), true, false) =
                    (joules[g], holders.in_scope && holders.shared(), jobs[*j].r.id == ending)
                else {
                    continue;
                };
                let (_, part) =
                    super::shared::own_part(r, a.pids_on.get(&(g, *j)).unwrap_or(&none), holders.parties());
                self.energy.carry(id.uuid.clone(), jobs[*j].r.key(), used * part);
            }
        }
        let Some(source) = self.source.as_mut() else { return };
        for (g, (id, _)) in ok.iter().enumerate() {
            let holders = &a.gpus[g];
            if !holders.in_scope || holders.shared() {
                source.rewind(id, true);
            }
        }
    }
}
