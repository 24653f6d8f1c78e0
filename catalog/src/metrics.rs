//! Every metric, once. Add a metric here and it appears in the docs, may be emitted, and can be
//! charted and alarmed on; nothing else in the project spells its name.

use crate::dims::*;
use crate::{Group, Kind, Metric, Role, Unit};

/// Declares each metric as a `pub static` and collects them, in order, into [`ALL`].
macro_rules! catalog {
    ($(
        $group:ident {
            $(
                $id:ident = $name:literal, $unit:ident, $kind:ident, [$($role:ident),+],
                $dims:expr, $help:literal $(, rate_of = $src:ident)? ;
            )*
        }
    )*) => {
        $($(
            pub static $id: Metric = Metric {
                name: $name,
                unit: Unit::$unit,
                kind: Kind::$kind,
                roles: &[$(Role::$role),+],
                dimension_sets: $dims,
                group: Group::$group,
                help: $help,
                rate_of: catalog!(@rate $($src)?),
            };
        )*)*
        /// Every metric, in catalog order.
        pub static ALL: &[&Metric] = &[$($(&$id),*),*];
    };
    (@rate) => { None };
    (@rate $src:ident) => { Some(&$src) };
}

/// `ClusterName` alone.
const CLUSTER: &[&[&str]] = &[&[]];
/// Cluster-wide and per partition.
const CLUSTER_AND_PARTITION: &[&[&str]] = &[&[], &[PARTITION]];
/// Per job; the second set adds per-node detail for multi-node jobs (off by default).
const JOB: &[&[&str]] = &[&[JOB_ID, USER, ACCOUNT], &[JOB_ID, USER, ACCOUNT, NODE_NAME]];
/// Per job and GPU: the default per-job figure, then per-GPU detail by index or by UUID.
const JOB_GPU: &[&[&str]] = &[
    &[JOB_ID, USER, ACCOUNT],
    &[JOB_ID, USER, ACCOUNT, NODE_NAME, GPU],
    &[JOB_ID, USER, ACCOUNT, NODE_NAME, GPU_UUID],
];
/// A host's own figures: across the cluster's hosts (a statistic set: Minimum and Maximum show
/// the outliers), and per host when `self_metrics_per_node` is on.
const HOST: &[&[&str]] = &[&[], &[NODE_NAME]];
/// A host figure of delivery: CloudWatch's as [`HOST`], another destination's with its `Sink`.
const DELIVERY: &[&[&str]] = &[&[], &[NODE_NAME], &[SINK], &[NODE_NAME, SINK]];
/// Across the jobs running on the nodes: per cluster, partition and account, and per user when
/// `node.population_per_user` is on. Never per job: that detail is in the job records. Each
/// account (and user) is billed for every metric it gets: only the key figures go that far.
const POPULATION: &[&[&str]] = &[&[], &[PARTITION], &[ACCOUNT], &[USER]];
/// Dollars, per cluster, partition and account (each node adds its jobs' share; CloudWatch's
/// `Sum` adds the nodes).
const SPEND: &[&[&str]] = &[&[], &[PARTITION], &[ACCOUNT]];
/// Across the jobs running on the nodes, per cluster and partition only: the detail behind the
/// key figures (per account it is one Logs Insights query over the job records away).
const POPULATION_DETAIL: &[&[&str]] = &[&[], &[PARTITION]];

catalog! {
    Nodes {
        NODE_COUNT = "NodeCount", Count, Gauge, [Head],
            &[&[STATE], &[PARTITION, STATE]],
            "Nodes in each primary state, as sinfo names it (allocated, mixed, idle, down, error, drained, draining, completing, fail, failing, maint, reserved, blocked, planned, future, powered_down, powering_up, powering_down, inval, unknown, other for a state this version does not know); the base state unless a flag makes the state (drained, draining, fail, failing, maint, inval, reserved, blocked, planned), and a cloud node's power state over idle, allocated and mixed; a node down in a maintenance reservation (sinfo `down$`) is down, with the maintenance flag. Each node counts once for the cluster and once in every partition it belongs to (per partition only with more than one partition, unless `head.per_partition` is on); drained plus draining is the dashboard's drain view. A state at zero is sent once as it falls to zero, then not until a node is in it again; the cluster's drained count, which an alarm watches, always.";
        NODE_FLAG_COUNT = "NodeFlagCount", Count, Gauge, [Head],
            &[&[FLAG], &[PARTITION, FLAG]],
            "Nodes carrying each state flag (blocked, cloud, completing, drain, dynamic, dynamic_future, dynamic_norm, external, fail, invalid_reg, maintenance, not_responding, perfctrs, planned, power_down, power_up, powered_down, powering_down, powering_up, reboot_issued, reboot_requested, reserved, resume, other for a flag this version does not know); a node may carry several. Shipped only while some node carries the flag.";
        NODES_DOWN_UNPLANNED = "NodesDownUnplanned", Count, Gauge, [Head], &[&[]],
            "Nodes down that no one planned: base state down, outside a maintenance reservation (sinfo `down$`) and not a powered-down cloud node (`down~`, a failed launch ParallelCluster's clustermgtd resets). What the nodes-down alarm watches, so planned maintenance pages no one; NodeCount counts them all.";
    }
    Capacity {
        CPUS_TOTAL = "CpusTotal", Count, Gauge, [Head], CLUSTER_AND_PARTITION,
            "CPUs configured on the nodes.";
        CPUS_ALLOCATED = "CpusAllocated", Count, Gauge, [Head, Node],
            &[&[], &[PARTITION], &[JOB_ID, USER, ACCOUNT], &[JOB_ID, USER, ACCOUNT, NODE_NAME]],
            "CPUs allocated to jobs: cluster and partition totals from sinfo (head); the cores in a job's cpuset (node).";
        CPUS_IDLE = "CpusIdle", Count, Gauge, [Head], CLUSTER_AND_PARTITION,
            "CPUs idle and usable.";
        CPUS_OTHER = "CpusOther", Count, Gauge, [Head], CLUSTER_AND_PARTITION,
            "CPUs neither allocated nor idle: on nodes that are down, drained, powered down or otherwise unusable.";
        GPUS_TOTAL = "GpusTotal", Count, Gauge, [Head], CLUSTER_AND_PARTITION,
            "GPUs configured on the nodes (gres/gpu).";
        GPUS_ALLOCATED = "GpusAllocated", Count, Gauge, [Head], CLUSTER_AND_PARTITION,
            "GPUs allocated to jobs (gres/gpu).";
        MEMORY_TOTAL = "MemoryTotal", Bytes, Gauge, [Head], CLUSTER_AND_PARTITION,
            "Memory configured on the nodes (RealMemory).";
        MEMORY_ALLOCATED = "MemoryAllocated", Bytes, Gauge, [Head], CLUSTER_AND_PARTITION,
            "Memory allocated to jobs.";
    }
    Jobs {
        JOB_COUNT = "JobCount", Count, Gauge, [Head],
            &[&[STATE], &[PARTITION, STATE]],
            "Jobs in each state (pending, running, suspended, completed, cancelled, failed, timeout, node_fail, preempted, boot_fail, deadline, out_of_memory; other for a state this version does not know); each pending array task counts as a job. squeue's text (the default) prints a flag in place of the base state where a job has one, and the job then counts under that flag's name (completing, configuring, expediting, launch_failed, power_up_node, reconfig_fail, requeue_fed, requeue_hold, requeued, resizing, resv_del_hold, revoked, signaling, special_exit, stage_out, stopped, update_db); from `squeue --json` (23.11 and later) a job counts in its base state, and its flags in JobFlagCount either way. A state at zero is sent once as it falls to zero, then not until a job is in it again; the cluster's pending count, which an alarm watches, always.";
        JOB_FLAG_COUNT = "JobFlagCount", Count, Gauge, [Head],
            &[&[FLAG], &[PARTITION, FLAG]],
            "Jobs carrying each state flag (completing, configuring, expediting, launch_failed, power_up_node, reconfig_fail, requeue_fed, requeue_hold, requeued, resizing, resv_del_hold, revoked, signaling, special_exit, stage_out, stopped, update_db, other for a flag this version does not know); completing is a job whose epilog still runs, configuring one whose nodes still boot. Shipped only while some job carries the flag; a small fixed set per cluster and partition.";
        PENDING_JOB_COUNT = "PendingJobCount", Count, Gauge, [Head],
            &[&[REASON], &[PARTITION, REASON]],
            "Pending jobs by Slurm's reason code (Resources, Priority, Dependency, ReqNodeNotAvail, QOSMaxJobsPerUserLimit, ...): `state_reason` of squeue --json; where squeue's text prints a description instead (`Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions`, `ReqNodeNotAvail, UnavailableNodes:...`), the code slurmctld set with it, and Other for a description the shipper does not know. The top reasons by count, the rest as Other.";
        PENDING_CPUS = "PendingCpus", Count, Gauge, [Head], CLUSTER_AND_PARTITION,
            "CPUs requested by pending jobs that could start if resources were free (not held, not waiting for a dependency, a begin time, a limit or a partition).";
        PENDING_GPUS = "PendingGpus", Count, Gauge, [Head], CLUSTER_AND_PARTITION,
            "GPUs requested by pending jobs that could start if resources were free.";
        PENDING_NODES = "PendingNodes", Count, Gauge, [Head], CLUSTER_AND_PARTITION,
            "Nodes (minimum count) requested by pending jobs that could start if resources were free.";
        RUNNING_CPUS = "RunningCpus", Count, Gauge, [Head], CLUSTER_AND_PARTITION,
            "CPUs held by running jobs.";
        RUNNING_GPUS = "RunningGpus", Count, Gauge, [Head], CLUSTER_AND_PARTITION,
            "GPUs held by running jobs.";
    }
    Scheduler {
        SERVER_THREAD_COUNT = "ServerThreadCount", Count, Gauge, [Head], CLUSTER,
            "slurmctld threads serving RPCs; near the limit (256) means slurmctld is overloaded.";
        AGENT_QUEUE_SIZE = "AgentQueueSize", Count, Gauge, [Head], CLUSTER,
            "Outgoing RPCs queued for slurmctld's agents.";
        AGENT_COUNT = "AgentCount", Count, Gauge, [Head], CLUSTER,
            "slurmctld agents running.";
        AGENT_THREAD_COUNT = "AgentThreadCount", Count, Gauge, [Head], CLUSTER,
            "Threads used by slurmctld's agents.";
        DBD_AGENT_QUEUE_SIZE = "DbdAgentQueueSize", Count, Gauge, [Head], CLUSTER,
            "Messages queued for slurmdbd; growth means the accounting database is not keeping up.";
        JOBS_SUBMITTED = "JobsSubmitted", Count, Counter, [Head], CLUSTER,
            "Jobs submitted since the statistics were last reset (midnight UTC, restart, sdiag --reset).";
        JOBS_STARTED = "JobsStarted", Count, Counter, [Head], CLUSTER,
            "Jobs started since the statistics were last reset.";
        JOBS_COMPLETED = "JobsCompleted", Count, Counter, [Head], CLUSTER,
            "Jobs completed since the statistics were last reset.";
        JOBS_CANCELED = "JobsCanceled", Count, Counter, [Head], CLUSTER,
            "Jobs cancelled since the statistics were last reset.";
        JOBS_FAILED = "JobsFailed", Count, Counter, [Head], CLUSTER,
            "Jobs failed since the statistics were last reset.";
        JOBS_PENDING = "JobsPending", Count, Gauge, [Head], CLUSTER,
            "Jobs pending, as sdiag counted them at its last update.";
        JOBS_RUNNING = "JobsRunning", Count, Gauge, [Head], CLUSTER,
            "Jobs running, as sdiag counted them at its last update.";
        MAIN_SCHED_LAST_CYCLE = "MainSchedLastCycle", Microseconds, Gauge, [Head], CLUSTER,
            "Duration of the main scheduler's last cycle.";
        MAIN_SCHED_MAX_CYCLE = "MainSchedMaxCycle", Microseconds, Gauge, [Head], CLUSTER,
            "Longest main scheduler cycle since the statistics were last reset.";
        MAIN_SCHED_TOTAL_CYCLES = "MainSchedTotalCycles", Count, Counter, [Head], CLUSTER,
            "Main scheduler cycles since the statistics were last reset.";
        MAIN_SCHED_MEAN_CYCLE = "MainSchedMeanCycle", Microseconds, Gauge, [Head], CLUSTER,
            "Mean main scheduler cycle duration.";
        MAIN_SCHED_MEAN_DEPTH = "MainSchedMeanDepth", Count, Gauge, [Head], CLUSTER,
            "Mean number of jobs the main scheduler looked at per cycle.";
        MAIN_SCHED_CYCLES_PER_MINUTE = "MainSchedCyclesPerMinute", Count, Gauge, [Head], CLUSTER,
            "Main scheduler cycles per minute, as sdiag reports it.";
        MAIN_SCHED_LAST_QUEUE_LENGTH = "MainSchedLastQueueLength", Count, Gauge, [Head], CLUSTER,
            "Jobs in the queue at the main scheduler's last cycle.";
        BACKFILL_JOBS_SINCE_START = "BackfillJobsSinceStart", Count, Counter, [Head], CLUSTER,
            "Jobs started by the backfill scheduler since slurmctld started.";
        BACKFILL_JOBS_SINCE_CYCLE_START = "BackfillJobsSinceCycleStart", Count, Counter, [Head], CLUSTER,
            "Jobs started by the backfill scheduler since the statistics were last reset.";
        BACKFILL_TOTAL_CYCLES = "BackfillTotalCycles", Count, Counter, [Head], CLUSTER,
            "Backfill cycles since the statistics were last reset.";
        BACKFILL_LAST_CYCLE = "BackfillLastCycle", Microseconds, Gauge, [Head], CLUSTER,
            "Duration of the last backfill cycle.";
        BACKFILL_MAX_CYCLE = "BackfillMaxCycle", Microseconds, Gauge, [Head], CLUSTER,
            "Longest backfill cycle since the statistics were last reset.";
        BACKFILL_MEAN_CYCLE = "BackfillMeanCycle", Microseconds, Gauge, [Head], CLUSTER,
            "Mean backfill cycle duration.";
        BACKFILL_LAST_DEPTH = "BackfillLastDepth", Count, Gauge, [Head], CLUSTER,
            "Jobs the last backfill cycle considered.";
        BACKFILL_LAST_DEPTH_TRY = "BackfillLastDepthTry", Count, Gauge, [Head], CLUSTER,
            "Jobs the last backfill cycle tried to schedule (those with resources that could start).";
        BACKFILL_DEPTH_MEAN = "BackfillDepthMean", Count, Gauge, [Head], CLUSTER,
            "Mean number of jobs considered per backfill cycle.";
        BACKFILL_DEPTH_MEAN_TRY = "BackfillDepthMeanTry", Count, Gauge, [Head], CLUSTER,
            "Mean number of jobs tried per backfill cycle.";
        BACKFILL_QUEUE_LENGTH = "BackfillQueueLength", Count, Gauge, [Head], CLUSTER,
            "Jobs pending in the backfill queue at the last cycle.";
        BACKFILL_QUEUE_LENGTH_MEAN = "BackfillQueueLengthMean", Count, Gauge, [Head], CLUSTER,
            "Mean backfill queue length.";
        RPC_COUNT = "RpcCount", Count, Counter, [Head], &[&[MESSAGE_TYPE]],
            "RPCs slurmctld served, by message type (the top types by count), since the statistics were last reset.";
        RPC_TOTAL_TIME = "RpcTotalTime", Microseconds, Counter, [Head], &[&[MESSAGE_TYPE]],
            "Total time slurmctld spent on RPCs, by message type (the top types by count), since the statistics were last reset.";
        PENDING_RPCS = "PendingRpcs", Count, Gauge, [Head], CLUSTER,
            "RPCs queued in slurmctld waiting to be sent to nodes.";
    }
    Health {
        SLURMCTLD_UP = "SlurmctldUp", Count, Gauge, [Head], CLUSTER,
            "1 when slurmctld answered this cycle, 0 when it failed or timed out.";
        SLURMCTLD_RESPONSE_TIME = "SlurmctldResponseTime", Milliseconds, Gauge, [Head], CLUSTER,
            "Time slurmctld took to answer sdiag (or, without sdiag, sinfo).";
        COLLECTOR_ERRORS = "CollectorErrors", Count, Gauge, [Head, Node], &[&[COLLECTOR], &[NODE_NAME, COLLECTOR]],
            "Errors in a collector during the interval: a command that failed or timed out, a file that could not be read, output that could not be parsed.";
    }
    JobMemory {
        MEMORY_USAGE = "MemoryUsage", Bytes, Gauge, [Node], JOB,
            "Memory charged to the job's cgroup, page cache included (v1 memory.usage_in_bytes, v2 memory.current).";
        MEMORY_MAX = "MemoryMax", Bytes, Gauge, [Node], JOB,
            "Peak memory charged to the job's cgroup (v1 memory.max_usage_in_bytes, v2 memory.peak).";
        MEMORY_LIMIT = "MemoryLimit", Bytes, Gauge, [Node], JOB,
            "The job's memory limit (v1 memory.limit_in_bytes, v2 memory.max); absent when unlimited.";
        MEMORY_CACHE = "MemoryCache", Bytes, Gauge, [Node], JOB,
            "Page cache charged to the job (v1 total_cache, v2 file).";
        MEMORY_RSS = "MemoryRss", Bytes, Gauge, [Node], JOB,
            "Anonymous memory of the job: what it really allocated (v1 total_rss, v2 anon).";
        MEMORY_RSS_HUGE = "MemoryRssHuge", Bytes, Gauge, [Node], JOB,
            "Anonymous memory in transparent huge pages (v1 total_rss_huge, v2 anon_thp).";
        MEMORY_MAPPED_FILE = "MemoryMappedFile", Bytes, Gauge, [Node], JOB,
            "Memory-mapped files (v1 total_mapped_file, v2 file_mapped).";
        MEMORY_ACTIVE_FILE = "MemoryActiveFile", Bytes, Gauge, [Node], JOB,
            "Recently used page cache, hard to reclaim (active_file).";
        MEMORY_INACTIVE_FILE = "MemoryInactiveFile", Bytes, Gauge, [Node], JOB,
            "Page cache that can be reclaimed first (inactive_file).";
        MEMORY_UNEVICTABLE = "MemoryUnevictable", Bytes, Gauge, [Node], JOB,
            "Memory that cannot be reclaimed (mlocked, ramfs).";
        MEMORY_SWAP = "MemorySwap", Bytes, Gauge, [Node], JOB,
            "Swap used by the job (v1 total_swap, v2 memory.swap.current).";
        OOM_KILLS = "OomKills", Count, Gauge, [Node], JOB,
            "Processes of the job killed by the OOM killer so far (v2 memory.events oom_kill; v1 memory.oom_control oom_kill).";
    }
    JobCpu {
        CPU_USAGE = "CpuUsage", Count, Gauge, [Node], JOB,
            "Cores the job kept busy over the interval (CPU seconds per second).";
        CPU_TIME = "CpuTime", Seconds, Gauge, [Node], JOB,
            "CPU time the job has used on this node since it started (its cgroup's counter): the job summary's CpuSeconds.";
        CPU_UTILIZATION = "CpuUtilization", Percent, Gauge, [Node], JOB,
            "CpuUsage as a percentage of the job's allocated cores.";
        CPU_THROTTLED_TIME = "CpuThrottledTime", Seconds, Gauge, [Node], JOB,
            "Seconds per second the job's tasks were throttled by the CPU controller (cpu.stat), where the kernel reports it.";
        CPU_CORE_UTILIZATION = "CpuCoreUtilization", Percent, Gauge, [Node], JOB,
            "Spread of busy percentage over the job's allocated cores, as one Values/Counts datum (v1 cpuacct.usage_percpu; cgroup v2 has no per-CPU figure, so v2 jobs do not have it).";
    }
    JobProcesses {
        PROCESS_COUNT = "ProcessCount", Count, Gauge, [Node], JOB,
            "Processes in the job's cgroups.";
        THREAD_COUNT = "ThreadCount", Count, Gauge, [Node],
            &[&[JOB_ID, USER, ACCOUNT, THREAD_STATE], &[JOB_ID, USER, ACCOUNT, NODE_NAME, THREAD_STATE]],
            "Threads of the job's processes by state (running, sleeping, disk_sleep, stopped, zombie, idle, other).";
        OPEN_FILES = "OpenFiles", Count, Gauge, [Node], JOB,
            "File descriptors open in the job's processes (before Linux 6.2, where they are listed, at most 65,536 counted a process).";
        PROCESS_CPU_USAGE = "ProcessCpuUsage", Count, Gauge, [Node],
            &[&[JOB_ID, USER, ACCOUNT, EXECUTABLE], &[JOB_ID, USER, ACCOUNT, NODE_NAME, EXECUTABLE]],
            "Cores kept busy by the job's top executables (by CPU over the interval); names past a job's first 4 x node.top_executables are summed as (others).";
        JOBS_ON_NODE = "JobsOnNode", Count, Gauge, [Node], HOST,
            "Jobs with a cgroup on this node.";
    }
    JobIo {
        READ_BYTES = "ReadBytes", BytesPerSecond, Gauge, [Node], JOB,
            "Bytes the job read per second over the interval (cgroup blkio/io.stat where Slurm populates it, else the sum of its processes' /proc/<pid>/io read_bytes).";
        WRITE_BYTES = "WriteBytes", BytesPerSecond, Gauge, [Node], JOB,
            "Bytes the job wrote per second over the interval (cgroup blkio/io.stat where Slurm populates it, else the sum of its processes' /proc/<pid>/io write_bytes).";
        READ_OPS = "ReadOps", CountPerSecond, Gauge, [Node], JOB,
            "Read operations per second over the interval (io.stat rios, else /proc/<pid>/io syscr).";
        WRITE_OPS = "WriteOps", CountPerSecond, Gauge, [Node], JOB,
            "Write operations per second over the interval (io.stat wios, else /proc/<pid>/io syscw).";
    }
    Gpu {
        GPU_COUNT = "GpuCount", Count, Gauge, [Node], JOB,
            "GPUs (or MIG instances) allocated to the job on this node.";
        GPU_IDLE_COUNT = "GpuIdleCount", Count, Gauge, [Node], JOB,
            "GPUs allocated to the job that run none of its processes: held and idle.";
        GPU_UTILIZATION = "GpuUtilization", Percent, Gauge, [Node], JOB_GPU,
            "Time a kernel was running on the GPU over the sample period (NVML utilization.gpu).";
        GPU_MEMORY_UTILIZATION = "GpuMemoryUtilization", Percent, Gauge, [Node], JOB_GPU,
            "Time device memory was being read or written (NVML utilization.memory).";
        GPU_MEMORY_USED = "GpuMemoryUsed", Bytes, Gauge, [Node], JOB_GPU,
            "Device memory in use on the job's GPUs.";
        GPU_MEMORY_TOTAL = "GpuMemoryTotal", Bytes, Gauge, [Node], JOB_GPU,
            "Device memory on the job's GPUs.";
        GPU_POWER = "GpuPower", None, Gauge, [Node], JOB_GPU,
            "Power draw of the job's GPUs, in watts.";
        GPU_TEMPERATURE = "GpuTemperature", None, Gauge, [Node], JOB_GPU,
            "GPU core temperature, in degrees Celsius (the hottest of the job's GPUs in the per-job figure).";
        GPU_SM_CLOCK = "GpuSmClock", None, Gauge, [Node], JOB_GPU,
            "SM clock, in MHz.";
        GPU_ECC_ERRORS = "GpuEccErrors", Count, Gauge, [Node], JOB_GPU,
            "Uncorrected ECC errors since the driver loaded (volatile counter).";
        GPU_XID_ERRORS = "GpuXidErrors", Count, Gauge, [Node], JOB_GPU,
            "Xid critical errors reported by the driver during the interval.";
        GPU_THROTTLE_REASONS = "GpuThrottleReasons", Count, Gauge, [Node], JOB_GPU,
            "Clock throttle reasons active other than idle and application settings (power, thermal, sync boost...), as a count of distinct reasons.";
        GPU_NO_JOB_COUNT = "GpuNoJobCount", Count, Gauge, [Node], HOST,
            "GPUs (or MIG instances) on this node allocated to no job: idle capacity.";
        GPU_ERRORS = "GpuErrors", Count, Gauge, [Node], HOST,
            "NVML errors on this node's GPUs during the interval (a GPU fallen off the bus, a failed query).";
    }
    GpuProfiling {
        GPU_SM_ACTIVITY = "GpuSmActivity", Percent, Gauge, [Node], JOB_GPU,
            "Share of time SMs had at least one warp assigned (GPM SM activity).";
        GPU_SM_OCCUPANCY = "GpuSmOccupancy", Percent, Gauge, [Node], JOB_GPU,
            "Warps resident on SMs relative to the maximum (GPM SM occupancy).";
        GPU_TENSOR_ACTIVITY = "GpuTensorActivity", Percent, Gauge, [Node], JOB_GPU,
            "Share of time any tensor pipe was active (GPM).";
        GPU_FP64_ACTIVITY = "GpuFp64Activity", Percent, Gauge, [Node], JOB_GPU,
            "Share of time the FP64 pipe was active (GPM).";
        GPU_FP32_ACTIVITY = "GpuFp32Activity", Percent, Gauge, [Node], JOB_GPU,
            "Share of time the FP32 pipe was active (GPM).";
        GPU_FP16_ACTIVITY = "GpuFp16Activity", Percent, Gauge, [Node], JOB_GPU,
            "Share of time the FP16 pipe was active (GPM).";
        GPU_DRAM_ACTIVITY = "GpuDramActivity", Percent, Gauge, [Node], JOB_GPU,
            "Device memory bandwidth used, as a share of the peak (GPM).";
        GPU_PCIE_TX_BYTES = "GpuPcieTxBytes", BytesPerSecond, Gauge, [Node], JOB_GPU,
            "PCIe bytes sent by the GPU per second (GPM).";
        GPU_PCIE_RX_BYTES = "GpuPcieRxBytes", BytesPerSecond, Gauge, [Node], JOB_GPU,
            "PCIe bytes received by the GPU per second (GPM).";
        GPU_NVLINK_TX_BYTES = "GpuNvlinkTxBytes", BytesPerSecond, Gauge, [Node], JOB_GPU,
            "NVLink bytes sent per second, all links (GPM).";
        GPU_NVLINK_RX_BYTES = "GpuNvlinkRxBytes", BytesPerSecond, Gauge, [Node], JOB_GPU,
            "NVLink bytes received per second, all links (GPM).";
    }
    JobPopulation {
        JOB_ALLOCATIONS = "JobAllocations", Count, Total, [Node], POPULATION,
            "Jobs running on the nodes (a job on k nodes counts k times).";
        JOB_CPU_EFFICIENCY = "JobCpuEfficiency", Percent, Gauge, [Node], POPULATION,
            "Each job's CPU use as a percentage of its allocated cores, one value per job and sample (Values/Counts: use percentiles).";
        JOB_MEMORY_USED = "JobMemoryUsed", Bytes, Gauge, [Node], POPULATION,
            "Each job's memory in use (cgroup, or its processes' RSS where Slurm keeps no memory cgroup), one value per job and sample.";
        JOB_MEMORY_PEAK_SHARE = "JobMemoryPeakShare", Percent, Gauge, [Node], POPULATION_DETAIL,
            "Each job's peak memory as a percentage of its memory limit, one value per job and sample.";
        JOB_GPU_UTILIZATION = "JobGpuUtilization", Percent, Gauge, [Node], POPULATION,
            "Each GPU job's mean GPU utilisation, one value per job and sample.";
        JOB_CORES_USED = "JobCoresUsed", Count, Total, [Node], POPULATION_DETAIL,
            "Cores busy with the jobs' work, summed over jobs.";
        JOB_CORES_ALLOCATED = "JobCoresAllocated", Count, Total, [Node], POPULATION_DETAIL,
            "Cores allocated to the jobs (their cpusets), summed over jobs.";
        JOB_GPUS_IDLE = "JobGpusIdle", Count, Total, [Node], POPULATION_DETAIL,
            "GPUs allocated to jobs that ran none of the job's work or sat under the idle threshold; a GPU Slurm gave several jobs (gres/shard, gres/mps) counts by each job's part of it, so the node's total is of GPUs, not of jobs.";
        IDLE_GPU_JOBS = "IdleGpuJobs", Count, Total, [Node], POPULATION,
            "Jobs whose GPUs all stayed under the idle threshold for the idle window (node.findings).";
        LOW_CPU_EFFICIENCY_JOBS = "LowCpuEfficiencyJobs", Count, Total, [Node], POPULATION_DETAIL,
            "Jobs whose CPU efficiency stayed under the threshold for the whole window (node.findings).";
        MEMORY_OVER_REQUESTED_JOBS = "MemoryOverRequestedJobs", Count, Total, [Node], POPULATION_DETAIL,
            "Jobs whose peak memory stayed under a threshold share of their memory limit for the whole window (node.findings).";
        JOB_COST = "JobCost", None, Increase, [Node], SPEND,
            "US dollars the jobs' node time cost during the period: each node adds what its jobs accrued since its last flush (price x share x hours, see *What jobs cost*); Sum over a period is the spend, per account and partition.";
        JOB_WASTE = "JobWaste", None, Increase, [Node], SPEND,
            "US dollars of JobCost wasted by the rule (the unused part of the resource that set the job's share), added as jobs run and end; Sum over a period.";
        JOB_RECORDS = "JobRecords", Count, Total, [Head, Node], &[&[]],
            "Records written to the job log group: job samples, summaries and findings, node samples (node_sample), and the head's scheduler samples (scheduler_sample).";
    }
    NodeHardware {
        FABRIC_RX_BYTES = "FabricRxBytes", BytesPerSecond, Total, [Node], HOST,
            "Bytes a node received per second over EFA or InfiniBand, all devices and ports (EFA hw_counters rx_bytes; InfiniBand port_rcv_data x 4). One value per node and flush: Sum is the cluster's traffic, Average a node's, Maximum the busiest node's.";
        FABRIC_TX_BYTES = "FabricTxBytes", BytesPerSecond, Total, [Node], HOST,
            "Bytes a node sent per second over EFA or InfiniBand, all devices and ports (EFA hw_counters tx_bytes; InfiniBand port_xmit_data x 4).";
        FABRIC_ERRORS = "FabricErrors", Count, Gauge, [Node], HOST,
            "Packets dropped and errors counted on a node's EFA or InfiniBand ports during the interval (EFA rx_drops, rdma_read_wr_err, rdma_write_wr_err; InfiniBand symbol, receive, discard, link and buffer errors); Sum is the cluster's.";
        LUSTRE_READ_BYTES = "LustreReadBytes", BytesPerSecond, Total, [Node], HOST,
            "Bytes a node read per second from Lustre (FSx for Lustre), all its mounts (llite stats read_bytes).";
        LUSTRE_WRITE_BYTES = "LustreWriteBytes", BytesPerSecond, Total, [Node], HOST,
            "Bytes a node wrote per second to Lustre (FSx for Lustre), all its mounts (llite stats write_bytes).";
        LUSTRE_METADATA_OPS = "LustreMetadataOps", CountPerSecond, Total, [Node], HOST,
            "Metadata operations per second a node made on Lustre: open, close, getattr, setattr, truncate, create, link, unlink, symlink, mkdir, rmdir, mknod, rename, readdir, statfs and xattr calls (llite stats).";
        CPU_PACKAGE_POWER = "CpuPackagePower", None, Total, [Node], HOST,
            "Power a node's CPU packages drew, in watts, from the RAPL energy counters of the package zones (/sys/class/powercap/intel-rapl:N; metal instances expose them).";
    }
    Derived {
        JOBS_SUBMITTED_RATE = "JobsSubmittedRate", Count, Increase, [Head], CLUSTER,
            "Jobs submitted, reset-aware.", rate_of = JOBS_SUBMITTED;
        JOBS_STARTED_RATE = "JobsStartedRate", Count, Increase, [Head], CLUSTER,
            "Jobs started, reset-aware.", rate_of = JOBS_STARTED;
        JOBS_COMPLETED_RATE = "JobsCompletedRate", Count, Increase, [Head], CLUSTER,
            "Jobs completed, reset-aware.", rate_of = JOBS_COMPLETED;
        JOBS_CANCELED_RATE = "JobsCanceledRate", Count, Increase, [Head], CLUSTER,
            "Jobs cancelled, reset-aware.", rate_of = JOBS_CANCELED;
        JOBS_FAILED_RATE = "JobsFailedRate", Count, Increase, [Head], CLUSTER,
            "Jobs failed, reset-aware.", rate_of = JOBS_FAILED;
        MAIN_SCHED_CYCLES_RATE = "MainSchedCyclesRate", Count, Increase, [Head], CLUSTER,
            "Main scheduler cycles, reset-aware.", rate_of = MAIN_SCHED_TOTAL_CYCLES;
        BACKFILL_JOBS_RATE = "BackfillJobsRate", Count, Increase, [Head], CLUSTER,
            "Jobs started by backfill, reset-aware.", rate_of = BACKFILL_JOBS_SINCE_START;
        BACKFILL_CYCLE_JOBS_RATE = "BackfillCycleJobsRate", Count, Increase, [Head], CLUSTER,
            "Jobs started by backfill, from the counter that resets with the statistics; a cross-check of BackfillJobsRate.", rate_of = BACKFILL_JOBS_SINCE_CYCLE_START;
        BACKFILL_CYCLES_RATE = "BackfillCyclesRate", Count, Increase, [Head], CLUSTER,
            "Backfill cycles, reset-aware.", rate_of = BACKFILL_TOTAL_CYCLES;
        RPC_RATE = "RpcRate", Count, Increase, [Head], &[&[MESSAGE_TYPE]],
            "RPCs by message type, reset-aware.", rate_of = RPC_COUNT;
        RPC_TIME_RATE = "RpcTimeRate", Microseconds, Increase, [Head], &[&[MESSAGE_TYPE]],
            "Time slurmctld spent on RPCs, by message type, reset-aware.", rate_of = RPC_TOTAL_TIME;
        CLUSTER_CPU_UTILIZATION = "ClusterCpuUtilization", Percent, Gauge, [Head], CLUSTER_AND_PARTITION,
            "CpusAllocated as a percentage of CpusTotal.";
        CLUSTER_GPU_UTILIZATION = "ClusterGpuUtilization", Percent, Gauge, [Head], CLUSTER_AND_PARTITION,
            "GpusAllocated as a percentage of GpusTotal.";
        GPU_HOURS_IDLE = "GpuHoursIdle", None, Gauge, [Lambda], CLUSTER,
            "GPU-hours held by jobs and left idle during the minute, from JobGpusIdle.";
        CLUSTER_CPU_EFFICIENCY = "ClusterCpuEfficiency", Percent, Gauge, [Lambda], CLUSTER_AND_PARTITION,
            "Cores the jobs used as a percentage of the cores allocated to them (JobCoresUsed over JobCoresAllocated).";
        BACKLOG_NODES = "BacklogNodes", Count, Gauge, [Head], &[&[PARTITION]],
            "Nodes the pending demand of a partition would need beyond its idle nodes: the autoscaling signal.";
        IDLE_NODES = "IdleNodes", Count, Gauge, [Head], &[&[PARTITION]],
            "Idle nodes in a partition, net of pending demand.";
    }
    Shipper {
        SHIPPER_DATUMS_SENT = "ShipperDatumsSent", Count, Gauge, [Shipper], DELIVERY,
            "Datums a destination accepted from this shipper during the flush interval: CloudWatch's without `Sink`, another destination's (otlp, prometheus) with it.";
        SHIPPER_DATUMS_DROPPED = "ShipperDatumsDropped", Count, Gauge, [Shipper],
            &[&[REASON], &[], &[NODE_NAME, REASON], &[SINK, REASON], &[NODE_NAME, SINK, REASON]],
            "Datums dropped during the interval, by reason (non_finite, out_of_range, bad_dimension, too_many_dimensions, timestamp, rejected, queue_full, spool_full, not_listening: the Prometheus endpoint could not bind its address, ...) per host (another destination than CloudWatch's with its `Sink`); with ClusterName alone, the sum over reasons and destinations from every host (what the alarm watches).";
        SHIPPER_REQUESTS = "ShipperRequests", Count, Gauge, [Shipper], DELIVERY,
            "PutMetricData requests sent during the interval, retries included.";
        SHIPPER_RETRIES = "ShipperRetries", Count, Gauge, [Shipper], DELIVERY,
            "PutMetricData retries during the interval (throttling, 5xx, network errors).";
        SHIPPER_BYTES_SENT = "ShipperBytesSent", Bytes, Gauge, [Shipper], DELIVERY,
            "Uncompressed size of the PutMetricData requests sent during the interval.";
        SHIPPER_COLLECTION_DURATION = "ShipperCollectionDuration", Milliseconds, Gauge, [Shipper],
            &[&[COLLECTOR], &[NODE_NAME, COLLECTOR]],
            "Wall time one collection took, per collector.";
        SHIPPER_COLLECTIONS_MISSED = "ShipperCollectionsMissed", Count, Gauge, [Shipper], HOST,
            "Collections skipped during the interval because the one before had not finished (a read that hung: an NFS-backed /proc, a GPU that does not answer). Delivery and the hook go on meanwhile.";
        SHIPPER_SPOOL_BYTES = "ShipperSpoolBytes", Bytes, Gauge, [Shipper], DELIVERY,
            "Bytes of flushes waiting in the disk spool (CloudWatch not reached yet).";
        SHIPPER_SPOOL_FILES = "ShipperSpoolFiles", Count, Gauge, [Shipper], DELIVERY,
            "Flushes waiting in the disk spool.";
        SHIPPER_CPU_USAGE = "ShipperCpuUsage", Percent, Gauge, [Shipper], HOST,
            "CPU the shipper itself used, as a percentage of one core.";
        SHIPPER_MEMORY_RSS = "ShipperMemoryRss", Bytes, Gauge, [Shipper], HOST,
            "Resident memory of the shipper itself.";
    }
}
