//! The GPU collector: per-job NVIDIA GPU figures through NVML (or any [`GpuSource`]).
//!
//! Each cycle reads every GPU and MIG instance once, then attributes them to jobs without
//! forking anything:
//! - a GPU whose running processes belong to a job's cgroup is that job's;
//! - so is a GPU the job was allocated (SLURM_JOB_GPUS of its processes, or GPU/MIG UUIDs in
//!   CUDA_VISIBLE_DEVICES), even with no process on it: that is the allocated-and-idle case
//!   (`GpuIdleCount`) admins most want to catch.
//!
//! GPUs no job holds are counted per node (`GpuNoJobCount`). A GPU that fails (fallen off the
//! bus) loses its own figures for the cycle and is counted in `GpuErrors`; the others go on.

mod allocation;
mod attribution;
pub mod config;
mod energy;
pub mod fake;
mod figures;
mod job_owner;
pub mod nvml;
mod shared;
pub mod source;
pub mod worker;

use super::node::discover::{JobRef, Layout};
use super::node::owner::Owners;

use super::node::table::{self, JobTable, SharedJobs};
use super::{Collector, Errors};
use crate::sample::{Batch, Dims, GpuFigures, JobInfo, JobReading, SlurmNames};
use crate::sources::FinalSample;
use crate::sources::node::config::NodeConfig;
use allocation::Allocation;
use config::GpuConfig;
use energy::Energy;
use figures::{job_figures, one_gpu};
use slurm_cw_catalog::dims::NODE_NAME;
use slurm_cw_catalog::metrics::*;
use slurm_cw_formats::log_once::LogOnce;
use slurm_cw_formats::slurm::gres_conf::{GpuOrder, GresConf};
use source::{GpuId, GpuSource, ReadError, Reading};
use std::collections::{BTreeSet, HashMap, HashSet};

/// A GPU (or MIG instance) a job holds: the job's part of its reading, whether a process of
/// the job runs on it, and the job's part of its energy since the last accounted reading.
struct HeldGpu<'a> {
    id: &'a GpuId,
    r: Reading,
    busy: bool,
    joules: Option<f64>,
    /// The job's part of its price (0 to 1).
    billed: f64,
}

/// A job as this cycle attributes GPUs to it.
struct GpuJob {
    r: JobRef,
    pids: Vec<u32>,
    uid: Option<u32>,
    /// As the node collector named it; None when this collector finds it itself.
    account: Option<String>,
}

pub struct GpuCollector {
    source: Option<Box<dyn GpuSource>>,
    /// Why there is no source, when gpu.enabled = on and NVML could not start.
    unavailable: Option<String>,
    cfg: GpuConfig,
    node: NodeConfig,
    node_name: String,
    owners: Owners,
    /// (node, job) -> the job's allocation on that node, once Slurm (or, where it cannot be
    /// asked, a process of that node's part of the job) named it: a job on two slurmd of one
    /// host has one on each.
    allocations: HashMap<table::Key, Allocation>,
    logged: LogOnce,
    /// What Slurm says of each job; None in tests, where the environment is believed.
    slurm: Option<crate::sources::slurm_jobs::Shared>,
    /// The node collector's job table; without it (tests), this collector finds the jobs in
    /// `own` each cycle.
    shared: Option<SharedJobs>,
    own: JobTable,
    energy: Energy,
    /// GPUs matched to SLURM_JOB_GPUS by enumeration index because NVML gave no minor number
    /// (one per GPU and cycle).
    pub minor_fallbacks: u64,
    /// What gres.conf says of the order Slurm numbers GPUs in.
    gres: GresConf,
}

/// Where a collection looks: the whole node (a cycle) or one ending job (its final sample).
#[derive(Clone, Copy)]
enum Scope<'a> {
    Node,
    Job(&'a str),
}

/// The node role's GPU collector in [`super::COLLECTORS`]: after the node collector, reading
/// the jobs it found, with GPU allocations as Slurm says.
/// The GPU collector of the `[gpu]` section, reading jobs where `[node]` says ([`super::table`]).
pub fn build(gpu: &GpuConfig, node: &NodeConfig, shared: &super::Shared) -> Option<Box<dyn Collector>> {
    let collector = gpu_collector(gpu, node, shared)?;
    Some(Box::new(collector.with_slurm(shared.slurm()).with_jobs(shared.jobs.clone())))
}

/// The GPU collector, when `gpu.enabled` allows and NVML loads; with `auto` and no driver, one
/// log line and no collector.
fn gpu_collector(cfg: &GpuConfig, node_cfg: &NodeConfig, shared: &super::Shared) -> Option<GpuCollector> {
    if cfg.enabled == crate::config::Toggle::Off {
        return None;
    }
    let (gpu, node_cfg, node) = (cfg.clone(), node_cfg.clone(), shared.node.as_str());
    match nvml::NvmlSource::init() {
        Ok(source) => {
            let (path, gres) = crate::slurm_conf::gres_conf_beside(shared.slurm_conf.as_deref());
            let order = gres.gpu_order(node);
            tracing::info!(gres_conf = ?path, ?order, "Slurm's GPU numbers read in this order");
            // NVML on its own thread: a call the driver never answers stops the GPU figures,
            // not the node's collection.
            match worker::Worker::spawn(Box::new(source), worker::DEADLINE) {
                Ok(w) => {
                    Some(GpuCollector::new(Box::new(w), gpu, node_cfg, node.to_owned()).with_gres_conf(gres))
                }
                Err(e) => Some(GpuCollector::unavailable(
                    format!("cannot start its thread: {e}"),
                    gpu,
                    node_cfg,
                    node.to_owned(),
                )),
            }
        }
        Err(e) if cfg.enabled == crate::config::Toggle::On => {
            Some(GpuCollector::unavailable(e, gpu, node_cfg, node.to_owned()))
        }
        Err(e) => {
            tracing::info!(reason = %e, "no NVIDIA driver here: GPU collector off");
            None
        }
    }
}

impl GpuCollector {
    pub fn new(source: Box<dyn GpuSource>, cfg: GpuConfig, node: NodeConfig, node_name: String) -> Self {
        tracing::info!(gpus = %source.describe(), "GPU collector on");
        GpuCollector::with_source(Some(source), None, cfg, node, node_name)
    }

    /// A collector that reports an error every cycle (gpu.enabled = on without a driver).
    pub fn unavailable(why: String, cfg: GpuConfig, node: NodeConfig, node_name: String) -> Self {
        tracing::error!(error = %why, "gpu.enabled = on but NVML is not usable");
        GpuCollector::with_source(None, Some(why), cfg, node, node_name)
    }

    fn with_source(
        source: Option<Box<dyn GpuSource>>,
        unavailable: Option<String>,
        cfg: GpuConfig,
        node: NodeConfig,
        node_name: String,
    ) -> Self {
        GpuCollector {
            source,
            unavailable,
            cfg,
            node,
            node_name,
            owners: Owners::default(),
            allocations: HashMap::new(),
            logged: LogOnce::default(),
            slurm: None,
            shared: None,
            own: JobTable::default(),
            energy: Energy::default(),
            minor_fallbacks: 0,
            gres: GresConf::default(),
        }
    }

    fn log_once(&mut self, key: String, msg: &str) {
        if self.logged.first(&key) {
            tracing::warn!(detail = key, "{msg}");
        }
    }

    /// One cycle; public so tests and benchmarks can drive it.
    pub fn collect_once(&mut self, out: &mut Batch, errors: &mut Errors) {
        self.collect_scope(Scope::Node, out, errors);
    }

    /// A cycle over the whole node, or the figures of one job only (its final sample: the
    /// node's own figures and the other jobs' are left to the next cycle).
    fn collect_scope(&mut self, scope: Scope, out: &mut Batch, errors: &mut Errors) {
        errors.ran("gpu");
        let Some(source) = self.source.as_mut() else {
            errors.add("gpu", 1);
            return;
        };
        let readings = source.read_all();
        let mut ok: Vec<(GpuId, Reading)> = Vec::new();
        let mut failed = 0;
        for (id, r) in readings {
            match r {
                Ok(r) => ok.push((id, r)),
                Err(e) => {
                    failed += 1;
                    let what = match &e {
                        ReadError::Lost => {
                            "GPU lost (fallen off the bus?); its figures are left out".to_owned()
                        }
                        ReadError::Failed(m) => format!("GPU query failed: {m}"),
                    };
                    self.log_once(format!("gpu {} {e:?}", id.label()), &what);
                }
            }
        }
        let host = Dims::new().with(NODE_NAME, self.node_name.as_str());
        if let Scope::Node = scope {
            out.push(&GPU_ERRORS, host.clone(), failed as f64);
        }

        // Jobs, their processes and allocations: every job's, a final sample's too (who else
        // holds its GPUs sets its part of them).
        let jobs = self.jobs();
        let only = match scope {
            Scope::Job(id) => Some(id),
            Scope::Node => None,
        };
        for job in &jobs {
            if !self.allocations.contains_key(&job.r.key())
                && let Some(a) = self.allocation(&job.r, &job.pids)
            {
                self.allocations.insert(job.r.key(), a);
            }
        }
        if let Scope::Node = scope {
            let alive: HashSet<table::Key> = jobs.iter().map(|j| j.r.key()).collect();
            self.allocations.retain(|k, _| alive.contains(k));
            self.energy.retain_jobs(|k| alive.contains(k));
        }
        // Autodetected, Slurm numbers GPUs as NVML does: no minor number is needed.
        let by_minor = self.gres.gpu_order(&self.node_name) != GpuOrder::Detected;
        for (id, r) in &ok {
            if by_minor && id.mig.is_none() && r.minor.is_none() {
                self.minor_fallbacks += 1;
                if self.logged.first(&format!("minor {}", id.label())) {
                    tracing::warn!(
                        gpu = id.label(),
                        "NVML gives no minor number: SLURM_JOB_GPUS matched to this GPU by its NVML index"
                    );
                }
            }
        }

        let a = self.attribute(&ok, &jobs, only);
        // A final sample accounts only its job's GPUs: the others' energy goes whole to the
        // next cycle.
        let joules = self.energy.since(&ok, |g| a.gpus[g].in_scope);
        if let Scope::Node = scope {
            out.push(&GPU_NO_JOB_COUNT, host, a.no_job() as f64);
        }
        let none = HashSet::new();
        for (j, gpus) in a.held.iter().filter(|(j, _)| only.is_none_or(|id| jobs[**j].r.id == id)) {
            // A GPU several jobs hold, or one job holds beside a process of no job: each job's
            // own part of it.
            let mut mine: Vec<HeldGpu> = Vec::with_capacity(gpus.len());
            for &(g, busy) in gpus {
                let (id, r) = &ok[g];
                let holders = &a.gpus[g];
                let (r, part) = if holders.shared() {
                    shared::own_part(r, a.pids_on.get(&(g, *j)).unwrap_or(&none), holders.parties())
                } else {
                    (r.clone(), 1.0)
                };
                let carried = self.energy.carried(&id.uuid, &jobs[*j].r.key());
                mine.push(HeldGpu {
                    id,
                    r,
                    busy,
                    joules: joules[g].map(|used| used * part + carried),
                    billed: a.billed_part.get(&(g, *j)).copied().unwrap_or(0.0),
                });
            }
            self.emit_job(&jobs[*j], &mine, out);
        }
        if let Some(ending) = only {
            self.give_back(&ok, &a, (&jobs, ending), &joules);
        }
    }

    /// This cycle's jobs: the node collector's table when shared (its processes as last read;
    /// a GPU process started since is found by its /proc/<pid>/cgroup), else found here.
    fn jobs(&mut self) -> Vec<GpuJob> {
        if let Some(t) = &self.shared {
            let t = t.borrow();
            return t
                .jobs()
                .map(|j| GpuJob {
                    r: j.r.clone(),
                    pids: j.pids.clone(),
                    uid: j.uid,
                    account: j.account.clone(),
                })
                .collect();
        }
        let Some(layout) = Layout::from_config(&self.node) else { return Vec::new() };
        self.own.refresh(&layout, &crate::sources::slurm_jobs::resolver(self.slurm.as_ref()));
        let keys: Vec<_> = self.own.jobs().map(|j| j.r.key()).collect();
        let mut buf = String::new();
        let mut out = Vec::new();
        for key in keys {
            let uid = self.own.uid(&key, &self.node.proc_root, &mut buf);
            let Some(j) = self.own.get_mut(&key) else { continue };
            let mut pids = Vec::new();
            if let Some(dir) = j.r.process_dir() {
                crate::sources::node::subtree::pids(dir, &mut buf, &mut pids);
            }
            out.push(GpuJob { r: j.r.clone(), pids, uid, account: None });
        }
        out
    }

    /// Reads Slurm's GPU numbers in the order gres.conf gives (see `allocation::names`).
    pub fn with_gres_conf(mut self, gres: GresConf) -> Self {
        self.gres = gres;
        self
    }

    /// Reads the jobs from the node collector's table instead of finding them again.
    pub fn with_jobs(mut self, jobs: SharedJobs) -> Self {
        self.shared = Some(jobs);
        self
    }

    /// Takes GPU allocations from Slurm (see [`crate::sources::slurm_jobs`]) instead of the
    /// jobs' environment, which their users write.
    pub fn with_slurm(mut self, slurm: crate::sources::slurm_jobs::Shared) -> Self {
        self.slurm = Some(slurm);
        self
    }

    /// The GPUs Slurm gave the job on this node; the job's environment only where Slurm cannot
    /// be asked (or in tests). None while Slurm has not answered yet.
    fn allocation(&self, job: &JobRef, pids: &[u32]) -> Option<Allocation> {
        let Some(slurm) = &self.slurm else {
            return allocation::from_environment(&self.node.proc_root, pids);
        };
        let slurm = slurm.borrow();
        if !slurm.available() {
            return allocation::from_environment(&self.node.proc_root, pids);
        }
        let node = job.node.as_deref().unwrap_or(&self.node_name);
        let d = slurm.get(&job.id)?;
        Some(Allocation { indices: d.gpus_on(node).cloned().unwrap_or_default(), uuids: BTreeSet::new() })
    }

    /// The job's GPU figures, in the reading the node collector made of the same job on the
    /// same node (whose owner and account they go under).
    fn emit_job(&mut self, gj: &GpuJob, gpus: &[HeldGpu], out: &mut Batch) {
        let job = &gj.r;
        let node = job.node.clone().unwrap_or_else(|| self.node_name.clone());
        let rs: Vec<&Reading> = gpus.iter().map(|h| &h.r).collect();
        let without_process = gpus.iter().filter(|h| !h.busy).count() as f64;
        let mut figures = GpuFigures::new(gpus.len() as f64, without_process, job_figures(&rs));
        figures.joules = gpus.iter().filter_map(|h| h.joules).reduce(|a, b| a + b);
        figures.billed = gpus.iter().map(|h| h.billed).sum();
        figures.parts = gpus.iter().map(|h| (h.r.utilization, h.billed, h.busy)).collect();
        // Each GPU's own figures: for the records of a job on several GPUs, and per-GPU series;
        // a job on one GPU has them as the job's already.
        if gpus.len() > 1 || self.cfg.per_gpu_dimensions {
            figures.each =
                gpus.iter().map(|h| one_gpu(h.id, &h.r, h.joules, self.cfg.uuid_dimension)).collect();
        }
        figures.each_series = self.cfg.per_gpu_dimensions;
        if out.reading_mut(&node, &job.id).is_none() {
            // No node collector's reading: this collector finds the jobs itself (tests).
            let (user, account) = self.owner(gj);
            let names = SlurmNames { sluid: job.sluid.clone(), ..SlurmNames::default() };
            let partition = super::node::owner::UNKNOWN.to_owned();
            let info = JobInfo { id: job.id.clone(), names, node: node.clone(), user, account, partition };
            out.jobs.push(JobReading::new(info));
        }
        if let Some(reading) = out.reading_mut(&node, &job.id) {
            reading.gpus = Some(figures);
        }
    }
}

#[async_trait::async_trait(?Send)]
impl Collector for GpuCollector {
    fn name(&self) -> &'static str {
        "gpu"
    }

    async fn collect(&mut self, out: &mut Batch, errors: &mut Errors) {
        if let Some(why) = &self.unavailable
            && self.logged.first(why)
        {
            tracing::error!(error = %why, "GPU collector cannot run");
        }
        self.collect_once(out, errors);
    }

    /// The ending job's GPU figures now (its TaskEpilog), so a job shorter than a cycle has
    /// some. The node collector runs first and answers for the request (owner, rate); this
    /// checks the owner again where it finds the job itself.
    fn final_sample(&mut self, job: &str, uid: u32, out: &mut Batch) -> Option<FinalSample> {
        self.source.as_ref()?;
        if uid != 0 {
            let owner = self.jobs().into_iter().find(|j| j.r.id == job).and_then(|j| j.uid);
            if owner != Some(uid) {
                return Some(FinalSample::Denied);
            }
        }
        self.collect_scope(Scope::Job(job), out, &mut Errors::new());
        let gpus: f64 = out.jobs.iter().filter(|r| r.info.id == job).filter_map(|r| r.gpu_count()).sum();
        tracing::debug!(job, gpus, "final GPU sample");
        // The count is of job cgroups read, the node collector's.
        Some(FinalSample::Sampled(0))
    }
}
