//! MIG instances on the fake device: attributed to the job that runs on them or names them,
//! with what NVML cannot measure per instance (utilisation, power; GPM where the GPU has none)
//! absent from the job's figures and records, never 0.

use crate::common::record_of_type;
use crate::gpu_fake::{bench, job, node, of};
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::metrics::*;
use slurm_cw_shipper::sample::Batch;
use slurm_cw_shipper::settings::GpuConfig;
use slurm_cw_shipper::sources::gpu::fake::FakeGpu;
use slurm_cw_shipper::transforms::findings::Thresholds;
use slurm_cw_shipper::transforms::jobs::Jobs;
use std::time::SystemTime;

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

/// Job 1001 on MIG instances 3/1 (its process) and 3/2 (named in CUDA_VISIBLE_DEVICES): two
/// collections, then its `job_sample` record's `PerGpu`.
fn two_instances(gpus: Vec<FakeGpu>) -> (Batch, serde_json::Value) {
    let mut b = bench(gpus, GpuConfig { per_gpu_dimensions: true, ..GpuConfig::default() });
    let mut jobs = Jobs::new(Thresholds::default(), None);
    let (first, _) = b.collect();
    jobs.observe(&first);
    let (second, _) = b.collect();
    jobs.observe(&second);
    let records = jobs.flush(SystemTime::now());
    let sample = record_of_type(&records, "job_sample").expect("a job_sample");
    (second, sample["PerGpu"].clone())
}

#[test]
fn a_mig_instance_of_a_gpu_with_gpm_has_its_own_sm_activity() {
    let (out, each) = two_instances(vec![
        FakeGpu::mig(3, 1, 10 << 30).with_pids(&[4243]).with_gpm(60.0),
        FakeGpu::mig(3, 2, 20 << 30).with_gpm(20.0),
    ]);
    assert_eq!(job(&out, &GPU_COUNT), Some(2.0));
    assert_eq!(job(&out, &GPU_SM_ACTIVITY), Some(40.0), "the mean of the instances' 60 and 20");
    assert_eq!(job(&out, &GPU_TENSOR_ACTIVITY), Some(80.0 / 3.0 / 2.0), "(20 + 20/3) / 2");
    assert_eq!(job(&out, &GPU_UTILIZATION), None, "absent, not 0");
    assert_eq!(job(&out, &GPU_POWER), None, "absent, not 0");
    // GPM from the second collection only: each instance's one value is its mean.
    let want = serde_json::json!({
        "3/1": {"GpuSmActivity": 60.0, "GpuMemoryUsed": 0.0, "GpuMemoryTotal": 10737418240.0},
        "3/2": {"GpuSmActivity": 20.0, "GpuMemoryUsed": 0.0, "GpuMemoryTotal": 21474836480.0},
    });
    assert_eq!(each, want, "no utilisation or power per instance");
}

#[test]
fn a_mig_instance_of_a_gpu_without_gpm_has_no_sm_activity_not_zero() {
    let (out, each) =
        two_instances(vec![FakeGpu::mig(3, 1, 10 << 30).with_pids(&[4243]), FakeGpu::mig(3, 2, 20 << 30)]);
    assert_eq!(job(&out, &GPU_COUNT), Some(2.0));
    for m in [&GPU_SM_ACTIVITY, &GPU_TENSOR_ACTIVITY, &GPU_DRAM_ACTIVITY, &GPU_UTILIZATION, &GPU_POWER] {
        assert_eq!(job(&out, m), None, "{}: absent, not 0", m.name);
    }
    let want = serde_json::json!({
        "3/1": {"GpuMemoryUsed": 0.0, "GpuMemoryTotal": 10737418240.0},
        "3/2": {"GpuMemoryUsed": 0.0, "GpuMemoryTotal": 21474836480.0},
    });
    assert_eq!(each, want);
}
