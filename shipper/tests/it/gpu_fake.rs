//! The GPU collector on a fake device: utilisation and processes in a job's cgroup, a GPU
//! allocated to the job with nothing running on it, MIG instances, a lost GPU, and GPUs with
//! and without GPM.

use crate::common::copy_tree;
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::metrics::*;
use slurm_cw_formats::slurm::gres_conf::GresConf;
use slurm_cw_shipper::sample::{Batch, Sample};
use slurm_cw_shipper::settings::{GpuConfig, NodeConfig};
use slurm_cw_shipper::sources::Errors;
use slurm_cw_shipper::sources::gpu::GpuCollector;
use slurm_cw_shipper::sources::gpu::fake::{FakeGpu, FakeGpus, FakeSource};
use slurm_cw_shipper::sources::node::NodeCollector;
use slurm_cw_shipper::transforms::findings::Thresholds;
use slurm_cw_shipper::transforms::job_series;
use slurm_cw_shipper::transforms::jobs::Jobs;
use slurm_cw_shipper::transforms::shape::{JobMetrics, Shape};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Job 1001 (v2 fixture, processes 4240-4243, account chemistry) allocated GPUs 0 and 1.
pub(crate) struct Bench {
    pub(crate) _dir: tempfile::TempDir,
    pub(crate) collector: GpuCollector,
    pub(crate) gpus: FakeGpus,
}

pub(crate) fn bench(gpus: Vec<FakeGpu>, cfg: GpuConfig) -> Bench {
    bench_with_gres_conf(gpus, cfg, "")
}

/// [`bench`] on a node whose gres.conf says `gres`.
fn bench_with_gres_conf(gpus: Vec<FakeGpu>, cfg: GpuConfig, gres: &str) -> Bench {
    let dir = tempfile::tempdir().unwrap();
    let (cg, proc) = (dir.path().join("cg"), dir.path().join("proc"));
    copy_tree(&fixtures().join("cgroup/v2-kernel-docs"), &cg);
    copy_tree(&fixtures().join("proc/slurm-job-1001"), &proc);
    std::fs::write(
        proc.join("4241/environ"),
        "SLURM_JOB_ID=1001\0SLURM_JOB_ACCOUNT=chemistry\0SLURM_JOB_GPUS=0,1\0CUDA_VISIBLE_DEVICES=0,1,MIG-fake-0003-2\0",
    )
    .unwrap();
    let node = NodeConfig { cgroup_root: cg, proc_root: proc, ..NodeConfig::default() };
    let (source, shared) = FakeSource::new(gpus);
    let collector =
        GpuCollector::new(Box::new(source), cfg, node, "g1".into()).with_gres_conf(GresConf::parse(gres));
    Bench { _dir: dir, collector, gpus: shared }
}

impl Bench {
    pub(crate) fn collect(&mut self) -> (Batch, Errors) {
        let mut b = Batch::new(SystemTime::now());
        let mut e = Errors::new();
        self.collector.collect_once(&mut b, &mut e);
        (b, e)
    }
}

/// The jobs' series of `m` in a collection, as CloudWatch takes them with per-job metrics on.
pub(crate) fn of(b: &Batch, m: &'static Metric) -> Vec<Sample> {
    let shape = Shape::CloudWatch {
        job_metrics: JobMetrics::Metrics,
        per_node_job_dimensions: false,
        per_node_self_metrics: false,
        all_self_metrics: false,
    };
    let mut out = Vec::new();
    job_series::push(shape, &b.jobs, b.time, |x| std::ptr::eq(x, m), &mut out);
    out
}

pub(crate) fn job(b: &Batch, m: &'static Metric) -> Option<f64> {
    let series = of(b, m);
    let mut it = series.iter().filter(|s| s.dims.get("JobId") == Some("1001") && s.dims.get("Gpu").is_none());
    let v = it.next().map(|s| s.scalar().unwrap());
    assert!(it.next().is_none(), "{} twice", m.name);
    v
}

pub(crate) fn node(b: &Batch, m: &'static Metric) -> Option<f64> {
    b.value(m, &[("NodeName", "g1")])
}

fn four_gpus() -> Vec<FakeGpu> {
    vec![
        FakeGpu::gpu(0, 80.0).with_pids(&[4242]),
        FakeGpu::gpu(1, 0.0),
        FakeGpu::gpu(2, 0.0),
        FakeGpu::gpu(3, 30.0).with_pids(&[999_999]),
    ]
}

#[test]
fn a_job_with_a_busy_and_an_allocated_idle_gpu() {
    let mut b = bench(four_gpus(), GpuConfig::default());
    let (out, e) = b.collect();
    assert_eq!(e.total(), 0);
    assert_eq!(job(&out, &GPU_COUNT), Some(2.0), "GPU 0 by its process, GPU 1 by SLURM_JOB_GPUS");
    assert_eq!(job(&out, &GPU_IDLE_COUNT), Some(1.0), "GPU 1 runs none of the job's processes");
    assert_eq!(job(&out, &GPU_UTILIZATION), Some(40.0), "mean of 80 and 0");
    assert_eq!(job(&out, &GPU_MEMORY_USED), Some(2.0 * (1u64 << 30) as f64));
    assert_eq!(job(&out, &GPU_MEMORY_TOTAL), Some(160.0 * (1u64 << 30) as f64));
    assert_eq!(job(&out, &GPU_POWER), Some(500.0 + 100.0), "sum of 500 W and 100 W");
    assert_eq!(job(&out, &GPU_TEMPERATURE), Some(60.0), "the hotter GPU");
    // GPU 2 is nobody's; GPU 3 runs a process of no job: both idle capacity.
    assert_eq!(node(&out, &GPU_NO_JOB_COUNT), Some(2.0));
    assert_eq!(node(&out, &GPU_ERRORS), Some(0.0));
    assert_eq!(job(&out, &GPU_SM_ACTIVITY), None, "GPM needs two samples");
    let s = &of(&out, &GPU_COUNT)[0];
    assert_eq!((s.dims.get("Account"), s.dims.get("User").is_some()), (Some("chemistry"), true));
    let series: Vec<Sample> = ALL.iter().flat_map(|m| of(&out, m)).collect();
    for s in out.samples.iter().chain(&series) {
        assert!(
            s.metric.accepts_dimensions(s.dims.names().chain(["ClusterName"])),
            "{} {:?}",
            s.metric.name,
            s.dims
        );
    }
}

#[test]
fn gpm_figures_from_the_second_sample_and_absent_without_support() {
    let mut gpus = four_gpus();
    gpus[1].gpm = None; // an older GPU: no GPM
    let mut b = bench(gpus, GpuConfig::default());
    b.collect();
    let (out, _) = b.collect();
    assert_eq!(job(&out, &GPU_SM_ACTIVITY), Some(80.0), "only GPU 0 has GPM; GPU 1 is left out, not zero");
    assert_eq!(job(&out, &GPU_TENSOR_ACTIVITY), Some(80.0 / 3.0));
    assert_eq!(job(&out, &GPU_PCIE_RX_BYTES), Some(2e9));
    assert_eq!(job(&out, &GPU_NVLINK_TX_BYTES), Some(3e9));
}

#[test]
fn a_lost_gpu_loses_only_its_own_figures() {
    let mut b = bench(four_gpus(), GpuConfig::default());
    b.collect();
    b.gpus.lock().unwrap()[1].lost = true;
    let (out, e) = b.collect();
    assert_eq!(e.total(), 0, "a GPU error is a GPU metric, not a collector failure");
    assert_eq!(node(&out, &GPU_ERRORS), Some(1.0));
    assert_eq!(job(&out, &GPU_COUNT), Some(1.0));
    assert_eq!(job(&out, &GPU_UTILIZATION), Some(80.0));
    b.gpus.lock().unwrap()[1].lost = false;
    let (out, _) = b.collect();
    assert_eq!(job(&out, &GPU_COUNT), Some(2.0), "back after the reset");
}

#[test]
fn per_gpu_detail_by_uuid() {
    let cfg = GpuConfig { per_gpu_dimensions: true, uuid_dimension: true, ..GpuConfig::default() };
    let mut b = bench(four_gpus(), cfg);
    let (out, _) = b.collect();
    let series = of(&out, &GPU_UTILIZATION);
    let uuids: Vec<&str> = series.iter().filter_map(|s| s.dims.get("GpuUuid")).collect();
    assert_eq!(uuids, vec!["GPU-fake-0000", "GPU-fake-0001"]);
}

#[test]
fn gpu_enabled_on_without_a_driver_reports_an_error_every_cycle() {
    let mut c = GpuCollector::unavailable(
        "no libnvidia-ml".into(),
        GpuConfig::default(),
        NodeConfig::default(),
        "g1".into(),
    );
    let mut b = Batch::new(SystemTime::now());
    let mut e = Errors::new();
    c.collect_once(&mut b, &mut e);
    assert_eq!(e.total(), 1);
    assert!(b.samples.is_empty());
}

/// The node and GPU collectors' samples of job 1001, one collection a minute for `minutes`,
/// through the job table; returns the job_finding records it wrote.
fn findings_over(gpus: Vec<FakeGpu>, minutes: u64) -> Vec<serde_json::Value> {
    let mut b = bench(gpus, GpuConfig::default());
    let root = b._dir.path().to_owned();
    let cfg =
        NodeConfig { cgroup_root: root.join("cg"), proc_root: root.join("proc"), ..NodeConfig::default() };
    let mut node = NodeCollector::new(cfg, "g1".into());
    let mut jobs = Jobs::new(Thresholds { idle_gpu_minutes: 30, ..Thresholds::default() }, None);
    let start = SystemTime::now() - Duration::from_secs(3600);
    let mut found = Vec::new();
    for minute in 0..=minutes {
        let mut batch = Batch::new(start + Duration::from_secs(minute * 60));
        node.collect_jobs(None, &mut batch, &mut Errors::new());
        b.collector.collect_once(&mut batch, &mut Errors::new());
        jobs.observe(&batch);
        for r in jobs.flush(batch.time) {
            let v: serde_json::Value = serde_json::from_str(&r.message).unwrap();
            if v["Type"] == "job_finding" {
                found.push(v);
            }
        }
    }
    found
}

#[test]
fn an_idle_gpu_job_has_exactly_one_finding_and_a_busy_one_none() {
    let idle = findings_over(vec![FakeGpu::gpu(0, 1.0).with_pids(&[4242]), FakeGpu::gpu(1, 0.0)], 45);
    assert_eq!(idle.len(), 1, "{idle:?}");
    assert_eq!(idle[0]["Finding"], "idle_gpu");
    assert_eq!((idle[0]["JobId"].as_str(), idle[0]["Account"].as_str()), (Some("1001"), Some("chemistry")));
    assert_eq!(idle[0]["NodeName"], "g1");
    assert!(idle[0]["Detail"].as_str().unwrap_or("").contains("30 minutes"), "{}", idle[0]["Detail"]);
    let busy = findings_over(vec![FakeGpu::gpu(0, 80.0).with_pids(&[4242]), FakeGpu::gpu(1, 70.0)], 45);
    assert!(busy.iter().all(|f| f["Finding"] != "idle_gpu"), "{busy:?}");
}

#[test]
fn a_busy_gpu_job_that_needs_little_of_its_gpus_memory_is_told_after_an_hour() {
    // Two 80 GiB GPUs, busy, holding 1 GiB each (the fake's default), through the node and GPU
    // collectors and the job table.
    let busy = || vec![FakeGpu::gpu(0, 80.0).with_pids(&[4242]), FakeGpu::gpu(1, 70.0)];
    let found = findings_over(busy(), 65);
    let memory: Vec<_> = found.iter().filter(|f| f["Finding"] == "gpu_memory_underused").collect();
    assert_eq!(memory.len(), 1, "{found:?}");
    let detail = memory[0]["Detail"].as_str().unwrap_or("");
    assert!(
        detail.starts_with("peak GPU memory 2.0 GiB of its GPUs' 160.0 GiB (1.2%) after 60 minutes"),
        "{detail}"
    );
    assert!(findings_over(busy(), 45).iter().all(|f| f["Finding"] != "gpu_memory_underused"), "too early");
    let mut full = busy();
    for g in &mut full {
        g.reading.memory_used = Some(60 << 30);
    }
    let full = findings_over(full, 65);
    assert!(full.iter().all(|f| f["Finding"] != "gpu_memory_underused"), "75% of the memory used: {full:?}");
}

#[test]
fn gpus_a_job_claims_in_its_environment_are_not_believed_over_slurm() {
    use slurm_cw_formats::slurm::job;
    use slurm_cw_shipper::sources::head::command::SlurmCommands;
    use slurm_cw_shipper::sources::slurm_jobs::SlurmJobs;
    // The job's environment says GPUs 0 and 1 (and a MIG instance); Slurm gave it GPU 0 alone.
    let mut b = bench(four_gpus(), GpuConfig::default());
    let detail =
        job::parse("JobId=1001 Account=chemistry Partition=gpu Nodes=g1 CPU_IDs=0-3 Mem=0 GRES=gpu:1(IDX:0)")
            .unwrap();
    let slurm =
        SlurmJobs::answered(SlurmCommands::new(None, std::time::Duration::from_secs(1)), vec![detail]);
    let collector = std::mem::replace(
        &mut b.collector,
        GpuCollector::unavailable(String::new(), GpuConfig::default(), NodeConfig::default(), "x".into()),
    );
    b.collector = collector.with_slurm(slurm);
    let (out, _) = b.collect();
    assert_eq!(job(&out, &GPU_COUNT), Some(1.0), "GPU 0 only: the environment's GPU 1 is not the job's");
    assert_eq!(job(&out, &GPU_IDLE_COUNT), Some(0.0));
    // GPU 1 is no longer hidden by the claim: with GPU 2, and GPU 3 (running a process of no
    // job), three GPUs no job holds (two when the environment is believed).
    assert_eq!(node(&out, &GPU_NO_JOB_COUNT), Some(3.0));
}

#[test]
fn slurm_gpu_indices_name_minor_numbers_not_the_enumeration_order() {
    // NVML enumerates by PCI bus id; the driver numbered the device files otherwise. The job's
    // SLURM_JOB_GPUS=0,1 are /dev/nvidia0 and /dev/nvidia1: NVML's GPUs 2 and 3.
    let gpus = vec![
        FakeGpu::gpu(0, 10.0).with_minor(Some(2)),
        FakeGpu::gpu(1, 20.0).with_minor(Some(3)),
        FakeGpu::gpu(2, 30.0).with_minor(Some(0)),
        FakeGpu::gpu(3, 40.0).with_minor(Some(1)),
    ];
    let cfg = GpuConfig { per_gpu_dimensions: true, ..GpuConfig::default() };
    let mut b = bench(gpus, cfg);
    let (out, _) = b.collect();
    assert_eq!(job(&out, &GPU_COUNT), Some(2.0));
    assert_eq!(job(&out, &GPU_UTILIZATION), Some(35.0), "mean of NVML's GPUs 2 and 3");
    let series = of(&out, &GPU_UTILIZATION);
    let labels: Vec<&str> = series.iter().filter_map(|s| s.dims.get("Gpu")).collect();
    assert_eq!(labels, vec!["2", "3"]);
    assert_eq!(node(&out, &GPU_NO_JOB_COUNT), Some(2.0), "NVML's GPUs 0 and 1 are nobody's");
    assert_eq!(b.collector.minor_fallbacks, 0);
}

#[test]
fn slurm_gpu_indices_follow_the_order_gres_conf_gives() {
    // The same GPUs, device files numbered against the bus. SLURM_JOB_GPUS=0,1 are places in
    // slurmd's list of GPUs, whose order gres.conf decides.
    let gpus = || {
        vec![
            FakeGpu::gpu(0, 10.0).with_minor(Some(2)),
            FakeGpu::gpu(1, 20.0).with_minor(Some(3)),
            FakeGpu::gpu(2, 30.0).with_minor(Some(0)),
            FakeGpu::gpu(3, 40.0).with_minor(Some(1)),
        ]
    };
    let held = |gres: &str| {
        let cfg = GpuConfig { per_gpu_dimensions: true, ..GpuConfig::default() };
        let mut b = bench_with_gres_conf(gpus(), cfg, gres);
        let (out, _) = b.collect();
        let labels: Vec<String> =
            of(&out, &GPU_UTILIZATION).iter().filter_map(|s| s.dims.get("Gpu")).map(str::to_owned).collect();
        (labels, job(&out, &GPU_UTILIZATION))
    };
    // AutoDetect=nvml: slurmd lists them as NVML enumerates them.
    assert_eq!(held("AutoDetect=nvml\n"), (vec!["0".into(), "1".into()], Some(15.0)));
    // The usual File= range: /dev/nvidia0 and /dev/nvidia1, NVML's 2 and 3.
    assert_eq!(
        held("NodeName=g[1-2] Name=gpu File=/dev/nvidia[0-3]\n"),
        (vec!["2".into(), "3".into()], Some(35.0))
    );
    // Files named out of order: the first two named, /dev/nvidia1 and /dev/nvidia3.
    assert_eq!(
        held("Name=gpu File=/dev/nvidia1\nName=gpu File=/dev/nvidia3\nName=gpu File=/dev/nvidia[0,2]\n"),
        (vec!["1".into(), "3".into()], Some(30.0))
    );
    // Lines for other nodes only: as without gres.conf, by device number.
    assert_eq!(held("NodeName=other AutoDetect=nvml\n"), (vec!["2".into(), "3".into()], Some(35.0)));
}

#[test]
fn without_a_minor_number_the_enumeration_index_is_matched_and_counted() {
    // SLURM_JOB_GPUS=0,1: GPU 0 by its NVML index (no minor number), GPU 2 by minor number 1;
    // GPU 1 is /dev/nvidia7.
    let gpus = vec![
        FakeGpu::gpu(0, 10.0).with_minor(None),
        FakeGpu::gpu(1, 20.0).with_minor(Some(7)),
        FakeGpu::gpu(2, 30.0).with_minor(Some(1)),
    ];
    let mut b = bench(gpus, GpuConfig::default());
    let (out, _) = b.collect();
    assert_eq!(job(&out, &GPU_COUNT), Some(2.0));
    assert_eq!(job(&out, &GPU_UTILIZATION), Some(20.0), "mean of GPUs 0 and 2");
    assert_eq!(b.collector.minor_fallbacks, 1);
    b.collect();
    assert_eq!(b.collector.minor_fallbacks, 2, "one per GPU and cycle");
    // Autodetected: Slurm's numbers are NVML's, no minor number is missed.
    let gpus = vec![FakeGpu::gpu(0, 10.0).with_minor(None), FakeGpu::gpu(1, 20.0).with_minor(Some(7))];
    let mut b = bench_with_gres_conf(gpus, GpuConfig::default(), "AutoDetect=nvml\n");
    let (out, _) = b.collect();
    assert_eq!(job(&out, &GPU_UTILIZATION), Some(15.0), "NVML's GPUs 0 and 1");
    assert_eq!(b.collector.minor_fallbacks, 0);
}

#[test]
fn a_final_sample_reads_the_ending_job_only_and_only_for_its_owner() {
    use slurm_cw_shipper::sources::Collector;
    use slurm_cw_shipper::sources::FinalSample;
    let mut b = bench(four_gpus(), GpuConfig::default());
    let mut out = Batch::new(SystemTime::now());
    assert_eq!(b.collector.final_sample("1001", 1001, &mut out), Some(FinalSample::Denied), "another user");
    assert!(out.samples.is_empty() && out.jobs.is_empty());
    assert_eq!(b.collector.final_sample("1001", 1000, &mut out), Some(FinalSample::Sampled(0)), "its user");
    assert_eq!(job(&out, &GPU_COUNT), Some(2.0));
    assert_eq!(job(&out, &GPU_UTILIZATION), Some(40.0));
    assert_eq!(node(&out, &GPU_NO_JOB_COUNT), None, "the node's own figures wait for the next cycle");
    let mut out = Batch::new(SystemTime::now());
    assert_eq!(
        b.collector.final_sample("77", 0, &mut out),
        Some(FinalSample::Sampled(0)),
        "root, no such job"
    );
    assert!(out.samples.is_empty() && out.jobs.is_empty());
}
