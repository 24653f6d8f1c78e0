//! The floor under any node daemon's cycle, as `--versus` runs it: a thread woken once a second
//! that reads the cgroup files the node collector reads each cycle for the same jobs (each
//! job's memory usage, peak, `memory.stat`, `memory.oom_control` and `cpuacct.usage_percpu`
//! from descriptors held open, and each task's `cgroup.procs`, which v1 makes one open again),
//! and does nothing else: no parsing, no pipeline, no flush. Measured beside a thread woken
//! the same way that reads nothing. What a process pays to wake with cold caches once a second
//! and ask the kernel for these figures is this, whatever it is written in; a ratio against
//! the exporter above the floor's is out of any implementation's reach.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Cycles each floor is taken over (one a second).
const CYCLES: u32 = 20;

pub struct Floor {
    /// Woken once a second, nothing read.
    pub wake: Duration,
    /// Woken once a second, the collector's cgroup files read.
    pub reads: Duration,
    /// Files read a cycle.
    pub files: usize,
}

/// The job's directory of `controller` under `root/controller/slurm_dir/uid_*/job_<job>`.
fn job_dir(root: &Path, controller: &str, slurm_dir: &str, job: &str) -> PathBuf {
    let base = root.join(controller).join(slurm_dir);
    std::fs::read_dir(&base)
        .unwrap()
        .flatten()
        .map(|u| u.path().join(format!("job_{job}")))
        .find(|d| d.is_dir())
        .unwrap_or_else(|| panic!("job {job} under {}", base.display()))
}

/// Each task's `cgroup.procs` under a job's cpuacct directory (`step_*/task_*`).
fn tasks(job: &Path) -> Vec<PathBuf> {
    let dirs = |d: &Path, prefix: &str| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
            .map(|e| e.path())
            .collect()
    };
    dirs(job, "step_").iter().flat_map(|s| dirs(s, "task_")).map(|t| t.join("cgroup.procs")).collect()
}

/// CPU a cycle of a thread that wakes every second `CYCLES` times and does `cycle`.
fn paced(mut cycle: impl FnMut() + Send) -> Duration {
    std::thread::scope(|s| {
        s.spawn(|| {
            let t = super::cpu_time_thread();
            for _ in 0..CYCLES {
                std::thread::sleep(Duration::from_secs(1));
                cycle();
            }
            (super::cpu_time_thread() - t) / CYCLES
        })
        .join()
        .unwrap()
    })
}

/// Both floors for `jobs` on the v1 hierarchy under `root`.
pub fn measure(root: &Path, slurm_dir: &str, jobs: &[String]) -> Floor {
    let mut held = Vec::new();
    let mut procs = Vec::new();
    for job in jobs {
        let memory = job_dir(root, "memory", slurm_dir, job);
        let cpuacct = job_dir(root, "cpuacct", slurm_dir, job);
        for f in ["memory.usage_in_bytes", "memory.max_usage_in_bytes", "memory.stat", "memory.oom_control"] {
            held.push(File::open(memory.join(f)).unwrap());
        }
        held.push(File::open(cpuacct.join("cpuacct.usage_percpu")).unwrap());
        procs.extend(tasks(&cpuacct));
    }
    let files = held.len() + procs.len();
    let mut buf = vec![0u8; 8192];
    let wake = paced(|| {});
    let reads = paced(|| {
        for f in &held {
            let _ = f.read_at(&mut buf, 0);
        }
        for p in &procs {
            if let Ok(f) = File::open(p) {
                let _ = f.read_at(&mut buf, 0);
            }
        }
    });
    Floor { wake, reads, files }
}
