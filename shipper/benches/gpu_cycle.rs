//! Cost of one GPU collection cycle: 8 GPUs (or 7 and a MIG GPU with 3 instances) and 4 jobs
//! on the fake device, against a floor measured in the same run (the device reads alone, no
//! attribution to jobs); and on the real NVML when this machine has a driver.
//!
//! `cargo bench -p slurm-cw-shipper --bench gpu_cycle`

use slurm_cw_shipper::sample::Batch;
use slurm_cw_shipper::settings::{GpuConfig, NodeConfig};
use slurm_cw_shipper::sources::Errors;
use slurm_cw_shipper::sources::gpu::GpuCollector;
use slurm_cw_shipper::sources::gpu::fake::{FakeGpu, FakeSource};
use slurm_cw_shipper::sources::gpu::nvml::NvmlSource;
use slurm_cw_shipper::sources::gpu::source::GpuSource;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

fn time_per_cycle(cycles: u32, mut f: impl FnMut()) -> Duration {
    f();
    let t = Instant::now();
    for _ in 0..cycles {
        f();
    }
    t.elapsed() / cycles
}

/// A v2 tree with `jobs` jobs of one process each (pid 100+j) and a fake /proc for them.
fn tree(root: &Path, jobs: u32) -> NodeConfig {
    let (cg, proc) = (root.join("cg"), root.join("proc"));
    std::fs::create_dir_all(&cg).unwrap();
    std::fs::write(cg.join("cgroup.controllers"), "cpu memory\n").unwrap();
    for j in 0..jobs {
        let task = cg.join(format!("system.slice/slurmstepd.scope/job_{}/step_0/user/task_0", 500 + j));
        std::fs::create_dir_all(&task).unwrap();
        std::fs::write(task.join("cgroup.procs"), format!("{}\n", 100 + j)).unwrap();
        let p = proc.join((100 + j).to_string());
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(
            p.join("environ"),
            format!("SLURM_JOB_ACCOUNT=a\0SLURM_JOB_GPUS={},{}\0", 2 * j, 2 * j + 1),
        )
        .unwrap();
    }
    NodeConfig { cgroup_root: cg, proc_root: proc, ..NodeConfig::default() }
}

fn main() {
    let cycles = 2000;
    let dir = tempfile::tempdir().unwrap();
    let node = tree(dir.path(), 4);
    let gpus: Vec<FakeGpu> =
        (0..8).map(|i| FakeGpu::gpu(i, 10.0 * i as f64).with_pids(&[100 + i / 2])).collect();

    let (mut floor_src, _) = FakeSource::new(gpus.clone());
    let floor = time_per_cycle(cycles, || {
        std::hint::black_box(floor_src.read_all());
    });
    let (src, _) = FakeSource::new(gpus);
    let mut c = GpuCollector::new(Box::new(src), GpuConfig::default(), node.clone(), "bench".into());
    let full = time_per_cycle(cycles, || {
        let mut b = Batch::new(SystemTime::now());
        c.collect_once(&mut b, &mut Errors::new());
        std::hint::black_box(b);
    });
    println!(
        "fake, 8 GPUs, 4 jobs: cycle {:.1} us (device reads alone {:.1} us; attribution and emission {:.1} us)",
        full.as_secs_f64() * 1e6,
        floor.as_secs_f64() * 1e6,
        (full.saturating_sub(floor)).as_secs_f64() * 1e6
    );

    match NvmlSource::init() {
        Ok(mut real) => {
            let what = real.describe();
            let n = real.read_all().len();
            let reads = time_per_cycle(50, || {
                std::hint::black_box(real.read_all());
            });
            let mut c = GpuCollector::new(Box::new(real), GpuConfig::default(), node, "bench".into());
            let full = time_per_cycle(50, || {
                let mut b = Batch::new(SystemTime::now());
                c.collect_once(&mut b, &mut Errors::new());
                std::hint::black_box(b);
            });
            println!(
                "real NVML ({what}), {n} devices: cycle {:.2} ms (NVML reads alone {:.2} ms)",
                full.as_secs_f64() * 1e3,
                reads.as_secs_f64() * 1e3
            );
        }
        Err(e) => println!("real NVML: not measured here ({e})"),
    }
}
