//! A GPU job's records through the whole pipeline on the fake device: each GPU's figures in its
//! samples' `PerGpu`, and in its summary the energy its GPUs used, in all and each.

use crate::common::record_of_type;
use crate::gpu_fake::bench;
use slurm_cw_catalog::metrics::*;
use slurm_cw_shipper::settings::{GpuConfig, NodeConfig};
use slurm_cw_shipper::sources::gpu::GpuCollector;
use slurm_cw_shipper::sources::gpu::fake::{FakeGpu, FakeGpus};
use slurm_cw_shipper::sources::node::NodeCollector;
use std::time::{Duration, SystemTime};

/// Job 1001 holds GPU 0 (its process) and GPU 1 (SLURM_JOB_GPUS); GPU 2 is nobody's. Each
/// GPU's energy counter in mJ.
fn set_energy(gpus: &FakeGpus, mj: [u64; 3]) {
    let mut g = gpus.lock().unwrap();
    for (gpu, e) in g.iter_mut().zip(mj) {
        gpu.reading.energy_mj = Some(e);
    }
}

#[test]
fn a_job_summary_has_the_energy_its_gpus_used_and_a_denied_final_sample_adds_nothing() {
    use slurm_cw_shipper::pipeline::{Parts, Pipeline};
    use slurm_cw_shipper::role::Role;
    use slurm_cw_shipper::settings::{JobMetrics, Settings};
    use slurm_cw_shipper::sources::Collector;
    use slurm_cw_shipper::sources::FinalSample;
    let gpus = vec![FakeGpu::gpu(0, 80.0).with_pids(&[4242]), FakeGpu::gpu(1, 0.0), FakeGpu::gpu(2, 0.0)];
    let mut b = bench(gpus, GpuConfig::default());
    let root = b._dir.path().to_owned();
    let mut config = Settings::default();
    config.node.cgroup_root = root.join("cg");
    config.node.proc_root = root.join("proc");
    // Per-job metrics as datums too, so that a figure a denied request let through would show.
    config.node.job_metrics = JobMetrics::Both;
    let node = NodeCollector::new(config.node.clone(), "g1".into());
    let gpu = std::mem::replace(
        &mut b.collector,
        GpuCollector::unavailable(String::new(), GpuConfig::default(), NodeConfig::default(), "x".into()),
    )
    .with_jobs(node.jobs());
    let collectors: Vec<Box<dyn Collector>> = vec![Box::new(node), Box::new(gpu)];
    let parts = Parts::cloudwatch("c", "g1");
    let mut p = Pipeline::new(&config.pipeline(), Role::Node, collectors, parts);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let start = SystemTime::now() - Duration::from_secs(600);
    let at = |m: u64| start + Duration::from_secs(m * 60);
    // A minute: GPU 0 draws 400 W (24 kJ), GPU 1 100 W (6 kJ), GPU 2 50 W (3 kJ).
    let minute = |m: u64| [5_000_000_000 + m * 24_000_000, 7_000_000_000 + m * 6_000_000, m * 3_000_000];
    for m in 0..3 {
        set_energy(&b.gpus, minute(m));
        rt.block_on(p.collect_at(at(m)));
    }
    let flushed = p.flush_at(at(3));
    assert!(flushed.aggregates[0].iter().any(|d| d.metric.name == GPU_COUNT.name), "the cycles' GPU figures");
    let sample = record_of_type(&flushed.records, "job_sample").expect("a sample");
    // Three collections: GPU 0 at 80 % (GPM from the second on), 500 W; GPU 1 idle, 100 W;
    // 1 GiB used of 80 GiB each.
    let gib = (1u64 << 30) as f64;
    let each = serde_json::json!({
        "0": {"GpuUtilization": 80.0, "GpuSmActivity": 80.0, "GpuMemoryUsed": gib, "GpuMemoryTotal": 80.0 * gib, "GpuPower": 500.0},
        "1": {"GpuUtilization": 0.0, "GpuSmActivity": 0.0, "GpuMemoryUsed": gib, "GpuMemoryTotal": 80.0 * gib, "GpuPower": 100.0},
    });
    assert_eq!(sample["PerGpu"], each);
    assert_eq!((sample["GpuUtilization"].as_f64(), sample["GpuPower"].as_f64()), (Some(40.0), Some(600.0)));
    // Another user asks for the job's final sample: nothing is read or kept.
    assert_eq!(p.final_sample("1001", 1001), FinalSample::Denied);
    let flushed = p.flush_at(at(3));
    assert!(
        flushed.aggregates[0].iter().all(|d| d.metric.name != GPU_COUNT.name),
        "no GPU figure after a denial"
    );
    assert!(flushed.records.is_empty(), "{:?}", flushed.records);
    // The driver reloads (counters from zero), then the job's TaskEpilog asks.
    set_energy(&b.gpus, [12_000_000, 3_000_000, 1_000_000]);
    assert_eq!(p.final_sample("1001", 1000), FinalSample::Sampled(1));
    let flushed = p.flush_at(at(4));
    assert!(
        flushed.aggregates[0].iter().any(|d| d.metric.name == GPU_COUNT.name),
        "the final sample's GPU figures"
    );
    let summary = record_of_type(&flushed.records, "job_summary").expect("a summary at the final sample");
    assert_eq!(summary["EndedBy"], "task_epilog");
    assert_eq!(summary["Gpus"], 2.0);
    // Two minutes of GPUs 0 and 1 (60 kJ), then 15 kJ since the reload: 75 kJ; GPU 2 is not
    // the job's, and the first reading is only a baseline.
    let kwh = summary["GpuEnergyKwh"].as_f64().expect("GpuEnergyKwh");
    assert!((kwh - 75_000.0 / 3.6e6).abs() < 1e-6, "{kwh}");
    // Each: GPU 0 48 kJ and 12 kJ, GPU 1 12 kJ and 3 kJ.
    let each = |gpu: &str| summary["PerGpu"][gpu]["GpuEnergyKwh"].as_f64().expect("per GPU");
    assert_eq!((each("0"), each("1")), (0.0166667, 0.00416667), "60 kJ and 15 kJ, six digits");
}
