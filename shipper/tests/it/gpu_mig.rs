//! MIG instances on the fake device: attributed to the job that runs on them or names them,
//! with what NVML cannot measure per instance absent from the job's figures, never 0.

use crate::gpu_fake::{bench, job, node, of};
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::metrics::*;
use slurm_cw_shipper::settings::GpuConfig;
use slurm_cw_shipper::sources::gpu::fake::FakeGpu;

#[test]
fn mig_instances_are_attributed_and_unmeasurable_figures_absent() {
    let gpus = vec![
        FakeGpu::gpu(0, 50.0).with_pids(&[4242]),
        FakeGpu::mig(3, 1, 10 << 30).with_pids(&[4243]),
        FakeGpu::mig(3, 2, 20 << 30),
        FakeGpu::mig(3, 5, 20 << 30),
    ];
    let cfg = GpuConfig { per_gpu_dimensions: true, ..GpuConfig::default() };
    let mut b = bench(gpus, cfg);
    let (out, _) = b.collect();
    // GPU 0 (process), MIG 3/1 (process), MIG 3/2 (named in CUDA_VISIBLE_DEVICES, idle).
    assert_eq!(job(&out, &GPU_COUNT), Some(3.0));
    assert_eq!(job(&out, &GPU_IDLE_COUNT), Some(1.0));
    assert_eq!(node(&out, &GPU_NO_JOB_COUNT), Some(1.0), "MIG 3/5 is free");
    let per_gpu = |label: &str, m: &'static Metric| {
        of(&out, m).iter().find(|s| s.dims.get("Gpu") == Some(label)).and_then(|s| s.scalar())
    };
    assert_eq!(per_gpu("3/1", &GPU_MEMORY_TOTAL), Some((10u64 << 30) as f64));
    assert_eq!(per_gpu("3/1", &GPU_UTILIZATION), None, "NVML cannot measure it on MIG: absent, not zero");
    assert_eq!(per_gpu("0", &GPU_UTILIZATION), Some(50.0));
    assert_eq!(job(&out, &GPU_UTILIZATION), Some(50.0), "the per-job mean ignores what MIG cannot give");
    let per_gpu_total = of(&out, &GPU_MEMORY_TOTAL);
    let s = per_gpu_total.iter().find(|s| s.dims.get("Gpu") == Some("3/2")).unwrap();
    assert_eq!(s.dims.get("NodeName"), Some("g1"));
}
