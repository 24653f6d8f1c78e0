//! One job's reading in a cycle: its cgroup files, and its processes when they are due or
//! their set changed.

use super::discover::{JobDirs, JobRef};
use super::proc_cgroups::ProcCgroups;
use super::{NodeCollector, Processes, Reading, cgroup, from_procs, held, procs, rates, subtree, table};
use procs::Proc;
use std::time::Instant;

impl NodeCollector {
    /// Reads one job: its cgroup files, and its processes when `due` or when its process set
    /// changed since they were last read.
    pub(super) fn read_job(&mut self, job: &JobRef, key: &table::Key, due: bool) -> Reading {
        use std::os::unix::fs::MetadataExt;
        let mut table = self.table.borrow_mut();
        let dir = job.process_dir();
        // One stat a cycle: the link count tells a step begun or ended; the inode a requeued
        // job's new directory under the same path, and the change time an entry added or
        // removed (a controller's files, or on filesystems other than cgroupfs, where a held
        // file does not fail when removed, any file replaced): its files are opened again.
        let top = dir
            .and_then(|d| std::fs::metadata(d).ok())
            .map(|m| ((m.ino(), m.ctime(), m.ctime_nsec()), m.nlink()));
        let mut entry = table.get_mut(key);
        if let Some(j) = entry.as_deref_mut()
            && j.dir_id != top.map(|t| t.0)
        {
            // Another directory, not the same one changed: the job was requeued and started
            // again here between two collections. Slurm is asked for its new start at the next.
            if let (Some((old, ..)), Some(((new, ..), _))) = (j.dir_id, top)
                && old != new
                && self.slurm.is_some()
            {
                self.renewed.push(job.id.clone());
            }
            j.files.clear();
            j.tree = subtree::Subtree::default();
            j.dir_id = top.map(|t| t.0);
        }
        if let Some(j) = entry.as_deref_mut() {
            j.tree.hold_procs(matches!(job.dirs, JobDirs::V2(_)));
        }
        let mut fixed = entry.as_deref_mut().map(|j| std::mem::take(&mut j.fixed)).unwrap_or_default();
        let mut spare = held::Files::default();
        let files = entry.as_deref_mut().map_or(&mut spare, |j| &mut j.files);
        let mut cg = cgroup::read(job, &mut self.buf, &mut fixed, files);
        // A suspended job's CPU time stands still, so a running one costs no further read: a
        // job is looked at when first seen, the first few collections after its CPU time stops
        // and while it is frozen, whatever slurmstepd's own CPU beside a frozen v2 step does;
        // one idle all along (a `sleep`) not again.
        let prev = self.previous.get(key);
        let still = prev.map(|p| rates::still(p, cg.cpu_ns, Instant::now()));
        let look =
            prev.is_none_or(|p| p.frozen || (still == Some(true) && p.still_for < rates::LOOKS_AFTER_STOP));
        if look {
            cg.frozen = cgroup::frozen(job, &mut self.buf);
        }
        // The process set from the known directories' cgroup.procs (held open), unless only a
        // walk can tell; a subtree past the walk's bounds is walked every process_every cycles.
        let mut pids = Vec::new();
        let was_cut = entry.as_deref().is_some_and(|j| j.tree.is_cut());
        let same = match (entry.as_deref_mut(), top) {
            (Some(j), Some((_, links))) if !was_cut => {
                j.tree.known_pids(links, &mut self.buf, &mut pids) && pids == j.pids
            }
            _ => false,
        };
        let (mut cut, mut bounded) = (false, false);
        let procs = (due || !(same || was_cut) || from_procs::needed(&cg)).then(|| {
            if let Some(dir) = dir.filter(|_| !same) {
                pids.clear();
                let mut spare = subtree::Subtree::default();
                let tree = entry.as_deref_mut().map_or(&mut spare, |j| &mut j.tree);
                cut = subtree::pids_within(dir, tree, &mut self.buf, &mut pids);
                // Past the walk's bounds: the processes whose /proc/<pid>/cgroup is inside.
                if cut && let Some(rel) = self.layout.as_ref().and_then(|l| l.relative(dir)) {
                    let levels = rel.components().count() + 1;
                    let all = self
                        .proc_cgroups
                        .get_or_insert_with(|| ProcCgroups::read(&self.cfg.proc_root, levels));
                    all.pids_in(&rel, &mut pids);
                }
            }
            let want = procs::Want { io: cg.io.is_none(), fd_by_size: self.fd_by_size };
            let none = procs::KnownThreads::new();
            let known = self.previous.get(key).map_or(&none, |p| &p.threads);
            let mut threads_left = procs::JOB_THREADS_MAX;
            let mut list: Vec<Proc> = pids
                .iter()
                .take(procs::JOB_PROCS_MAX)
                .filter_map(|&pid| {
                    procs::read(&self.cfg.proc_root, pid, want, known, &mut self.bytes, &mut threads_left)
                })
                .collect();
            bounded = pids.len() > procs::JOB_PROCS_MAX || threads_left == 0;
            // Slurm's own step daemon is not the job's work (it shares some job cgroups).
            let before = list.len();
            let buf = &mut self.buf;
            list.retain(|p| !procs::is_slurmstepd(&self.cfg.proc_root, p.key.0, &p.comm, buf));
            Processes { count: pids.len() - (before - list.len()), list, pids }
        });
        if let Some(j) = entry {
            j.fixed = fixed;
            if let Some(p) = &procs {
                j.pids.clone_from(&p.pids);
            }
        }
        drop(table);
        if cut {
            self.walks_cut += 1;
            self.log_once(
                "walk-cut",
                &format!(
                    "a job's cgroup subtree has more than {} directories or {} levels (its user made them): its processes are found through /proc/<pid>/cgroup instead, counted in CollectorErrors (Collector=cgroup)",
                    subtree::MAX_DIRS,
                    subtree::MAX_DEPTH
                ),
            );
        }
        if bounded {
            self.procs_bounded += 1;
            self.log_once(
                "procs-bounded",
                &format!(
                    "a job has more than {} processes or {} threads (its user started them): only that many are read a cycle, their figures partial, counted in CollectorErrors (Collector=cgroup)",
                    procs::JOB_PROCS_MAX,
                    procs::JOB_THREADS_MAX
                ),
            );
        }
        Reading { cg, procs, at: Instant::now(), still }
    }
}
