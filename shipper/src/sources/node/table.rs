//! The job table: the jobs on this node as the node collector's discovery found them this
//! cycle, with what does not change while a job runs (owner, account, memory limit, cpuset)
//! kept from its first reading, and its processes as last read. The GPU collector and the
//! hook's owner check consult it instead of finding the jobs again.
//!
//! cgroup v1 puts every job in each controller's tree: one controller's tree is listed each
//! cycle (the first of [`PRIMARY_ORDER`] that held every job when all were last listed), and a
//! job's directories in the others are looked up by path in its first [`PROBE_CYCLES`] cycles,
//! when Slurm may still be making them, instead of listing seven trees every cycle. All seven
//! are listed every [`FULL_SCAN_CYCLES`] cycles.
//!
//! Each directory listed is watched first ([`crate::sys::watch`]): a cycle in which no job
//! directory came or went lists nothing (one read of the watch), however many jobs run. A full
//! listing a primary-only one left owed still comes on time, and every [`RELIST_CYCLES`]
//! cycles the jobs are listed anyway. Where inotify cannot be had, every cycle lists.

use super::cgroup::Fixed;
use super::discover::{self, JobDirs, JobRef, Layout, V1_CONTROLLERS, Version};
use crate::sys::watch::Watch;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

/// v1 controllers in the order their tree is preferred for listing jobs.
const PRIMARY_ORDER: &[&str] = &["cpuacct", "memory", "cpuset", "freezer", "pids", "blkio", "cpu"];

/// Cycles of a job in which its missing v1 controller directories are looked for.
const PROBE_CYCLES: u32 = 3;

/// v1: every tree is listed once in this many cycles, so a job outside the primary tree (a
/// job whose Slurm uses other controllers: another slurmd's on the host, or a stale job
/// directory left in the primary after cgroup.conf changed) is found within them.
const FULL_SCAN_CYCLES: u32 = 5;

/// Cycles after which the jobs are listed though the watch saw no change.
const RELIST_CYCLES: u32 = 60;

/// Whether job directories came or went since the last listing.
#[derive(Debug, Default)]
enum Watching {
    /// Not tried yet: the first listing starts it.
    #[default]
    NotYet,
    On(Watch),
    /// inotify could not be had, or a directory not watched: every cycle lists.
    Off,
}

/// (node in the path, job id).
pub type Key = (Option<String>, String);

/// One job as last seen.
#[derive(Debug)]
pub struct Job {
    pub r: JobRef,
    /// Whom it runs as, once known: the v1 path's uid, else its first task process's owner.
    pub uid: Option<u32>,
    /// Its account as the node collector named it (Slurm's, or its environment's).
    pub account: Option<String>,
    /// Every process in its cgroup subtree, as last read.
    pub pids: Vec<u32>,
    pub fixed: Fixed,
    /// Its process directory's subtree, as last listed.
    pub tree: super::subtree::Subtree,
    /// Its cgroup files held open (closed when it leaves the table).
    pub files: super::held::Files,
    /// Its process directory's (inode, change time in s and ns) when its files were opened:
    /// another directory under the same path (a requeued job), or entries added or removed,
    /// close them.
    pub dir_id: Option<(u64, i64, i64)>,
    /// Cycles it was seen in.
    cycles: u32,
}

impl Job {
    fn new(r: JobRef) -> Job {
        Job {
            uid: r.uid,
            r,
            account: None,
            pids: Vec::new(),
            fixed: Fixed::default(),
            tree: super::subtree::Subtree::default(),
            files: super::held::Files::default(),
            dir_id: None,
            cycles: 0,
        }
    }

    /// One more cycle seen: its missing v1 directories looked for while it is young.
    fn seen_again(&mut self, layout: &Layout) {
        if layout.version == Version::V1 && self.cycles < PROBE_CYCLES {
            probe_v1(layout, &mut self.r);
        }
        self.cycles = self.cycles.saturating_add(1);
    }
}

#[derive(Debug, Default)]
pub struct JobTable {
    jobs: BTreeMap<Key, Job>,
    /// Jobs found by a SLUID (Slurm 26.05) whose job id Slurm has not given yet: not read
    /// until it has, since records and the hook go by job id.
    unresolved: Vec<JobRef>,
    /// Jobs Slurm says have ended whose cgroups stay ([`JobTable::leave_out`]): not read, and
    /// kept here so that the next refresh does not take them for new.
    left_out: BTreeMap<Key, Job>,
    /// v1: the controller whose tree is listed each cycle.
    primary: Option<&'static str>,
    /// v1: cycles since every tree was listed.
    since_full: u32,
    watch: Watching,
    /// Cycles since the jobs were last listed.
    since_listed: u32,
    /// v1: the last listing was of the primary tree only, while the watch skips cycles.
    full_owed: bool,
    /// Listings made (benches and tests).
    listings: u64,
}

/// The table the node collector fills and the GPU collector reads.
pub type SharedJobs = Rc<RefCell<JobTable>>;

impl JobTable {
    /// Finds the jobs there are now: new ones are added, gone ones dropped, known ones keep
    /// what is known of them. `job_id` gives the job id of a SLUID, where Slurm said it.
    pub fn refresh(&mut self, layout: &Layout, job_id: &dyn Fn(&str) -> Option<String>) {
        if self.quiet(layout) {
            self.since_full += 1;
            self.since_listed += 1;
            self.jobs.append(&mut self.left_out);
            for job in self.jobs.values_mut() {
                job.seen_again(layout);
            }
            self.resolve(layout, job_id);
            return;
        }
        self.since_listed = 0;
        self.listings += 1;
        let mut watch = std::mem::take(&mut self.watch);
        if matches!(watch, Watching::NotYet) {
            watch = Watch::new().map_or_else(
                |e| {
                    tracing::info!(error = %e, "no inotify: the job cgroups are listed every cycle");
                    Watching::Off
                },
                Watching::On,
            );
        }
        let mut failed = None;
        let mut before = |dir: &Path| {
            if let Watching::On(w) = &watch
                && let Err(e) = w.dir(dir)
                && !matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory)
            {
                failed.get_or_insert(e);
            }
        };
        let found = match layout.version {
            Version::V2 => discover::listed(layout, &mut before),
            Version::V1 => self.list_v1(layout, &mut before),
        };
        if let Some(e) = failed {
            tracing::warn!(error = %e, "a job cgroup directory cannot be watched (fs.inotify.max_user_watches?): the job cgroups are listed every cycle");
            watch = Watching::Off;
        }
        self.watch = watch;
        self.unresolved.clear();
        self.place(layout, found, job_id, true);
    }

    /// Whether this cycle can skip listing: the watch saw no job directory come or go since
    /// the last listing, no full listing is owed, and [`RELIST_CYCLES`] have not passed.
    fn quiet(&mut self, layout: &Layout) -> bool {
        let Watching::On(w) = &mut self.watch else { return false };
        let changed = match w.changed() {
            Ok(changed) => changed,
            Err(e) => {
                tracing::warn!(error = %e, "the job cgroups' watch failed: they are listed every cycle");
                self.watch = Watching::Off;
                return false;
            }
        };
        if self.since_listed + 1 >= RELIST_CYCLES {
            // Every tree, whatever the primary.
            self.since_full = FULL_SCAN_CYCLES;
            return false;
        }
        let owed = layout.version == Version::V1 && self.full_owed && self.since_full + 1 >= FULL_SCAN_CYCLES;
        !changed && !owed
    }

    /// Places the jobs whose SLUID Slurm has named since the last [`JobTable::refresh`].
    pub fn resolve(&mut self, layout: &Layout, job_id: &dyn Fn(&str) -> Option<String>) {
        let waiting = std::mem::take(&mut self.unresolved);
        self.place(layout, waiting, job_id, false);
    }

    /// The SLUIDs of the jobs waiting for their job id.
    pub fn unresolved(&self) -> impl Iterator<Item = &str> {
        self.unresolved.iter().filter_map(|r| r.sluid.as_deref())
    }

    /// Puts `found` in the table (replacing it when `all`), keeping what is known of each.
    fn place(
        &mut self,
        layout: &Layout,
        found: Vec<JobRef>,
        job_id: &dyn Fn(&str) -> Option<String>,
        all: bool,
    ) {
        let mut jobs = if all { BTreeMap::new() } else { std::mem::take(&mut self.jobs) };
        for mut r in found {
            if let Some(sluid) = &r.sluid {
                match job_id(sluid) {
                    Some(id) => r.id = id,
                    None => {
                        self.unresolved.push(r);
                        continue;
                    }
                }
            }
            let key = r.key();
            let mut job = match self.jobs.remove(&key).or_else(|| self.left_out.remove(&key)) {
                Some(mut j) => {
                    if let (JobDirs::V1(known), JobDirs::V1(now)) = (&mut j.r.dirs, &r.dirs) {
                        known.extend(now.iter().map(|(c, p)| (*c, p.clone())));
                    } else {
                        j.r.dirs = r.dirs;
                    }
                    j
                }
                None => Job::new(r),
            };
            job.seen_again(layout);
            jobs.insert(key, job);
        }
        self.jobs = jobs;
        if all {
            self.left_out.clear();
        }
    }

    /// Leaves out of [`JobTable::jobs`] the jobs `ended` names, until the next refresh finds
    /// them again; returns them.
    pub fn leave_out(&mut self, ended: impl Fn(&JobRef) -> bool) -> Vec<JobRef> {
        let keys: Vec<Key> = self.jobs.iter().filter(|(_, j)| ended(&j.r)).map(|(k, _)| k.clone()).collect();
        let mut out = Vec::new();
        for key in keys {
            if let Some(job) = self.jobs.remove(&key) {
                out.push(job.r.clone());
                self.left_out.insert(key, job);
            }
        }
        out
    }

    /// v1: the jobs in the primary controller's tree; every tree, merged, when it has none,
    /// when there is no primary, and once every [`FULL_SCAN_CYCLES`] cycles. The primary is
    /// the first tree of [`PRIMARY_ORDER`] that held every job of the last full listing.
    fn list_v1(&mut self, layout: &Layout, before: &mut dyn FnMut(&Path)) -> Vec<JobRef> {
        self.since_full += 1;
        // The primary, when it was just listed and held none, is not listed again.
        let mut listed_empty = None;
        if let Some(p) = self.primary
            && self.since_full < FULL_SCAN_CYCLES
        {
            let jobs = discover::jobs_in(layout, &[p], before);
            if !jobs.is_empty() {
                self.full_owed = true;
                return jobs;
            }
            listed_empty = Some(p);
        }
        self.since_full = 0;
        self.full_owed = false;
        let trees: Vec<&'static str> =
            V1_CONTROLLERS.iter().copied().filter(|c| Some(*c) != listed_empty).collect();
        let jobs = discover::jobs_in(layout, &trees, before);
        let any = !jobs.is_empty();
        self.primary = PRIMARY_ORDER.iter().copied().find(|c| any && jobs.iter().all(|j| j.dir(c).is_some()));
        jobs
    }

    /// How many times the jobs were listed (a cycle the watch says nothing changed in lists
    /// none).
    pub fn listings(&self) -> u64 {
        self.listings
    }

    /// The jobs, sorted by (node, id).
    pub fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.jobs.values()
    }

    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    pub fn get_mut(&mut self, key: &Key) -> Option<&mut Job> {
        self.jobs.get_mut(key)
    }

    /// The job with id `id` (the first, by node, where several slurmd share the host).
    pub fn find(&self, id: &str) -> Option<&Job> {
        self.jobs.values().find(|j| j.r.id == id)
    }

    /// Whom job `key` runs as, looked up once (see [`super::subtree::task_owner`]).
    pub fn uid(&mut self, key: &Key, proc_root: &Path, buf: &mut String) -> Option<u32> {
        let job = self.jobs.get_mut(key)?;
        if job.uid.is_none() {
            job.uid = super::subtree::task_owner(job.r.process_dir()?, proc_root, buf);
        }
        job.uid
    }
}

/// v1: adds the job's directories in the controllers it is not known in yet, by path.
fn probe_v1(layout: &Layout, job: &mut JobRef) {
    let (Some(uid), JobDirs::V1(dirs)) = (job.uid, &mut job.dirs) else { return };
    let slurm_dir = match &job.node {
        Some(n) => format!("{}_{n}", layout.v1_prefix),
        None => layout.v1_prefix.clone(),
    };
    let name = job.sluid.clone().unwrap_or_else(|| format!("{}{}", layout.job_prefix, job.id));
    let rel = Path::new(&slurm_dir).join(format!("uid_{uid}")).join(name);
    for c in V1_CONTROLLERS {
        if dirs.contains_key(c) {
            continue;
        }
        let dir = layout.root.join(c).join(&rel);
        if dir.is_dir() {
            dirs.insert(c, dir);
        }
    }
}

#[cfg(test)]
mod tests;
