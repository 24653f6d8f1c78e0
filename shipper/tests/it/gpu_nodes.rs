//! The GPU collector beside the node collector on a host that runs several slurmd: a job's
//! GPU figures belong to the node whose part of the job runs on the GPUs.

use crate::common::copy_tree;
use slurm_cw_catalog::metrics::{GPU_COUNT, GPU_NO_JOB_COUNT};
use slurm_cw_shipper::sample::{Batch, GpuLabel, JobReading};
use slurm_cw_shipper::settings::{GpuConfig, NodeConfig};
use slurm_cw_shipper::sources::Errors;
use slurm_cw_shipper::sources::gpu::GpuCollector;
use slurm_cw_shipper::sources::gpu::fake::{FakeGpu, FakeSource};
use slurm_cw_shipper::sources::node::NodeCollector;
use slurm_cw_shipper::transforms::findings::Thresholds;
use slurm_cw_shipper::transforms::job_series;
use slurm_cw_shipper::transforms::jobs::Jobs;
use slurm_cw_shipper::transforms::shape::{JobMetrics, Shape};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Job 1001 on two slurmd of this host (g1 and g2, as multiple-slurmd runs them), from the v2
/// fixture: g1's part has processes 4240-4243, g2's process 5242 (a copy of 4242). Returns the
/// node collectors' configuration.
fn two_slurmd(root: &Path) -> NodeConfig {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    copy_tree(&fixtures.join("cgroup/v2-kernel-docs"), &root.join("cg"));
    copy_tree(&fixtures.join("proc/slurm-job-1001"), &root.join("proc"));
    let slice = root.join("cg/system.slice");
    std::fs::rename(slice.join("slurmstepd.scope"), slice.join("g1_slurmstepd.scope")).unwrap();
    let g2 = slice.join("g2_slurmstepd.scope/job_1001");
    copy_tree(&slice.join("g1_slurmstepd.scope/job_1001"), &g2);
    for task in
        ["step_extern/user/task_special", "step_0/user/task_1", "step_0/slurm", "step_batch/user/task_0"]
    {
        std::fs::write(g2.join(task).join("cgroup.procs"), "").unwrap();
    }
    std::fs::write(g2.join("step_0/user/task_0/cgroup.procs"), "5242\n").unwrap();
    copy_tree(&root.join("proc/4242"), &root.join("proc/5242"));
    NodeConfig { cgroup_root: root.join("cg"), proc_root: root.join("proc"), ..NodeConfig::default() }
}

/// The last batch of two cycles of the node and GPU collectors (on `gpus`), each observed by
/// `jobs`.
fn two_cycles(cfg: &NodeConfig, gpu_cfg: GpuConfig, gpus: Vec<FakeGpu>, jobs: &mut Jobs) -> Batch {
    let mut node = NodeCollector::new(cfg.clone(), "g1".into());
    let (source, _gpus) = FakeSource::new(gpus);
    let mut gpu =
        GpuCollector::new(Box::new(source), gpu_cfg, cfg.clone(), "g1".into()).with_jobs(node.jobs());
    let start = SystemTime::now() - Duration::from_secs(600);
    let mut batch = Batch::new(start);
    for m in 0..2 {
        batch = Batch::new(start + Duration::from_secs(m * 60));
        node.collect_jobs(None, &mut batch, &mut Errors::new());
        gpu.collect_once(&mut batch, &mut Errors::new());
        jobs.observe(&batch);
    }
    batch
}

fn on<'a>(batch: &'a Batch, node: &str) -> &'a JobReading {
    batch.jobs.iter().find(|r| r.info.node == node && r.info.id == "1001").unwrap()
}

/// Only g2's part runs a process (5242) on a GPU. Its GPU figures go in g2's reading and g2's
/// records, never in g1's (they were guessed onto the job's first node), and its GPU series
/// name the owner and account the node collector found.
#[test]
fn a_job_on_two_slurmd_of_one_host_has_its_gpus_on_the_node_that_runs_them() {
    let dir = tempfile::tempdir().unwrap();
    // No GPUs in the environment: the GPUs' processes say whose they are.
    let cfg = two_slurmd(dir.path());
    let mut jobs = Jobs::new(Thresholds::default(), None);
    let gpus = vec![FakeGpu::gpu(0, 80.0).with_pids(&[5242]), FakeGpu::gpu(1, 0.0)];
    let batch = two_cycles(&cfg, GpuConfig::default(), gpus, &mut jobs);
    let on = |n: &str| on(&batch, n);
    assert_eq!(on("g2").gpu_count(), Some(1.0), "{:?}", batch.jobs);
    assert_eq!(on("g2").gpu_utilization(), Some(80.0));
    assert_eq!(on("g1").gpus, None, "g1's part runs nothing on a GPU");
    let shape = Shape::CloudWatch {
        job_metrics: JobMetrics::Metrics,
        per_node_job_dimensions: false,
        per_node_self_metrics: false,
        all_self_metrics: false,
    };
    let mut series = Vec::new();
    job_series::push(shape, &batch.jobs, batch.time, |m| std::ptr::eq(m, &GPU_COUNT), &mut series);
    assert_eq!(series.len(), 1, "{series:?}");
    let s = &series[0];
    assert_eq!(s.dims.get("User"), Some(on("g2").info.user.as_str()));
    assert_eq!(s.dims.get("Account"), Some("chemistry"));
    let records: Vec<serde_json::Value> =
        jobs.flush(batch.time).iter().map(|r| serde_json::from_str(&r.message).unwrap()).collect();
    let sample = |n: &str| records.iter().find(|v| v["NodeName"] == n && v["Type"] == "job_sample").unwrap();
    assert_eq!(sample("g2")["GpuCount"], 1.0);
    assert_eq!(sample("g2")["GpuUtilization"], 80.0);
    assert!(sample("g1").get("GpuCount").is_none(), "{records:?}");
}

/// Each node's part of job 1001 was allocated its own GPU (g1's processes name GPU 0 in
/// SLURM_JOB_GPUS, g2's GPU 1) and runs nothing on it: each node's reading holds its own GPU,
/// not the allocation of whichever node was looked at first.
#[test]
fn each_node_of_one_host_keeps_its_own_allocation_of_a_job() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = two_slurmd(dir.path());
    let proc = &cfg.proc_root;
    std::fs::write(proc.join("4242/environ"), "SLURM_JOB_ID=1001\0SLURM_JOB_GPUS=0\0").unwrap();
    std::fs::write(proc.join("5242/environ"), "SLURM_JOB_ID=1001\0SLURM_JOB_GPUS=1\0").unwrap();
    let gpu_cfg = GpuConfig { per_gpu_dimensions: true, ..GpuConfig::default() };
    let gpus = vec![FakeGpu::gpu(0, 0.0), FakeGpu::gpu(1, 0.0), FakeGpu::gpu(2, 0.0)];
    let batch = two_cycles(&cfg, gpu_cfg, gpus, &mut Jobs::new(Thresholds::default(), None));
    let held = |n: &str| {
        let g = on(&batch, n).gpus.clone().unwrap_or_else(|| panic!("{n}: no GPUs in {:?}", batch.jobs));
        let labels: Vec<GpuLabel> = g.each.into_iter().map(|one| one.label).collect();
        (g.count, g.without_process, labels)
    };
    assert_eq!(held("g1"), (1.0, 1.0, vec![GpuLabel::Index("0".into())]));
    assert_eq!(held("g2"), (1.0, 1.0, vec![GpuLabel::Index("1".into())]));
    assert_eq!(batch.value(&GPU_NO_JOB_COUNT, &[("NodeName", "g1")]), Some(1.0), "GPU 2 alone");
}
