//! The three clusters the bench prices and the jobs it runs on their simulated nodes: who
//! runs what, when, and the readings the node collector would make of them.

use super::*;

pub const COLLECT: u64 = 30;
pub const SIM_SECONDS: u64 = 3600;

#[derive(Clone, Copy)]
pub struct Scenario {
    pub name: &'static str,
    pub nodes: usize,
    pub jobs_per_day: f64,
    pub job_minutes: u64,
    pub partitions: usize,
    pub accounts: usize,
    /// Nodes simulated.
    pub sim_nodes: usize,
    pub cores: u32,
    pub memory_gib: u64,
    /// ParallelCluster compute resource in the node names.
    pub resource: &'static str,
    pub first_job: u64,
    pub target: f64,
    /// Hours a day the nodes run (dynamic nodes scale to zero otherwise); the head runs always.
    pub busy_hours: f64,
}

pub const SCENARIOS: [Scenario; 3] = [
    Scenario {
        name: "C",
        nodes: 2,
        jobs_per_day: 200.0,
        job_minutes: 5,
        partitions: 1,
        accounts: 3,
        sim_nodes: 2,
        cores: 16,
        memory_gib: 64,
        resource: "c6i32xlarge",
        first_job: 12_000,
        target: 10.0,
        busy_hours: 8.0,
    },
    Scenario {
        name: "A",
        nodes: 64,
        jobs_per_day: 2_000.0,
        job_minutes: 30,
        partitions: 2,
        accounts: 10,
        sim_nodes: 8,
        cores: 16,
        memory_gib: 64,
        resource: "c6i32xlarge",
        first_job: 481_000,
        target: 50.0,
        busy_hours: 24.0,
    },
    Scenario {
        name: "B",
        nodes: 1_000,
        jobs_per_day: 100_000.0,
        job_minutes: 5,
        partitions: 8,
        accounts: 50,
        sim_nodes: 16,
        cores: 4,
        memory_gib: 16,
        resource: "hpc7a96xlarge",
        first_job: 3_620_000,
        target: 250.0,
        busy_hours: 24.0,
    },
];

pub fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

pub fn epoch(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// A number in [0, 1) that depends only on its arguments (splitmix64): figures that vary like
/// real ones, the same every run.
pub fn noise(a: u64, b: u64, c: u64) -> f64 {
    let mut z = a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.rotate_left(21) ^ c.rotate_left(42);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) as f64 / u64::MAX as f64
}

pub fn partition_name(p: usize) -> String {
    format!("queue{}", p + 1)
}

pub fn node_name(s: &Scenario, i: usize) -> String {
    format!("{}-dy-{}-{}", partition_name(i % s.partitions), s.resource, i / s.partitions + 1)
}

#[derive(Debug, Clone)]
pub struct Job {
    pub idx: u64,
    pub info: JobInfo,
    pub start: u64,
    pub end: u64,
    pub cores: u32,
    pub memory_limit: f64,
    pub efficiency: f64,
}

/// Jobs of the simulated nodes: the scenario's arrival rate for that share of the cluster,
/// evenly spaced, round robin over the nodes; those started up to one duration before `t0`
/// are running when the hour begins.
pub fn jobs_for(s: &Scenario, t0: u64, nodes: &[String]) -> Vec<Job> {
    // The day's jobs arrive while the nodes run.
    let per_second = s.jobs_per_day * s.sim_nodes as f64 / s.nodes as f64 / (s.busy_hours * 3600.0);
    let gap = 1.0 / per_second;
    let duration = s.job_minutes * 60;
    let first = t0 - duration;
    let users = s.accounts * 3;
    let mut out = Vec::new();
    for k in 0.. {
        let start = first + (k as f64 * gap) as u64;
        if start >= t0 + SIM_SECONDS {
            break;
        }
        let k = k as u64;
        let node = (k as usize) % nodes.len();
        out.push(Job {
            idx: k,
            info: JobInfo {
                id: (s.first_job + k).to_string(),
                names: Default::default(),
                node: nodes[node].clone(),
                user: format!("user{:03}", k as usize % users),
                account: format!("proj-{:02}", k as usize % s.accounts),
                partition: partition_name(node % s.partitions),
            },
            start,
            end: start + duration,
            cores: s.cores,
            memory_limit: (s.memory_gib << 30) as f64,
            efficiency: 0.55 + 0.4 * noise(k, 1, 0),
        });
    }
    out
}

/// Bytes, in whole pages as cgroup files give them.
pub fn pages(v: f64) -> f64 {
    (v / 4096.0).round() * 4096.0
}

/// One reading of a job, as the node collector makes it on cgroup v1: memory, CPU and I/O
/// every reading, rates from the second, processes when `with_procs`. The pipeline makes its
/// series.
pub fn emit_job(out: &mut Batch, job: &Job, t: u64, previous: Option<u64>, with_procs: bool) {
    let mut figures: Vec<(&'static slurm_cw_catalog::Metric, f64)> = Vec::new();
    let (mut per_core_busy, mut threads, mut by_exe) = (None, Vec::new(), Vec::new());
    let n = |salt: u64| noise(job.idx, t, salt);
    let limit = job.memory_limit;
    let usage = pages(limit * (0.30 + 0.25 * n(1)));
    let cache = pages(usage * (0.10 + 0.15 * n(2)));
    let rss = pages(usage - cache);
    let cores = f64::from(job.cores);
    let busy = (job.efficiency + 0.05 * (n(3) - 0.5)).clamp(0.0, 1.0);
    let elapsed = (t - job.start) as f64;
    let mut push = |m: &'static slurm_cw_catalog::Metric, v: f64| figures.push((m, v));
    for (m, v) in [
        (&MEMORY_USAGE, usage),
        (&MEMORY_MAX, pages(limit * (0.58 + 0.02 * noise(job.idx, 0, 4)))),
        (&MEMORY_LIMIT, limit),
        (&MEMORY_CACHE, cache),
        (&MEMORY_RSS, rss),
        (&MEMORY_RSS_HUGE, (rss * 0.2 / 2_097_152.0).round() * 2_097_152.0),
        (&MEMORY_MAPPED_FILE, pages(3.0e7 + 2.0e7 * n(5))),
        (&MEMORY_ACTIVE_FILE, pages(cache * 0.4)),
        (&MEMORY_INACTIVE_FILE, pages(cache * 0.6)),
        (&MEMORY_UNEVICTABLE, 0.0),
        (&MEMORY_SWAP, 0.0),
        (&OOM_KILLS, 0.0),
        (&CPUS_ALLOCATED, cores),
        (&CPU_TIME, (elapsed * cores * job.efficiency * 1e3).round() / 1e3),
    ] {
        push(m, v);
    }
    if previous.is_some() {
        push(&CPU_USAGE, cores * busy);
        push(&CPU_UTILIZATION, busy * 100.0);
        push(&CPU_THROTTLED_TIME, 0.0);
        push(&READ_BYTES, 2.0e5 + 4.0e7 * n(6));
        push(&WRITE_BYTES, 1.0e5 + 2.0e7 * n(7));
        push(&READ_OPS, 5.0 + 400.0 * n(8));
        push(&WRITE_OPS, 2.0 + 200.0 * n(9));
        let per_core: Vec<f64> = (0..job.cores)
            .map(|c| (busy * 100.0 + 8.0 * (noise(job.idx, t, 100 + u64::from(c)) - 0.5)).clamp(0.0, 100.0))
            .collect();
        per_core_busy = Some(per_core);
    }
    if with_procs {
        figures.extend([(&PROCESS_COUNT, cores + 3.0), (&OPEN_FILES, 40.0 + 6.0 * cores)]);
        threads = vec![("running", (cores * busy).round()), ("sleeping", 2.0 * cores + 5.0)];
        if previous.is_some() {
            by_exe = vec![
                ("lmp_mpi".to_owned(), cores * busy * 0.97),
                ("python3".to_owned(), cores * busy * 0.03),
            ];
        }
    }
    let job_figures =
        JobFigures { per_core: per_core_busy, threads, by_exe, ..JobFigures::from_figures(figures) };
    out.jobs.push(JobReading {
        info: job.info.clone(),
        job: job_figures,
        gpus: None,
        held: Default::default(),
    });
}
