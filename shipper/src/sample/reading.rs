//! One job's reading in one collection, typed: what the node collector read of its cgroup and
//! processes, and what the GPU collector adds of the GPUs it holds on the same node. The job
//! records, the findings and the population figures read it; "unlimited memory limit", "idle
//! GPU" and "peak memory" are decided here, once.

use super::JobInfo;
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::metrics::*;
use std::time::SystemTime;

/// A limit this large means no limit (cgroup v1's "max" is 2^63 rounded to pages).
const UNLIMITED: f64 = (1u64 << 60) as f64;

/// A memory limit as read, None when there is none (zero, or cgroup's "max").
pub fn limited(bytes: f64) -> Option<f64> {
    (bytes > 0.0 && bytes < UNLIMITED).then_some(bytes)
}

/// One job on one node, as one collection read it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobReading {
    pub info: JobInfo,
    pub job: JobFigures,
    /// Its GPUs on this node, when the GPU collector found any.
    pub gpus: Option<GpuFigures>,
    /// What Slurm gave it on this node, and when it started: what its cost is measured by.
    pub held: Held,
}

/// What Slurm allocated a job on one node, and when the job started, as Slurm says (never its
/// user). Where Slurm gives no CPU or memory figure, the cgroup's (cpuset, memory limit) stand
/// in; the GPU count is the GPU collector's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Held {
    pub started: Option<SystemTime>,
    pub cpus: Option<f64>,
    pub memory_bytes: Option<f64>,
}

impl Held {
    /// Whether Slurm said what the job holds here (CPUs or memory): its word, not the cgroup's.
    pub fn from_slurm(&self) -> bool {
        self.cpus.is_some() || self.memory_bytes.is_some()
    }
}

/// What the node collector read of a job's cgroup and processes, each figure stored once: the
/// figures the records, findings and population decide on as fields, every other figure in
/// `others`; [`JobFigures::figures`] lists them all as the catalog names them (the per-job
/// series and the `job_sample` record).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobFigures {
    /// Cores busy (a rate: none at a job's first reading).
    pub cpu_usage: Option<f64>,
    /// `cpu_usage` as a percentage of the allocated cores.
    pub cpu_utilization: Option<f64>,
    pub cpus_allocated: Option<f64>,
    /// CPU seconds used so far (a counter).
    pub cpu_time: Option<f64>,
    pub memory_usage: Option<f64>,
    /// The cgroup's own high-water mark, where the kernel keeps one.
    pub memory_max: Option<f64>,
    /// As read: see [`JobReading::memory_limit`].
    pub memory_limit: Option<f64>,
    pub memory_rss: Option<f64>,
    pub oom_kills: Option<f64>,
    /// Bytes a second.
    pub read_bytes: Option<f64>,
    pub write_bytes: Option<f64>,
    /// The figures without a field, in the order they were set.
    pub others: Vec<(&'static Metric, f64)>,
    /// Busy percentage of each of its CPUs (cgroup v1).
    pub per_core: Option<Vec<f64>>,
    /// Threads per state (running and sleeping always, the others when present); none on
    /// cycles that read no processes.
    pub threads: Vec<(&'static str, f64)>,
    /// Cores used by each of its busiest executables.
    pub by_exe: Vec<(String, f64)>,
    /// Slurm suspended it: its steps frozen and its CPU time still since the last reading.
    pub suspended: bool,
}

/// The figures with a field of their own, in the order [`JobFigures::figures`] lists them.
const TYPED: [&Metric; 11] = [
    &CPU_USAGE,
    &CPU_UTILIZATION,
    &CPUS_ALLOCATED,
    &CPU_TIME,
    &MEMORY_USAGE,
    &MEMORY_MAX,
    &MEMORY_LIMIT,
    &MEMORY_RSS,
    &OOM_KILLS,
    &READ_BYTES,
    &WRITE_BYTES,
];

impl JobFigures {
    /// The typed figures, in [`TYPED`]'s order.
    fn fields(&self) -> [Option<f64>; 11] {
        [
            self.cpu_usage,
            self.cpu_utilization,
            self.cpus_allocated,
            self.cpu_time,
            self.memory_usage,
            self.memory_max,
            self.memory_limit,
            self.memory_rss,
            self.oom_kills,
            self.read_bytes,
            self.write_bytes,
        ]
    }

    fn field(&mut self, m: &Metric) -> Option<&mut Option<f64>> {
        let i = TYPED.iter().position(|t| is(t, m))?;
        let fields = [
            &mut self.cpu_usage,
            &mut self.cpu_utilization,
            &mut self.cpus_allocated,
            &mut self.cpu_time,
            &mut self.memory_usage,
            &mut self.memory_max,
            &mut self.memory_limit,
            &mut self.memory_rss,
            &mut self.oom_kills,
            &mut self.read_bytes,
            &mut self.write_bytes,
        ];
        fields.into_iter().nth(i)
    }

    /// Sets figure `m` (its field, or its place in `others`): a figure given twice (from the
    /// cgroup, then from the processes) is the later one.
    pub fn set(&mut self, m: &'static Metric, v: f64) {
        match self.field(m) {
            Some(field) => *field = Some(v),
            None => match self.others.iter_mut().find(|(o, _)| is(o, m)) {
                Some(o) => o.1 = v,
                None => self.others.push((m, v)),
            },
        }
    }

    /// Every figure as the catalog names it: the typed ones read, then the others.
    pub fn figures(&self) -> impl Iterator<Item = (&'static Metric, f64)> + '_ {
        TYPED
            .into_iter()
            .zip(self.fields())
            .filter_map(|(m, v)| Some((m, v?)))
            .chain(self.others.iter().copied())
    }

    pub fn is_empty(&self) -> bool {
        self.fields().iter().all(Option::is_none) && self.others.is_empty()
    }

    /// Figures from a list (a figure given twice: the last), for tests and benches that state a
    /// reading as a list; the node collector sets them as it computes them
    /// (`sources::node::figures`).
    pub fn from_figures(figures: Vec<(&'static Metric, f64)>) -> Self {
        let mut f = JobFigures::default();
        for (m, v) in figures {
            f.set(m, v);
        }
        f
    }
}

fn is(a: &Metric, b: &Metric) -> bool {
    std::ptr::eq(a, b)
}

/// What the GPU collector read of the GPUs a job holds on one node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuFigures {
    pub count: f64,
    /// The GPUs' worth it is billed for: each GPU Slurm gave it divided evenly among the jobs
    /// Slurm gave that GPU to (gres/shard and gres/mps give one GPU to several jobs; each paying
    /// for the whole would bill it several times over); a GPU Slurm gave no job, among the jobs
    /// running on it; a GPU Slurm gave another job, nothing.
    pub billed: f64,
    /// GPUs it holds that run none of its processes.
    pub without_process: f64,
    /// Each GPU's (utilisation as the job's part of it, worth billed, whether it runs the
    /// job's processes): idle GPUs are counted one by one. Empty: only the totals above, as
    /// whole GPUs.
    pub parts: Vec<(Option<f64>, f64, bool)>,
    /// Energy its GPUs used since the collector's previous reading, from NVML's counters.
    pub joules: Option<f64>,
    /// The other per-job GPU figures (utilisation included), as the catalog names them.
    pub figures: Vec<(&'static Metric, f64)>,
    /// Each GPU's own figures and energy: the job's records carry them where it holds more than
    /// one GPU here.
    pub each: Vec<OneGpu>,
    /// Whether each GPU's figures are series of their own too (`gpu.per_gpu_dimensions`).
    pub each_series: bool,
}

/// One GPU (or MIG instance) of a job: its figures as the job's part of it.
#[derive(Debug, Clone, PartialEq)]
pub struct OneGpu {
    pub label: GpuLabel,
    pub figures: Vec<(&'static Metric, f64)>,
    /// The job's part of its energy since the collector's previous reading.
    pub joules: Option<f64>,
}

/// How a GPU of a job is named in its per-GPU series (`gpu.uuid_dimension`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuLabel {
    /// NVML's index (`3/1` for a MIG instance): the `Gpu` dimension.
    Index(String),
    /// Its UUID: the `GpuUuid` dimension.
    Uuid(String),
}

impl GpuLabel {
    /// The index or UUID: a record's key for the GPU.
    pub fn as_str(&self) -> &str {
        match self {
            GpuLabel::Index(s) | GpuLabel::Uuid(s) => s,
        }
    }
}

impl GpuFigures {
    pub fn new(count: f64, without_process: f64, figures: Vec<(&'static Metric, f64)>) -> Self {
        GpuFigures {
            count,
            billed: count,
            without_process,
            parts: Vec::new(),
            joules: None,
            figures,
            each: Vec::new(),
            each_series: false,
        }
    }

    /// Every figure of the job's GPUs together, counts first: the per-job series and the
    /// record's.
    pub fn series(&self) -> impl Iterator<Item = (&'static Metric, f64)> + '_ {
        [(&GPU_COUNT, self.count), (&GPU_IDLE_COUNT, self.without_process)]
            .into_iter()
            .chain(self.figures.iter().copied())
    }

    /// Mean utilisation of its GPUs, where NVML gives it.
    pub fn utilization(&self) -> Option<f64> {
        self.figures.iter().rev().find(|(m, _)| is(m, &GPU_UTILIZATION)).map(|(_, v)| *v)
    }

    /// The memory its GPUs hold now and the memory they have, together, where NVML gives both.
    pub fn memory(&self) -> Option<(f64, f64)> {
        let last = |m: &Metric| self.figures.iter().rev().find(|(f, _)| is(f, m)).map(|(_, v)| *v);
        Some((last(&GPU_MEMORY_USED)?, last(&GPU_MEMORY_TOTAL)?)).filter(|(_, total)| *total > 0.0)
    }

    /// Whether its GPUs idle: their mean utilisation under `threshold` percent (None where
    /// NVML gives no utilisation).
    pub fn under(&self, threshold: f64) -> Option<bool> {
        self.utilization().map(|u| u < threshold)
    }

    /// How many of its GPUs idle, by their worth billed to it (a GPU it shares with another
    /// job is half its: eight idle shard jobs on one GPU are one GPU idle, not eight): each one
    /// running none of its processes or under `threshold` (seven of eight GPUs at 0 % beside
    /// one at 100 % are seven idle, though their mean is 12.5 %); without each GPU's figures
    /// (whole GPUs), all of them where their mean is under it, else those running none of its
    /// processes.
    pub fn idle(&self, threshold: f64) -> f64 {
        if !self.parts.is_empty() {
            let idle = |(u, _, busy): &&(Option<f64>, f64, bool)| !busy || u.is_some_and(|u| u < threshold);
            return self.parts.iter().filter(idle).map(|(_, billed, _)| billed).sum();
        }
        if self.under(threshold) == Some(true) { self.billed } else { self.without_process }
    }
}

impl JobReading {
    pub fn new(info: JobInfo) -> Self {
        JobReading { info, job: JobFigures::default(), gpus: None, held: Held::default() }
    }

    /// Whether this reading has any figure (a job whose cgroup vanished mid-read has none).
    pub fn has_figures(&self) -> bool {
        !self.job.is_empty() || self.job.per_core.is_some() || self.gpus.is_some()
    }

    /// Its memory limit; None when it has none (unlimited) or none was read.
    pub fn memory_limit(&self) -> Option<f64> {
        self.job.memory_limit.and_then(limited)
    }

    /// The most memory it is known to have held: the cgroup's high-water mark, or what it
    /// holds now where that is more (or the kernel keeps no mark).
    pub fn memory_peak(&self) -> Option<f64> {
        let f = &self.job;
        [f.memory_max, f.memory_usage, f.memory_rss].into_iter().flatten().reduce(f64::max)
    }

    /// Its peak as a percentage of its limit, where it has one.
    pub fn memory_peak_share(&self) -> Option<f64> {
        Some(self.memory_peak()? / self.memory_limit()? * 100.0)
    }

    /// Memory it uses now: the cgroup's usage, else its processes' resident memory.
    pub fn memory_used(&self) -> Option<f64> {
        self.job.memory_usage.or(self.job.memory_rss)
    }

    /// How many of its GPUs idle (see [`GpuFigures::idle`]); 0 without GPUs.
    pub fn gpus_idle(&self, threshold: f64) -> f64 {
        self.gpus.as_ref().map_or(0.0, |g| g.idle(threshold))
    }

    pub fn gpu_count(&self) -> Option<f64> {
        self.gpus.as_ref().map(|g| g.count)
    }

    /// CPUs it holds on this node: Slurm's allocation, else its cpuset.
    pub fn cpus_held(&self) -> Option<f64> {
        self.held.cpus.or(self.job.cpus_allocated)
    }

    /// Memory it holds on this node: Slurm's allocation, else its cgroup's limit where Slurm
    /// gave no allocation at all. Where Slurm gave CPUs but no memory, memory is not what it
    /// schedules (`SelectTypeParameters=CR_Core`), and the limit `ConstrainRAMSpace` sets then
    /// is all the node's memory: taken for the job's, it billed every job the whole node.
    pub fn memory_held(&self) -> Option<f64> {
        match (self.held.memory_bytes, self.held.cpus) {
            (Some(memory), _) => Some(memory),
            (None, Some(_)) => None,
            (None, None) => self.memory_limit(),
        }
    }

    pub fn gpu_utilization(&self) -> Option<f64> {
        self.gpus.as_ref().and_then(GpuFigures::utilization)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(figures: Vec<(&'static Metric, f64)>) -> JobReading {
        let info = JobInfo {
            id: "1".into(),
            names: Default::default(),
            node: "n1".into(),
            user: "u".into(),
            account: "a".into(),
            partition: "p".into(),
        };
        JobReading { info, job: JobFigures::from_figures(figures), gpus: None, held: Held::default() }
    }

    #[test]
    fn an_unlimited_or_missing_limit_is_none() {
        assert_eq!(reading(vec![(&MEMORY_LIMIT, 9.223372036854772e18)]).memory_limit(), None, "v1 max");
        assert_eq!(reading(vec![(&MEMORY_LIMIT, 0.0)]).memory_limit(), None);
        assert_eq!(reading(vec![]).memory_limit(), None);
        assert_eq!(reading(vec![(&MEMORY_LIMIT, 4e9)]).memory_limit(), Some(4e9));
    }

    #[test]
    fn the_peak_is_the_most_of_the_mark_and_the_levels() {
        let r = reading(vec![(&MEMORY_USAGE, 3e8), (&MEMORY_MAX, 2e8), (&MEMORY_LIMIT, 6e8)]);
        assert_eq!(r.memory_peak(), Some(3e8), "a mark below usage (reset, or none kept)");
        assert_eq!(r.memory_peak_share(), Some(50.0));
        assert_eq!(reading(vec![(&MEMORY_RSS, 1e6)]).memory_peak_share(), None, "no limit, no share");
    }

    #[test]
    fn idle_gpus_are_all_under_the_threshold_else_those_without_a_process() {
        let g = GpuFigures::new(4.0, 1.0, vec![(&GPU_UTILIZATION, 2.0)]);
        assert_eq!((g.under(5.0), g.idle(5.0)), (Some(true), 4.0));
        assert_eq!((g.under(1.0), g.idle(1.0)), (Some(false), 1.0));
        let no_nvml_utilization = GpuFigures::new(2.0, 1.0, vec![]);
        assert_eq!((no_nvml_utilization.under(5.0), no_nvml_utilization.idle(5.0)), (None, 1.0));
        assert_eq!(reading(vec![]).gpus_idle(5.0), 0.0);
        // Eight shard jobs on one GPU, none running: one GPU idle between them, not eight.
        let shard = GpuFigures {
            billed: 0.125,
            parts: vec![(None, 0.125, false)],
            ..GpuFigures::new(1.0, 1.0, vec![])
        };
        assert_eq!((0..8).map(|_| shard.idle(5.0)).sum::<f64>(), 1.0);
        let busy_beside =
            GpuFigures { billed: 0.5, ..GpuFigures::new(1.0, 0.0, vec![(&GPU_UTILIZATION, 1.0)]) };
        assert_eq!(busy_beside.idle(5.0), 0.5, "under the threshold: its half");
        // One GPU of eight busy: seven idle, whatever the mean (12.5 %, or 3.75 % where the
        // busy one runs at 30 %); a GPU without utilisation (a MIG instance) running the job's
        // work is not known idle.
        let eight = |busy: f64| {
            let parts = (0..8).map(|i| (Some(if i == 0 { busy } else { 0.0 }), 1.0, true)).collect();
            GpuFigures { parts, ..GpuFigures::new(8.0, 0.0, vec![(&GPU_UTILIZATION, busy / 8.0)]) }
        };
        assert_eq!((eight(100.0).idle(5.0), eight(30.0).idle(5.0)), (7.0, 7.0));
        let mig = GpuFigures {
            parts: vec![(None, 1.0, true), (None, 1.0, false)],
            ..GpuFigures::new(2.0, 1.0, vec![])
        };
        assert_eq!(mig.idle(5.0), 1.0);
    }
}
