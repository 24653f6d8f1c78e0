//! The node collector: per-job memory, CPU, processes and I/O from Slurm's job cgroups (v1 and
//! v2) and /proc.
//!
//! Each cycle: [`discover`] lists the job cgroups (with [`dir`], one getdents64 a directory),
//! [`cgroup`] reads each job's files once (held open, one pread each: [`held`]), [`subtree`]
//! reads the cgroup.procs of its known directories (one pread each) and walks its subtree
//! within bounds only when one stat of its directory says a step began or ended or a process
//! left a known directory, [`procs`] reads its processes when that set changed, every
//! `process_every`th cycle of a job, and on its first and final sample, [`owner`] names its
//! user and account, `figures` turns the reading into levels and per-second rates against the
//! previous one (a job seen once has no rate yet), and this module puts them in the job's typed
//! reading ([`crate::sample::JobReading`]), whose series `transforms::job_series` makes for each
//! destination. Jobs and processes that vanish mid-read are skipped, never the cycle.

pub mod cgroup;
pub mod config;
pub mod dir;
pub mod discover;
mod figures;
mod from_procs;
pub mod held;
mod listing;
pub mod owner;
mod proc_cgroups;
pub mod procs;
mod rates;
mod read;
mod reading;
pub mod subtree;
pub mod table;

use rates::remember;
/// A job's executables are shipped by name up to this many times `node.top_executables`
/// different names over its life; later ones are summed as [`OTHER_EXECUTABLES`].
pub const NAMES_PER_TOP: usize = 4;
pub use rates::OTHER_EXECUTABLES;
/// How often a job id the job table does not know may make the collector list the job cgroups
/// again (a final sample asked for through the hook). A job that started since the last
/// listing is found by the client's next try.
pub const LOOKUP_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

pub use read::{read_bytes, read_end, read_into};

pub use slurm_cw_formats::cgroup as kv;

use super::slurm_jobs;
use super::{Collector, Errors};
use crate::sample::{Batch, Dims, Held, JobInfo, JobReading, SlurmNames};
use crate::sources::FinalSample;
use cgroup::CgroupStats;
use config::NodeConfig;
use discover::{JobRef, Layout};
use kv::Io;
use owner::Owners;
use proc_cgroups::ProcCgroups;
use procs::Proc;
use slurm_cw_catalog::dims::NODE_NAME;
use slurm_cw_catalog::metrics::*;
use slurm_cw_formats::log_once::LogOnce;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant, UNIX_EPOCH};
use table::SharedJobs;

/// A final sample of a job whose subtree is past the walk's bounds walks it again only this
/// long after the last walk.
const FINAL_WALK_EVERY: Duration = Duration::from_secs(30);

/// What the previous cycle saw of a job, for rates.
#[derive(Debug)]
struct Previous {
    at: Instant,
    /// Readings in a row its CPU time stood still ([`rates::still`]) up to this one.
    still_for: u32,
    /// Slurm had frozen it ([`cgroup::frozen`]).
    frozen: bool,
    cpu_ns: Option<u64>,
    percpu_ns: Option<Vec<u64>>,
    throttled_ns: Option<u64>,
    io: Option<Io>,
    /// When the processes were last read, and cycles since.
    procs_at: Instant,
    cycles_since_procs: u32,
    /// (pid, start) -> (CPU ticks, I/O counters), as last read.
    procs: HashMap<(u32, u64), (u64, Option<Io>)>,
    /// The processes' other threads, as last listed.
    threads: procs::KnownThreads,
}

/// What was read of a job's processes.
struct Processes {
    list: Vec<Proc>,
    /// Processes in the cgroup, Slurm's own step daemon left out.
    count: usize,
    /// Every pid in the cgroup subtree.
    pids: Vec<u32>,
}

/// Everything read of one job in one cycle.
struct Reading {
    cg: CgroupStats,
    /// None on the cycles that read cgroup files only.
    procs: Option<Processes>,
    at: Instant,
    /// Its CPU time stood still since the previous cycle ([`rates::still`]); None when first seen.
    still: Option<bool>,
}

pub struct NodeCollector {
    cfg: NodeConfig,
    node_name: String,
    /// Node names Slurm has put a job here on: this host's names as Slurm spells them.
    confirmed: HashSet<String>,
    layout: Option<Layout>,
    /// The jobs found this cycle, shared with the GPU collector.
    table: SharedJobs,
    /// Where the jobs' owners are published each full collection (the hook socket's shares).
    owners_out: Option<super::JobOwners>,
    previous: HashMap<(Option<String>, String), Previous>,
    /// Each job's executables shipped by name so far ([`rates::fold_names`]).
    named: HashMap<(Option<String>, String), Vec<String>>,
    owners: Owners,
    ticks_per_second: f64,
    /// Reused for every cgroup file read, and for every /proc file.
    buf: String,
    bytes: Vec<u8>,
    logged: LogOnce,
    /// Jobs whose cgroup directory was another at the last collection: Slurm is asked again.
    renewed: Vec<String>,
    /// When each job's last final sample was taken (at most one a second).
    final_at: HashMap<String, Instant>,
    /// Jobs whose cgroup subtree was past the walk's bounds since the last collection.
    walks_cut: u64,
    /// Jobs with more processes or threads than are read a cycle, since the last collection.
    procs_bounded: u64,
    /// Every process's cgroup, read this cycle for the jobs whose walk was cut.
    proc_cgroups: Option<ProcCgroups>,
    /// When a hook request for a job the table did not know last listed the jobs.
    looked_up_at: Option<Instant>,
    /// /proc is a real procfs: fd counts come from the fd directory's size.
    fd_by_size: bool,
    /// What Slurm says of each job (account, partition); None in tests and benches, where the
    /// environment is taken as it is.
    slurm: Option<slurm_jobs::Shared>,
}

/// The node role's collector in [`super::COLLECTORS`]: job cgroups and /proc, with accounts,
/// partitions and GPU allocations as Slurm says; its job table is the one the GPU collector reads.
/// The node collector of the `[node]` section ([`super::table`]).
pub fn build(cfg: &NodeConfig, shared: &super::Shared) -> Option<Box<dyn Collector>> {
    let mut collector = NodeCollector::new(cfg.clone(), shared.node.clone()).with_slurm(shared.slurm());
    collector.table = shared.jobs.clone();
    Some(Box::new(collector.publishing_owners(shared.job_owners.clone())))
}

impl NodeCollector {
    /// Publishes the uids that own its jobs in `owners` at each collection of every job.
    pub fn publishing_owners(mut self, owners: super::JobOwners) -> Self {
        self.owners_out = Some(owners);
        self
    }

    pub fn new(cfg: NodeConfig, node_name: String) -> Self {
        let fd_by_size = procs::is_procfs(&cfg.proc_root);
        NodeCollector {
            cfg,
            node_name,
            confirmed: HashSet::new(),
            layout: None,
            table: SharedJobs::default(),
            owners_out: None,
            previous: HashMap::new(),
            named: HashMap::new(),
            owners: Owners::default(),
            ticks_per_second: procfs::ticks_per_second() as f64,
            buf: String::with_capacity(8192),
            bytes: Vec::with_capacity(4096),
            logged: LogOnce::default(),
            renewed: Vec::new(),
            final_at: HashMap::new(),
            walks_cut: 0,
            procs_bounded: 0,
            proc_cgroups: None,
            looked_up_at: None,
            fd_by_size,
            slurm: None,
        }
    }

    /// Takes accounts and partitions from Slurm (see [`slurm_jobs`]) instead of believing the
    /// jobs' environment.
    pub fn with_slurm(mut self, slurm: slurm_jobs::Shared) -> Self {
        self.slurm = Some(slurm);
        self
    }

    /// The job table this collector fills each cycle (for the GPU collector).
    pub fn jobs(&self) -> SharedJobs {
        self.table.clone()
    }

    fn log_once(&mut self, key: &str, message: &str) {
        if self.logged.first(key) {
            tracing::info!(detail = key, "{message}");
        }
    }

    /// The layout, detected on first use (and again while the root shows none).
    fn layout(&mut self) -> Option<Layout> {
        if self.layout.is_none() {
            self.layout = Layout::from_config(&self.cfg);
            if let Some(l) = &self.layout {
                tracing::info!(root = %l.root.display(), version = ?l.version, "job cgroups");
            }
        }
        self.layout.clone()
    }

    /// Collects every job, or only the jobs with id `only` (the final sample of a job ending).
    /// Returns how many jobs were read.
    pub fn collect_jobs(&mut self, only: Option<&str>, out: &mut Batch, errors: &mut Errors) -> usize {
        match self.list_jobs(errors) {
            Some(jobs) => self.read_jobs(jobs, only, out),
            None => 0,
        }
    }

    /// Reads the listed jobs, or only job `only`; returns how many were read.
    fn read_jobs(&mut self, mut jobs: Vec<JobRef>, only: Option<&str>, out: &mut Batch) -> usize {
        if only.is_none() {
            self.note_missing_controllers(&jobs);
        }
        if let Some(id) = only {
            jobs.retain(|j| j.id == id);
        }
        let mut per_node: BTreeMap<String, u64> = BTreeMap::new();
        per_node.insert(self.node_name.clone(), 0);
        let mut seen = HashSet::new();
        for job in &jobs {
            let node = job.node.clone().unwrap_or_else(|| self.node_name.clone());
            *per_node.entry(node.clone()).or_default() += 1;
            let key = job.key();
            // Each job on its own count, so jobs that start apart spread the /proc reads. A final
            // sample reads the processes again, but for a job past the walk's bounds walked in
            // the last [`FINAL_WALK_EVERY`]: its walk, and the /proc/<pid>/cgroup of every
            // process on the node, is what its user could ask for once a second to keep the
            // collection thread from everyone else's jobs.
            let cut_lately = || {
                self.table.borrow_mut().get_mut(&key).is_some_and(|j| j.tree.is_cut())
                    && self.previous.get(&key).is_some_and(|p| p.procs_at.elapsed() < FINAL_WALK_EVERY)
            };
            let due = (only.is_some() && !cut_lately())
                || self.previous.get(&key).is_none_or(|p| p.cycles_since_procs + 1 >= self.cfg.process_every);
            let reading = self.read_job(job, &key, due);
            self.push_reading(job, &key, &node, &reading, out);
            let before = self.previous.remove(&key);
            self.previous.insert(key.clone(), remember(reading, before));
            seen.insert(key);
        }
        // Read for this pass alone: not held between cycles.
        self.proc_cgroups = None;
        if only.is_none() {
            out.all_jobs = true;
            self.previous.retain(|k, _| seen.contains(k));
            self.named.retain(|k, _| seen.contains(k));
            let ids: HashSet<&String> = seen.iter().map(|(_, id)| id).collect();
            self.owners.retain_jobs(|j| ids.contains(&j.to_owned()));
            if let Some(out) = &self.owners_out {
                let uids: HashSet<u32> = self.table.borrow().jobs().filter_map(|j| j.uid).collect();
                *out.lock().unwrap_or_else(|p| p.into_inner()) = uids;
            }
            for (node, n) in per_node {
                out.push(&JOBS_ON_NODE, Dims::new().with(NODE_NAME, node), n as f64);
            }
        }
        jobs.len()
    }

    /// One log line per v1 controller that Slurm's jobs do not appear in.
    fn note_missing_controllers(&mut self, jobs: &[JobRef]) {
        if jobs.is_empty() || !jobs.iter().all(|j| matches!(j.dirs, discover::JobDirs::V1(_))) {
            return;
        }
        for (controller, what) in [
            ("memory", "memory figures come from the jobs' processes in /proc (resident memory)"),
            ("cpuacct", "CPU figures come from the jobs' processes in /proc"),
            ("cpuset", "CpusAllocated and CpuCoreUtilization are off"),
        ] {
            if jobs.iter().all(|j| j.dir(controller).is_none()) {
                self.log_once(
                    controller,
                    &format!("Slurm job cgroups have no {controller} controller here (cgroup.conf); {what}"),
                );
            }
        }
    }

    /// The typed reading of one job on `node`: whom it belongs to and its figures.
    fn push_reading(&mut self, job: &JobRef, key: &table::Key, node: &str, r: &Reading, out: &mut Batch) {
        let proc_root = &self.cfg.proc_root;
        let uid = self.table.borrow_mut().uid(key, proc_root, &mut self.buf);
        // Slurm's word where no process names the user (root's alone, or none left).
        let uid = uid.or_else(|| self.slurm.as_ref().and_then(|s| s.borrow().get(&job.id)?.user_id));
        let prev = self.previous.get(key);
        let no_procs: &[Proc] = &[];
        let procs = r.procs.as_ref().map_or(no_procs, |p| &p.list);
        let user = self.owners.user(uid);
        let from_slurm = self.slurm.as_ref().and_then(|s| {
            let s = s.borrow();
            let d = s.get(&job.id)?;
            let or_unknown = |v: &Option<String>| v.clone().unwrap_or_else(|| owner::UNKNOWN.to_owned());
            Some((or_unknown(&d.account), or_unknown(&d.partition)))
        });
        // Slurm asked and not answered (yet, or unreadably): unknown, never the environment.
        let slurm_asked = self.slurm.as_ref().is_some_and(|s| s.borrow().available());
        let unknown = || (owner::UNKNOWN.to_owned(), owner::UNKNOWN.to_owned());
        let from_slurm = from_slurm.or_else(|| slurm_asked.then(unknown));
        // slurmstepd may sit in the job's cgroup too; any job process carries the account.
        let (account, partition) = from_slurm.unwrap_or_else(|| {
            let claimed = self.owners.account(&job.id, || {
                // A job's environments are its user's to inflate: 8 MiB of them per job at most.
                let mut budget = 8 << 20;
                procs.iter().find_map(|p| {
                    let mut v = procs::environ_vars_within(
                        proc_root,
                        p.key.0,
                        &["SLURM_JOB_ACCOUNT", "SLURM_JOB_PARTITION"],
                        &mut budget,
                    );
                    let partition = v.pop().flatten().unwrap_or_else(|| owner::UNKNOWN.to_owned());
                    Some((v.pop().flatten()?, partition))
                })
            });
            // The job's user wrote these: marked where Slurm should have said.
            if self.slurm.is_some() {
                (slurm_jobs::unverified(&claimed.0), slurm_jobs::unverified(&claimed.1))
            } else {
                claimed
            }
        });
        if let Some(j) = self.table.borrow_mut().get_mut(key) {
            j.account = Some(account.clone());
        }
        let info = JobInfo {
            id: job.id.clone(),
            names: self.names(job),
            node: node.to_owned(),
            user,
            account,
            partition,
        };
        let mut figures = figures::of(r, prev, self.ticks_per_second, self.cfg.top_executables);
        if !figures.by_exe.is_empty() {
            let named = self.named.entry(key.clone()).or_default();
            let cap = self.cfg.top_executables.saturating_mul(NAMES_PER_TOP);
            figures.by_exe = rates::fold_names(std::mem::take(&mut figures.by_exe), named, cap);
        }
        let held = self.held(&job.id, node);
        out.jobs.push(JobReading { info, job: figures, gpus: None, held });
    }
}

impl NodeCollector {
    /// The job's other names, as Slurm gave them (its SLUID from its directory, else Slurm's).
    fn names(&self, job: &JobRef) -> SlurmNames {
        let slurm = self.slurm.as_ref().map(|s| s.borrow());
        let d = slurm.as_ref().and_then(|s| s.get(&job.id));
        SlurmNames {
            sluid: job.sluid.clone().or_else(|| d.and_then(|d| d.sluid.clone())),
            array_task: d.and_then(slurm_cw_formats::slurm::job::JobDetail::array_task),
            het_component: d.and_then(slurm_cw_formats::slurm::job::JobDetail::het_component),
        }
    }

    /// What Slurm allocated job `id` on `node`, and when it started.
    fn held(&self, id: &str, node: &str) -> Held {
        let slurm = self.slurm.as_ref().map(|s| s.borrow());
        let Some(d) = slurm.as_ref().and_then(|s| s.get(id)) else { return Held::default() };
        let on = d.allocation_on(node);
        Held {
            started: d
                .start_unix
                .and_then(|t| u64::try_from(t).ok())
                .map(|t| UNIX_EPOCH + Duration::from_secs(t)),
            cpus: on.and_then(|a| a.cpus),
            memory_bytes: on.and_then(|a| a.memory_bytes),
        }
    }

    /// Whom job `id` runs as, from the job table. A job the table does not know yet (started
    /// since the last cycle) is looked for by listing the jobs again, at most once per
    /// [`LOOKUP_EVERY`] so that unknown ids cost little: `Err(Busy)` in between.
    fn owner(&mut self, id: &str) -> Result<Option<u32>, FinalSample> {
        if self.layout().is_none() {
            return Ok(None);
        }
        let known = self.table.borrow().find(id).is_some();
        if !known {
            if self.looked_up_at.is_some_and(|t| t.elapsed() < LOOKUP_EVERY) {
                return Err(FinalSample::Busy);
            }
            self.looked_up_at = Some(Instant::now());
            // Finds jobs started since the last cycle; a SLUID is named by Slurm once a job.
            self.list_jobs(&mut Errors::new());
        }
        // Slurm's word where no process names the user.
        let slurm_uid = self.slurm.as_ref().and_then(|s| s.borrow().get(id).and_then(|d| d.user_id));
        let mut table = self.table.borrow_mut();
        let Some(key) = table.find(id).map(|j| j.r.key()) else {
            // A job cgroup named by a SLUID Slurm has not answered for yet may be this job's:
            // `Busy`, and the client asks again while the answer comes (a short job's TaskEpilog
            // can run before the first collection saw it).
            let waiting = table.unresolved().any(|u| !self.slurm_ended(u));
            return if waiting { Err(FinalSample::Busy) } else { Ok(None) };
        };
        Ok(table.uid(&key, &self.cfg.proc_root, &mut self.buf).or(slurm_uid))
    }
}

#[async_trait::async_trait(?Send)]
impl Collector for NodeCollector {
    fn name(&self) -> &'static str {
        "node"
    }

    async fn collect(&mut self, out: &mut Batch, errors: &mut Errors) {
        if let Some(jobs) = self.list_jobs(errors) {
            self.read_jobs(jobs, None, out);
            errors
                .add("cgroup", std::mem::take(&mut self.walks_cut) + std::mem::take(&mut self.procs_bounded));
        }
        self.final_at.retain(|_, t| t.elapsed().as_secs() < 60);
    }

    fn final_sample(&mut self, job: &str, uid: u32, out: &mut Batch) -> Option<FinalSample> {
        // The owner first: "too soon" to anyone else would tell them, within a second, when
        // another user's job's tasks end.
        if uid != 0 {
            self.layout()?;
            let owner = match self.owner(job) {
                Ok(owner) => owner,
                Err(again) => return Some(again),
            };
            if owner != Some(uid) {
                return Some(FinalSample::Denied);
            }
        }
        if self.final_at.get(job).is_some_and(|t| t.elapsed().as_secs_f64() < 1.0) {
            return Some(FinalSample::TooSoon);
        }
        self.final_at.insert(job.to_owned(), Instant::now());
        let n = self.collect_jobs(Some(job), out, &mut Errors::new());
        tracing::debug!(job, jobs = n, "final sample");
        Some(FinalSample::Sampled(n))
    }
}
