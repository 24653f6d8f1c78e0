//! GPUs more than one party uses: jobs Slurm gave one GPU (gres/shard, gres/mps), a job's
//! process on a GPU Slurm gave another, and a process of no job beside a job's.

use crate::common::copy_tree;
use crate::gpu_fake::{Bench, bench, of};
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::metrics::*;
use slurm_cw_shipper::sample::Batch;
use slurm_cw_shipper::settings::GpuConfig;
use slurm_cw_shipper::sources::gpu::fake::FakeGpu;
use std::path::PathBuf;
use std::time::SystemTime;

/// Job `id`'s job-wide figure `m` in a collection.
fn job_of(b: &Batch, id: &str, m: &'static Metric) -> Option<f64> {
    of(b, m)
        .iter()
        .find(|s| s.dims.get("JobId") == Some(id) && s.dims.get("Gpu").is_none())
        .and_then(|s| s.scalar())
}

/// Job 1002 beside 1001 in the bench's tree: process 6242, allocated GPU 0 (as Slurm's
/// gres/shard gives one GPU to both).
fn add_job_1002(b: &Bench) {
    let root = b._dir.path();
    let scope = root.join("cg/system.slice/slurmstepd.scope");
    copy_tree(&scope.join("job_1001"), &scope.join("job_1002"));
    for procs in walk_procs(&scope.join("job_1002")) {
        std::fs::write(procs, "").unwrap();
    }
    std::fs::write(scope.join("job_1002/step_0/user/task_0/cgroup.procs"), "6242\n").unwrap();
    copy_tree(&root.join("proc/4242"), &root.join("proc/6242"));
    std::fs::write(
        root.join("proc/6242/environ"),
        "SLURM_JOB_ID=1002\0SLURM_JOB_ACCOUNT=physics\0SLURM_JOB_GPUS=0\0",
    )
    .unwrap();
}

fn walk_procs(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk_procs(&p));
        } else if p.file_name().is_some_and(|n| n == "cgroup.procs") {
            out.push(p);
        }
    }
    out
}

#[test]
fn jobs_sharing_a_gpu_get_their_own_processes_figures_not_the_whole_gpus() {
    let gib = (1u64 << 30) as f64;
    // GPU 0 shared by jobs 1001 (4 GiB, 60 % of the SMs) and 1002 (1 GiB, 20 %); GPU 1 1001's alone.
    let shared = |second: bool| {
        let mut g = FakeGpu::gpu(0, 80.0).with_process(4242, 4 << 30, 60.0);
        if second {
            g = g.with_process(6242, 1 << 30, 20.0);
        }
        g.reading.memory_used = Some(5 << 30);
        vec![g, FakeGpu::gpu(1, 0.0)]
    };
    let mut b = bench(shared(true), GpuConfig::default());
    add_job_1002(&b);
    let (out, e) = b.collect();
    assert_eq!(e.total(), 0);
    // 1001: its part of GPU 0 (60 %, 4 GiB, 3/4 of 500 W) and GPU 1 whole (0 %, 1 GiB, 100 W).
    assert_eq!(job_of(&out, "1001", &GPU_COUNT), Some(2.0));
    assert_eq!(job_of(&out, "1001", &GPU_UTILIZATION), Some(30.0), "mean of 60 and 0");
    assert_eq!(job_of(&out, "1001", &GPU_MEMORY_USED), Some(5.0 * gib), "4 GiB + 1 GiB");
    assert_eq!(job_of(&out, "1001", &GPU_POWER), Some(375.0 + 100.0));
    assert_eq!(job_of(&out, "1001", &GPU_TEMPERATURE), Some(60.0), "the device's, whole");
    // 1002: its own 20 %, 1 GiB and a quarter of the power, not the GPU's 80 % and 5 GiB.
    assert_eq!(job_of(&out, "1002", &GPU_COUNT), Some(1.0));
    assert_eq!(job_of(&out, "1002", &GPU_UTILIZATION), Some(20.0));
    assert_eq!(job_of(&out, "1002", &GPU_MEMORY_USED), Some(gib));
    assert_eq!(job_of(&out, "1002", &GPU_POWER), Some(125.0));
    assert_eq!(job_of(&out, "1002", &GPU_MEMORY_UTILIZATION), None, "bandwidth is no process's");
    // Billed: GPU 0 half each, GPU 1 1001's whole; not GPU 0 twice over. A final sample of
    // 1002 (its TaskEpilog) still sees 1001 on GPU 0.
    let billed = |out: &Batch, id: &str| {
        out.jobs.iter().find(|j| j.info.id == id).and_then(|j| j.gpus.as_ref()).map(|g| g.billed)
    };
    assert_eq!((billed(&out, "1001"), billed(&out, "1002")), (Some(1.5), Some(0.5)));
    let mut last = Batch::new(SystemTime::now());
    slurm_cw_shipper::sources::Collector::final_sample(&mut b.collector, "1002", 0, &mut last);
    assert_eq!((billed(&last, "1002"), billed(&last, "1001")), (Some(0.5), None), "only 1002, its part");

    // As on the H200: 1002 allocated the busy GPU with no process on it.
    *b.gpus.lock().unwrap() = shared(false);
    let (out, _) = b.collect();
    assert_eq!(job_of(&out, "1002", &GPU_UTILIZATION), Some(0.0), "not its neighbour's 80 %");
    assert_eq!(job_of(&out, "1002", &GPU_MEMORY_USED), Some(0.0), "not its neighbour's 5 GiB");
    assert_eq!(job_of(&out, "1002", &GPU_POWER), Some(0.0));
    assert_eq!(job_of(&out, "1002", &GPU_IDLE_COUNT), Some(1.0));
    assert_eq!(job_of(&out, "1001", &GPU_POWER), Some(500.0 + 100.0), "the whole of GPU 0's power is 1001's");
}

/// Where devices are not constrained, a job's process can open a GPU Slurm gave another job:
/// the GPU's price stays with the job it was given to, or a user could halve their GPU job's
/// bill by running a context from a second job of theirs on its GPU.
#[test]
fn a_process_on_a_gpu_slurm_gave_another_job_moves_none_of_its_price() {
    let mut b = bench(
        vec![
            FakeGpu::gpu(0, 80.0).with_process(4242, 4 << 30, 60.0).with_process(6242, 1 << 30, 20.0),
            FakeGpu::gpu(1, 0.0),
        ],
        GpuConfig::default(),
    );
    add_job_1002(&b);
    // 1002 was given no GPU.
    let environ = b._dir.path().join("proc/6242/environ");
    std::fs::write(environ, "SLURM_JOB_ID=1002\0SLURM_JOB_ACCOUNT=physics\0").unwrap();
    let (out, _) = b.collect();
    let billed =
        |id: &str| out.jobs.iter().find(|j| j.info.id == id).and_then(|j| j.gpus.as_ref()).map(|g| g.billed);
    assert_eq!(billed("1001"), Some(2.0), "GPUs 0 and 1, Slurm's to 1001, whole");
    assert_eq!(billed("1002"), Some(0.0), "its process on 1001's GPU 0 bills it nothing");
}

/// As on an H200 (scripts/gpu-check.sh's first run): a process of no job (there, the ended
/// job A's load, moved out of its cgroup) on the GPU that job B alone holds. None of it is B's.
#[test]
fn a_process_of_no_job_on_a_jobs_gpu_is_not_the_jobs() {
    let gib = (1u64 << 30) as f64;
    // GPU 0: process 9999 (4 GiB, 60 % of the SMs), in systemd's tree, not a job's; GPU 1 idle.
    let gpus = |mine: bool| {
        let mut g = FakeGpu::gpu(0, 80.0).with_process(9999, 4 << 30, 60.0);
        if mine {
            g = g.with_process(4242, 1 << 30, 20.0);
        }
        g.reading.memory_used = Some(5 << 30);
        vec![g, FakeGpu::gpu(1, 0.0)]
    };
    let mut b = bench(gpus(false), GpuConfig::default());
    let stranger = b._dir.path().join("proc/9999");
    std::fs::create_dir_all(&stranger).unwrap();
    std::fs::write(stranger.join("cgroup"), "0::/system.slice/cuda-health.service\n").unwrap();
    let (out, e) = b.collect();
    assert_eq!(e.total(), 0);
    // 1001 holds both GPUs and runs nothing on either: 0 of GPU 0's 80 %, 5 GiB and 500 W;
    // GPU 1 whole (0 %, 1 GiB, 100 W).
    assert_eq!(job_of(&out, "1001", &GPU_IDLE_COUNT), Some(2.0));
    assert_eq!(job_of(&out, "1001", &GPU_UTILIZATION), Some(0.0), "not the stranger's 60 %");
    assert_eq!(job_of(&out, "1001", &GPU_MEMORY_USED), Some(gib), "GPU 1's 1 GiB only");
    assert_eq!(job_of(&out, "1001", &GPU_POWER), Some(100.0), "GPU 1's 100 W only");
    assert_eq!(job_of(&out, "1001", &GPU_TEMPERATURE), Some(60.0), "the device's, whole");
    let billed =
        out.jobs.iter().find(|j| j.info.id == "1001").and_then(|j| j.gpus.as_ref()).map(|g| g.billed);
    assert_eq!(billed, Some(2.0), "both GPUs are still Slurm's to 1001: it pays for them");

    // 1001's own process beside the stranger: its 20 % of 80 % busy SMs, 1 GiB, a quarter of 500 W.
    *b.gpus.lock().unwrap() = gpus(true);
    let (out, _) = b.collect();
    assert_eq!(job_of(&out, "1001", &GPU_IDLE_COUNT), Some(1.0));
    assert_eq!(job_of(&out, "1001", &GPU_UTILIZATION), Some(10.0), "mean of its 20 and GPU 1's 0");
    assert_eq!(job_of(&out, "1001", &GPU_MEMORY_USED), Some(2.0 * gib));
    assert_eq!(job_of(&out, "1001", &GPU_POWER), Some(125.0 + 100.0));

    // A pid NVML lists that /proc does not show (gone since) is no stranger: the GPU is 1001's.
    std::fs::remove_dir_all(&stranger).unwrap();
    let (out, _) = b.collect();
    assert_eq!(job_of(&out, "1001", &GPU_POWER), Some(500.0 + 100.0));
    assert_eq!(job_of(&out, "1001", &GPU_MEMORY_USED), Some(6.0 * gib));
}

/// What NVML listed under MPS on an H200 (tests/fixtures/nvml/h200-580-mps.jsonl, `t7`): the
/// server (no job's) and each client with its memory in the compute list, the clients in the
/// MPS list, and SM samples for the server alone: (server, its SM, clients with their memory).
fn mps_on_the_h200() -> (u32, f64, Vec<(u32, u64)>) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nvml/h200-580-mps.jsonl");
    let text = std::fs::read_to_string(path).unwrap();
    let t7: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .find(|v: &serde_json::Value| v["tag"] == "t7")
        .unwrap();
    let pairs = |v: &serde_json::Value| -> Vec<(u32, u64)> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_u64().unwrap() as u32, p[1].as_u64().unwrap()))
            .collect()
    };
    let (compute, clients) = (pairs(&t7["compute"]), pairs(&t7["mps"]));
    let (server, _) = *compute.iter().find(|(p, _)| clients.iter().all(|(c, _)| c != p)).unwrap();
    let sm = t7["util"].as_array().unwrap().iter().find(|u| u[0] == server).unwrap()[1].as_f64().unwrap();
    assert_eq!((server, compute.len(), clients.len()), (573, 3, 2), "as captured");
    (server, sm, clients)
}

/// Jobs 1001 and 1002 each run one of the H200's MPS clients on GPU 0 (100 %, 600 W).
#[test]
fn jobs_sharing_a_gpu_through_mps_get_their_clients_memory_and_an_even_part_of_its_power() {
    let gib = (1u64 << 30) as f64;
    let (_, sm, clients) = mps_on_the_h200();
    // The captured pids as the bench's: server 573 -> 9999, client 536 -> 1001's 4242, client
    // 535 -> 1002's 6242 (where both run).
    let memory = |pid: u32| clients.iter().find(|(p, _)| *p == pid).unwrap().1;
    let gpus = |both: bool| {
        let mut ours = vec![(4242, memory(536))];
        if both {
            ours.push((6242, memory(535)));
        }
        let mut g = FakeGpu::gpu(0, 100.0).with_mps(9999, sm, &ours);
        g.reading.memory_used = Some(6 << 30);
        vec![g, FakeGpu::gpu(1, 0.0)]
    };
    let server = |b: &Bench| {
        let dir = b._dir.path().join("proc/9999");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cgroup"), "0::/system.slice/nvidia-mps.service\n").unwrap();
    };
    let mut b = bench(gpus(true), GpuConfig::default());
    add_job_1002(&b);
    server(&b);
    let (out, e) = b.collect();
    assert_eq!(e.total(), 0);
    // No client's utilisation can be told: absent, never the server's 96 %.
    assert_eq!(job_of(&out, "1002", &GPU_UTILIZATION), None);
    assert_eq!(job_of(&out, "1002", &GPU_MEMORY_USED), Some(1_883_242_496.0), "its client's, to the byte");
    assert_eq!(job_of(&out, "1002", &GPU_POWER), Some(300.0), "half of 600 W");
    assert_eq!(job_of(&out, "1002", &GPU_IDLE_COUNT), Some(0.0), "its client runs there");
    assert_eq!(job_of(&out, "1001", &GPU_UTILIZATION), Some(0.0), "GPU 1's alone");
    assert_eq!(job_of(&out, "1001", &GPU_MEMORY_USED), Some(2_956_984_320.0 + gib), "+ GPU 1's 1 GiB");
    assert_eq!(job_of(&out, "1001", &GPU_POWER), Some(300.0 + 100.0));

    // 1002 holds GPU 0 but its client has ended: none of the server's work is its.
    *b.gpus.lock().unwrap() = gpus(false);
    let (out, _) = b.collect();
    assert_eq!(job_of(&out, "1002", &GPU_UTILIZATION), Some(0.0));
    assert_eq!(
        (job_of(&out, "1002", &GPU_POWER), job_of(&out, "1002", &GPU_IDLE_COUNT)),
        (Some(0.0), Some(1.0))
    );
    assert_eq!(job_of(&out, "1001", &GPU_POWER), Some(600.0 + 100.0), "the only job with a client there");

    // 1001 alone through MPS: the server works for its client, no stranger; the GPU is 1001's.
    let mut b = bench(gpus(false), GpuConfig::default());
    server(&b);
    let (out, _) = b.collect();
    assert_eq!(job_of(&out, "1001", &GPU_UTILIZATION), Some(50.0), "mean of 100 and 0");
    assert_eq!(job_of(&out, "1001", &GPU_MEMORY_USED), Some(7.0 * gib));
    assert_eq!(job_of(&out, "1001", &GPU_POWER), Some(600.0 + 100.0));
}

/// A job's pid list can be older than the cycle (a subtree its user cut, read every
/// `process_every`), and a pid in it reused since by another job's process. /proc says whose
/// the process is now: job 1002's list still names 4242, which /proc puts in job 1001; none of
/// 4242's figures are 1002's.
#[test]
fn a_gpu_process_is_the_job_proc_says_not_one_whose_old_pid_list_names_it() {
    let gib = (1u64 << 30) as f64;
    let mut b = bench(vec![FakeGpu::gpu(0, 80.0).with_process(4242, 4 << 30, 60.0)], GpuConfig::default());
    add_job_1002(&b);
    let root = b._dir.path().to_owned();
    let scope = root.join("cg/system.slice/slurmstepd.scope");
    std::fs::write(scope.join("job_1002/step_0/user/task_0/cgroup.procs"), "6242\n4242\n").unwrap();
    std::fs::write(
        root.join("proc/4242/cgroup"),
        "0::/system.slice/slurmstepd.scope/job_1001/step_0/user/task_0\n",
    )
    .unwrap();
    let (out, _) = b.collect();
    assert_eq!(job_of(&out, "1001", &GPU_MEMORY_USED), Some(4.0 * gib), "4242 is 1001's");
    assert_eq!(job_of(&out, "1002", &GPU_MEMORY_USED), Some(0.0), "none of it 1002's, sharing GPU 0");
}

/// Job 1002's figures of its GPUs in a batch: its joules.
fn joules(b: &Batch, id: &str) -> Option<f64> {
    b.jobs.iter().find(|j| j.info.id == id).and_then(|j| j.gpus.as_ref()).and_then(|g| g.joules)
}

/// A TaskEpilog's final sample reads every GPU of the node; what it reads of the other jobs'
/// is theirs still. Before, any user could run one a second (`--job-ended`) and so use up the
/// Xid errors of every GPU on the node (never reported) and the windows of its neighbours.
#[test]
fn a_final_sample_leaves_the_other_jobs_errors_and_energy_to_them() {
    let gpus = |xid: u64, mj: u64| {
        let mut g1 = FakeGpu::gpu(1, 50.0).with_process(4242, 1 << 30, 50.0).with_energy_mj(mj);
        g1.reading.xid_errors = xid;
        // GPU 0: 1001 and 1002 each at 40 % of the SMs: half the energy each.
        let g0 = FakeGpu::gpu(0, 80.0)
            .with_process(4242, 1 << 30, 40.0)
            .with_process(6242, 1 << 30, 40.0)
            .with_energy_mj(mj);
        vec![g0, g1]
    };
    let mut b = bench(gpus(0, 1_000_000), GpuConfig::default());
    add_job_1002(&b);
    b.collect();
    // Between collections: GPU 1 (1001's alone) raises two Xid errors, each GPU uses 1,000 J.
    *b.gpus.lock().unwrap() = gpus(2, 2_000_000);
    let mut last = Batch::new(SystemTime::now());
    slurm_cw_shipper::sources::Collector::final_sample(&mut b.collector, "1002", 0, &mut last);
    assert_eq!(joules(&last, "1002"), Some(500.0), "its half of GPU 0's 1,000 J");
    assert_eq!(joules(&last, "1001"), None, "only 1002's figures");
    // Then 500 J more each, and 1001's collection: GPU 1's errors are reported, and 1001 has
    // its half of GPU 0's first 1,000 J as well as of the next 500.
    for g in b.gpus.lock().unwrap().iter_mut() {
        g.reading.energy_mj = Some(2_500_000);
    }
    let (out, _) = b.collect();
    assert_eq!(job_of(&out, "1001", &GPU_XID_ERRORS), Some(2.0), "the errors read by 1002's final sample");
    assert_eq!(joules(&out, "1001"), Some(500.0 + 250.0 + 1_500.0), "GPU 0: 500 + 250; GPU 1: 1,500");
    assert_eq!(joules(&out, "1002"), Some(250.0), "1002 still runs: its half of the last 500 J alone");
}

/// gres/shard as Slurm allocates it: jobs 1001 (6 of GPU 0's 8 shards, a process on it) and
/// 1002 (2 shards, no process yet). Slurm's `shard:6(6/8,0/8)` names GPU 0 for both: each pays
/// half of it, 1002's part is idle, and GPU 0 is not capacity no job holds.
#[test]
fn jobs_slurm_gave_shards_of_a_gpu_hold_it_with_or_without_a_process() {
    use slurm_cw_formats::slurm::job;
    use slurm_cw_shipper::settings::NodeConfig;
    use slurm_cw_shipper::sources::gpu::GpuCollector;
    use slurm_cw_shipper::sources::head::command::SlurmCommands;
    use slurm_cw_shipper::sources::slurm_jobs::SlurmJobs;
    let gpus = vec![FakeGpu::gpu(0, 60.0).with_process(4242, 4 << 30, 60.0), FakeGpu::gpu(1, 0.0)];
    let mut b = bench(gpus, GpuConfig::default());
    add_job_1002(&b);
    let details = [
        "JobId=1001 Account=chemistry Partition=gpu Nodes=g1 CPU_IDs=0-3 Mem=0 GRES=shard:6(6/8,0/8)",
        "JobId=1002 Account=physics Partition=gpu Nodes=g1 CPU_IDs=4 Mem=0 GRES=shard:2(2/8,0/8)",
    ]
    .map(|d| job::parse(d).unwrap());
    let slurm =
        SlurmJobs::answered(SlurmCommands::new(None, std::time::Duration::from_secs(1)), details.to_vec());
    let collector = std::mem::replace(
        &mut b.collector,
        GpuCollector::unavailable(String::new(), GpuConfig::default(), NodeConfig::default(), "x".into()),
    );
    b.collector = collector.with_slurm(slurm);
    let (out, _) = b.collect();
    let billed =
        |id: &str| out.jobs.iter().find(|j| j.info.id == id).and_then(|j| j.gpus.as_ref()).map(|g| g.billed);
    assert_eq!((billed("1001"), billed("1002")), (Some(0.5), Some(0.5)), "GPU 0 between the two");
    assert_eq!(job_of(&out, "1002", &GPU_IDLE_COUNT), Some(1.0), "its shards hold GPU 0, unused");
    let idle = |id: &str| out.jobs.iter().find(|j| j.info.id == id).map(|j| j.gpus_idle(5.0));
    assert_eq!((idle("1001"), idle("1002")), (Some(0.0), Some(0.5)), "half of GPU 0 idle: 1002's half");
    assert_eq!(job_of(&out, "1002", &GPU_UTILIZATION), Some(0.0), "not its neighbour's 60 %");
    let no_job =
        out.samples.iter().find(|s| std::ptr::eq(s.metric, &GPU_NO_JOB_COUNT)).and_then(|s| s.scalar());
    assert_eq!(no_job, Some(1.0), "GPU 1 alone");
}
