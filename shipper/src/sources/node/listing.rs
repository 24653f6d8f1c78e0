//! Which job cgroups are read this cycle: the job table's listing, Slurm asked about the new
//! jobs and the doubtful ones, and the cgroups Slurm says no longer hold a running job (left
//! out of figures and costs, and logged once each).

use super::table;
use super::{NodeCollector, slurm_jobs};
use crate::sources::Errors;
use crate::sources::node::discover::JobRef;
use crate::sources::slurm_jobs::SlurmJobs;
use slurm_cw_formats::slurm::job::hostlist_contains;
use std::collections::HashSet;
use std::time::UNIX_EPOCH;

impl NodeCollector {
    /// The job cgroups there are now; None (one counted error) without a cgroup hierarchy.
    pub(super) fn list_jobs(&mut self, errors: &mut Errors) -> Option<Vec<JobRef>> {
        errors.ran("cgroup");
        let Some(layout) = self.layout() else {
            errors.add("cgroup", 1);
            let root = self.cfg.cgroup_root.display().to_string();
            self.log_once(&root, "no cgroup v1 or v2 hierarchy at the cgroup root; job metrics are off");
            return None;
        };
        let slurm = self.slurm.clone();
        let job_id = slurm_jobs::resolver(slurm.as_ref());
        let shared = self.table.clone();
        let mut table = shared.borrow_mut();
        table.refresh(&layout, &job_id);
        // Slurm is asked about new jobs (and SLUIDs) before they are read, a bounded wait.
        if let Some(slurm) = &slurm {
            let mut keys: Vec<String> = table.jobs().map(|j| j.r.id.clone()).collect();
            keys.extend(table.unresolved().map(str::to_owned));
            let doubtful = self.doubtful(&table, slurm);
            SlurmJobs::refresh(slurm, &keys, &doubtful);
            SlurmJobs::renew(slurm, &std::mem::take(&mut self.renewed));
            table.resolve(&layout, &job_id);
            let s = slurm.borrow();
            for sluid in table.unresolved().filter(|u| s.ended(u).is_some()) {
                if self.logged.first(&format!("sluid ended {sluid}")) {
                    tracing::warn!(
                        sluid,
                        "Slurm has not named the job of this SLUID cgroup and does not list it (it ended before it was asked about) but the cgroup is still here: it is left out, and no longer counted in CollectorErrors"
                    );
                }
            }
            self.confirm_names(&table, &s);
            let why = |r: &JobRef| {
                let elsewhere =
                    || elsewhere(&s, r, &self.node_name, &self.confirmed).map(|l| format!("runs on {l}"));
                s.ended(&r.id).map(str::to_owned).or_else(elsewhere)
            };
            let left = table.leave_out(|r| why(r).is_some());
            for job in left {
                // Keyed by the reason too: a job left out as requeued elsewhere that later ends
                // says so again.
                let slurm = why(&job).unwrap_or_default();
                if self.logged.first(&format!("left out {} {slurm}", job.id)) {
                    tracing::warn!(
                        job = job.id,
                        slurm,
                        dir = ?job.process_dir(),
                        "Slurm does not run this job here any more (it ended, was requeued, runs on other nodes, or is not listed) but its cgroup is still here (processes Slurm could not kill, or a slurmd that did not clean up): it is left out of job figures and costs"
                    );
                }
            }
        }
        let waiting = table.unresolved().filter(|u| !self.slurm_ended(u)).count();
        let jobs = table.jobs().map(|j| j.r.clone()).collect();
        drop(table);
        if waiting > 0 {
            errors.add("cgroup", waiting as u64);
            self.log_once(
                "sluid",
                "job cgroups are named by SLUID (Slurm 26.05) and Slurm has not given their job ids yet: those jobs wait, counted in CollectorErrors (Collector=cgroup); cgroup.conf CgroupJobIdPaths=yes names them by job id",
            );
        }
        Some(jobs)
    }

    /// Learns this host's node names from Slurm's node lists of the jobs here. A job Slurm
    /// says runs on other nodes (requeued and started again elsewhere while its cgroup stayed
    /// here) is left out only under a confirmed name: a `node_name` that is not Slurm's would
    /// otherwise leave out every job. That mismatch is logged once instead.
    fn confirm_names(&mut self, table: &table::JobTable, s: &SlurmJobs) {
        for j in table.jobs() {
            let node = node_of(&j.r, &self.node_name);
            let Some(list) = node_list(s, &j.r).filter(|_| !self.confirmed.contains(node)) else { continue };
            if hostlist_contains(list, node) {
                self.confirmed.insert(node.to_owned());
            } else if self.logged.first(&format!("node name {node}")) {
                tracing::warn!(
                    node,
                    job = j.r.id,
                    slurm_nodes = list,
                    "Slurm does not list this node among the nodes of a job whose cgroup is here: either node_name is not Slurm's name for this node (NodeName in slurm.conf; set node_name), or the job left its cgroup here and runs elsewhere. Until a job here is listed on this node's name, no job is left out for running elsewhere"
                );
            }
        }
    }

    /// Whether Slurm says job (or SLUID) `key` no longer runs here.
    pub(super) fn slurm_ended(&self, key: &str) -> bool {
        self.slurm.as_ref().is_some_and(|s| s.borrow().ended(key).is_some())
    }

    /// The jobs Slurm should be asked about again: none of their processes left at their last
    /// reading, past the end Slurm gave them by more than [`slurm_jobs::RECHECK_EVERY`], or
    /// run on other nodes by Slurm's last word (so that one requeued back here is read again
    /// within minutes, not the hour every job waits).
    fn doubtful<'t>(&self, table: &'t table::JobTable, slurm: &slurm_jobs::Shared) -> Vec<&'t str> {
        let s = slurm.borrow();
        let now = std::time::SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let grace = slurm_jobs::RECHECK_EVERY.as_secs();
        let overdue = |id: &str| {
            s.get(id)
                .and_then(|d| d.end_unix)
                .and_then(|t| u64::try_from(t).ok())
                .is_some_and(|t| t + grace < now)
        };
        table
            .jobs()
            .filter(|j| {
                self.previous.get(&j.r.key()).is_some_and(|p| p.procs.is_empty())
                    || overdue(&j.r.id)
                    || elsewhere(&s, &j.r, &self.node_name, &self.confirmed).is_some()
            })
            .map(|j| j.r.id.as_str())
            .collect()
    }
}

/// The Slurm node name a job directory is on: from its path (several slurmd on one host), else
/// this node's.
fn node_of<'a>(r: &'a JobRef, node_name: &'a str) -> &'a str {
    r.node.as_deref().unwrap_or(node_name)
}

/// Slurm's node list for job `r`, where it gave one.
fn node_list<'s>(s: &'s SlurmJobs, r: &JobRef) -> Option<&'s str> {
    s.get(&r.id).and_then(|d| d.node_list.as_deref()).filter(|list| !list.is_empty())
}

/// Slurm's node list for job `r` when it runs on other nodes only, under a node name Slurm has
/// confirmed (`confirmed`).
fn elsewhere<'s>(
    s: &'s SlurmJobs,
    r: &JobRef,
    node_name: &str,
    confirmed: &HashSet<String>,
) -> Option<&'s str> {
    let node = node_of(r, node_name);
    node_list(s, r).filter(|list| confirmed.contains(node) && !hostlist_contains(list, node))
}
