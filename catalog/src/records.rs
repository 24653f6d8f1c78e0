//! The job records: per-job detail, written as JSON events to a CloudWatch Logs group (one
//! stream per node) instead of per-job custom metrics, because a log event is billed by its
//! bytes and a custom metric by the hour for every job.
//!
//! Three types of record (the `Type` field): a sample of a job per flush, a summary when a job
//! ends on a node, and a finding once per job and kind. A sample's figures are keyed by their
//! catalog metric names (`MemoryRss`, `CpuUsage`, ...); a metric with a further dimension
//! (`ThreadCount` by `ThreadState`) is an object keyed by that value, and each GPU's figures of
//! a job on several GPUs are in `PerGpu`. The other fields are named here, once.

use std::fmt::Write;

/// A record field: its name and what it holds.
#[derive(Debug, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub help: &'static str,
}

macro_rules! fields {
    ($($id:ident = $name:expr, $help:literal;)*) => {
        $(pub static $id: Field = Field { name: $name, help: $help };)*
        /// Every field, in the order the docs list them.
        pub static ALL_FIELDS: &[&Field] = &[$(&$id),*];
    };
}

/// Values of [`TYPE`].
pub mod kinds {
    pub const JOB_SAMPLE: &str = "job_sample";
    pub const JOB_SUMMARY: &str = "job_summary";
    pub const JOB_FINDING: &str = "job_finding";
    /// A node's own figures (fabric, Lustre, CPU power) over one flush.
    pub const NODE_SAMPLE: &str = "node_sample";
    /// The head's scheduler figures that no view reads, over one flush.
    pub const SCHEDULER_SAMPLE: &str = "scheduler_sample";
}

/// Values of [`FINDING`].
pub mod findings {
    pub const IDLE_GPU: &str = "idle_gpu";
    pub const LOW_CPU_EFFICIENCY: &str = "low_cpu_efficiency";
    pub const MEMORY_OVER_REQUESTED: &str = "memory_over_requested";
    pub const GPU_MEMORY_UNDERUSED: &str = "gpu_memory_underused";
}

/// Values of [`ENDED_BY`].
pub mod endings {
    /// The TaskEpilog asked for the job's final sample.
    pub const TASK_EPILOG: &str = "task_epilog";
    /// The job's cgroup was gone at a collection.
    pub const CGROUP_GONE: &str = "cgroup_gone";
}

use crate::dims;

fields! {
    TYPE = "Type", "job_sample, job_summary, job_finding, node_sample or scheduler_sample.";
    RECORD_ID = "RecordId", "Unique per record; a record delivered twice (at-least-once delivery) has the same id. A summary's id is the same for every summary of a job's run on a node (`<node>:<job>:<run>:summary`, the run being the job's Slurm start in epoch seconds, else when the node first saw it): the latest one wins. A job Slurm requeues onto a node of the same name is a new run, with its own summaries and findings.";
    TIME = "Time", "When the record was made (RFC 3339); the log event carries the same time.";
    CLUSTER_NAME = dims::CLUSTER_NAME, "The cluster.";
    NODE_NAME = dims::NODE_NAME, "The node that wrote the record.";
    JOB_ID = dims::JOB_ID, "The Slurm job id (array tasks as <array job>_<task> where Slurm names them so).";
    USER = dims::USER, "The job's user, from the cgroup path or the job processes' real uid (never root's own processes), else Slurm's `user_id`.";
    ACCOUNT = dims::ACCOUNT, "The job's Slurm account, or `unknown`.";
    PARTITION = dims::PARTITION, "The job's partition, or `unknown`.";
    ARRAY_TASK = "ArrayTask", "An array task's name, `<array job>_<task>`, as Slurm gives it (`report 1000_5` finds the task by it). Absent for other jobs.";
    HET_COMPONENT = "HetComponent", "A heterogeneous job component's name, `<het job>+<offset>`, as Slurm gives it. Absent for other jobs.";
    SLUID = "Sluid", "Slurm 26.05's unique job id (`SLURM_JOB_SLUID`), as Slurm gives it; the job's cgroup v2 directory is named by it unless cgroup.conf sets `CgroupJobIdPaths=yes`. Absent before 26.05.";
    SAMPLES = "Samples", "Collections the record covers.";
    FIRST_SEEN = "FirstSeen", "Summary: when this node first saw the job (RFC 3339).";
    LAST_SEEN = "LastSeen", "Summary: when this node last saw the job (RFC 3339).";
    ELAPSED_SECONDS = "ElapsedSeconds", "Summary: LastSeen minus FirstSeen; a job shorter than one collection interval shows 0 unless its TaskEpilog asked for a final sample.";
    CPU_SECONDS = "CpuSeconds", "Summary: CPU time the job used on this node, from its cgroup's counter (or its processes').";
    CORES_ALLOCATED = "CoresAllocated", "Summary: cores in the job's cpuset on this node.";
    CPU_EFFICIENCY = "CpuEfficiency", "Summary: CpuSeconds over CoresAllocated x ElapsedSeconds, in percent.";
    MEMORY_PEAK = "MemoryPeakBytes", "Summary: the job's peak memory on this node (cgroup high-water mark, or the largest RSS seen).";
    MEMORY_REQUESTED = "MemoryRequestedBytes", "Summary: the job's memory limit on this node.";
    MEMORY_PEAK_PERCENT = "MemoryPeakPercent", "Summary: MemoryPeakBytes over MemoryRequestedBytes, in percent.";
    GPUS = "Gpus", "Summary: GPUs the job held on this node.";
    GPU_HOURS = "GpuHours", "Summary: GPU-hours the job held on this node (a GPU it shared with other jobs by its part of it).";
    GPU_IDLE_PERCENT = "GpuIdlePercent", "Summary: share of GpuHours during which the GPU sat idle.";
    GPU_MEMORY_PEAK = "GpuMemoryPeakBytes", "Summary: the most memory the job's GPUs on this node held together at one collection (NVML's used memory of each GPU it holds, summed).";
    GPU_MEMORY_TOTAL = "GpuMemoryTotalBytes", "Summary: the memory of the GPUs the job held on this node, together (the largest seen).";
    GPU_MEMORY_PEAK_PERCENT = "GpuMemoryPeakPercent", "Summary: GpuMemoryPeakBytes over GpuMemoryTotalBytes, in percent: how much of the GPUs' memory the job needed at most (a job holding a 141 GB GPU that peaks at 2 GB: 1.4).";
    GPU_ENERGY_KWH = "GpuEnergyKwh", "Summary: energy the job's GPUs used on this node, in kWh, from NVML's total energy counters (Volta and newer; not per MIG instance) between collections while the job held them, a GPU shared by jobs split by their processes' SM utilisation (evenly where NVML gives none); counted from zero after a driver reload. Absent where no GPU of the job reports it.";
    PER_GPU = "PerGpu", "Sample and summary of a job holding more than one GPU or MIG instance on this node: an object by GPU (its index, `0/3` for GPU instance 3 of GPU 0, or its UUID where gpu.uuid_dimension is on) of that GPU's own figures, the job's part of a GPU it shares. A sample's: the means over the flush of GpuUtilization, GpuSmActivity, GpuMemoryUsed, GpuMemoryTotal and GpuPower, each absent where the GPU cannot give it (utilisation and power on a MIG instance, SM activity without GPM); a summary's: GpuEnergyKwh, where more than one of its GPUs reports energy. Absent for a job on one GPU, whose figures are the job's.";
    READ_BYTES_TOTAL = "ReadBytesTotal", "Summary: bytes the job read on this node.";
    WRITE_BYTES_TOTAL = "WriteBytesTotal", "Summary: bytes the job wrote on this node.";
    OOM_KILLS = crate::metrics::OOM_KILLS.name, "Summary: processes of the job the kernel killed for lack of memory.";
    SLURM_START = "SlurmStart", "Sample and summary: when the job started, as Slurm reports it (RFC 3339): its cost counts from here, whenever this node's shipper first saw it.";
    COST_USD = "CostUsd", "Sample: what the job has cost on this node so far; summary: its total there, in US dollars: HourlyPrice x Share, integrated over the time it held the node from SlurmStart. Absent where the node has no price or Slurm no size for it (see *What jobs cost*).";
    HOURLY_PRICE = "HourlyPrice", "Sample and summary: the node's price in dollars an hour (the latest, where a Spot price moved).";
    SHARE = "Share", "Sample and summary: the job's share of the node, 0 to 1: the largest of its CPUs over CPUTot, its memory over RealMemory and its GPUs over the node's GPUs, a GPU Slurm gave several jobs counting in equal parts (an exclusive job 1); where the node's jobs' shares add up to more than 1, each divided by that sum, so the node is billed once. While Slurm holds the job suspended, of its memory and GPUs alone (0 holding only CPUs; see SuspendedSeconds).";
    SUSPENDED_SECONDS = "SuspendedSeconds", "Sample and summary: seconds Slurm held the job suspended on this node so far (`scontrol suspend`, `PreemptMode=SUSPEND`: its steps frozen, its CPU time still), billed for its memory and GPUs alone, as Slurm lends its CPUs to others then, and left out of CpuEfficiency, GpuIdlePercent and WasteUsd. Absent for a job never seen suspended (see *What jobs cost*).";
    COST_BASIS = "CostBasis", "Sample and summary: where HourlyPrice came from: configured (cost.hourly_price or cost.prices), spot (EC2's Spot price of the instance type in its zone) or on_demand (the Price List API's On-Demand Linux price).";
    WASTE_USD = "WasteUsd", "Summary and finding: the rule's waste in dollars: CostUsd (less what it cost while suspended) times UnusedPercent of WasteResource.";
    WASTE_RESOURCE = "WasteResource", "Summary and finding: the resource that set Share while the job ran (gpu, cpu or memory), whose unused part WasteUsd counts.";
    UNUSED_PERCENT = "UnusedPercent", "Summary and finding: the unused part of WasteResource: GpuIdlePercent for gpu, 100 - CpuEfficiency for cpu, 100 - MemoryPeakPercent of the allocation for memory.";
    ENDED_BY = "EndedBy", "Summary: task_epilog (the TaskEpilog asked for the final sample) or cgroup_gone.";
    FINDING = "Finding", "Finding: idle_gpu, low_cpu_efficiency, memory_over_requested or gpu_memory_underused.";
    DETAIL = "Detail", "Finding: what was measured, in words.";
    TRUNCATED = "Truncated", "Present when a record was too large for one log event and its largest objects were cut; names what was cut.";
    FABRIC = "Fabric", "node_sample: per EFA or InfiniBand port (`<device>/<port>`, `rdmap16s27/1`, `mlx5_0/1`), an object of Seconds and the fabric fields below.";
    LUSTRE = "Lustre", "node_sample: per Lustre client mount (by file system name, `<fsname>-<instance>` when one is mounted twice), an object of Seconds and the Lustre fields below.";
    RAPL = "Rapl", "node_sample: per RAPL zone (`package-0`, subzones as `package-0/dram`), an object of Seconds, Joules and Watts.";
    SECONDS = "Seconds", "node_sample: seconds between the readings the object's figures cover (those of the flush's collections).";
    RX_BYTES_PER_SECOND = "RxBytesPerSecond", "node_sample Fabric: bytes received per second (EFA rx_bytes; InfiniBand port_rcv_data x 4).";
    TX_BYTES_PER_SECOND = "TxBytesPerSecond", "node_sample Fabric: bytes sent per second (EFA tx_bytes; InfiniBand port_xmit_data x 4).";
    RX_PACKETS_PER_SECOND = "RxPacketsPerSecond", "node_sample Fabric: packets received per second (rx_pkts; port_rcv_packets).";
    TX_PACKETS_PER_SECOND = "TxPacketsPerSecond", "node_sample Fabric: packets sent per second (tx_pkts; port_xmit_packets).";
    RDMA_READ_BYTES_PER_SECOND = "RdmaReadBytesPerSecond", "node_sample Fabric, EFA only: bytes this node read from others by RDMA per second (rdma_read_bytes).";
    RDMA_WRITE_BYTES_PER_SECOND = "RdmaWriteBytesPerSecond", "node_sample Fabric, EFA with RDMA write only: bytes this node wrote to others by RDMA per second (rdma_write_bytes).";
    ERRORS = "Errors", "node_sample Fabric: drops and errors counted during the flush (what FabricErrors adds up).";
    RETRANSMITTED_PACKETS = "RetransmittedPackets", "node_sample Fabric, EFA drivers that count them: packets retransmitted during the flush (retrans_pkts).";
    READ_BYTES_PER_SECOND = "ReadBytesPerSecond", "node_sample Lustre: bytes read per second (llite read_bytes sum).";
    WRITE_BYTES_PER_SECOND = "WriteBytesPerSecond", "node_sample Lustre: bytes written per second (llite write_bytes sum).";
    READS_PER_SECOND = "ReadsPerSecond", "node_sample Lustre: read calls per second (llite read_bytes samples).";
    WRITES_PER_SECOND = "WritesPerSecond", "node_sample Lustre: write calls per second (llite write_bytes samples).";
    OPENS_PER_SECOND = "OpensPerSecond", "node_sample Lustre: opens per second (llite open).";
    METADATA_OPS_PER_SECOND = "MetadataOpsPerSecond", "node_sample Lustre: metadata operations per second, opens included (what LustreMetadataOps adds up).";
    JOULES = "Joules", "node_sample Rapl: energy the zone used during the flush (energy_uj, wrap-aware at max_energy_range_uj).";
    WATTS = "Watts", "node_sample Rapl: the zone's mean power over the flush.";
    COUNTER_RESETS = "CounterResets", "node_sample: fabric ports and Lustre mounts whose counters went backwards during the flush (a driver reload, a cleared stats file): their figures count from the reset, never negative. Absent when none.";
}

/// `docs/records.md`.
pub fn records_markdown() -> String {
    let mut out = String::new();
    out.push_str("# Job records\n\n");
    out.push_str(
        "<!-- Generated from catalog/src/records.rs by `cargo run -p slurm-cw-catalog -- write`. \
         Do not edit: a test fails when this file is stale. -->\n\n",
    );
    out.push_str(
        "Per-job detail goes to the CloudWatch Logs group `/slurm-cw/<cluster>/jobs` (one stream \
         per node) as one JSON object per log event. A `job_sample` record carries every per-job \
         figure of the [metric catalog](metrics.md) under the metric's name, averaged over the \
         flush (`MemoryMax` is the peak); a metric with a further dimension (`ThreadCount` by \
         `ThreadState`) is an object keyed by that value; a job's GPU figures are over its GPUs \
         on the node, and each GPU's are in `PerGpu` where it holds several. A multi-node job \
         has one summary per node: add `CpuSeconds`, `GpuHours` and the I/O totals across them, \
         take the largest `MemoryPeakBytes`, and recompute the efficiency from the sums.\n\n",
    );
    out.push_str(
        "The same stream also carries one `node_sample` record per flush from a node with EFA or \
         InfiniBand ports, Lustre mounts or RAPL energy counters: `Type`, `RecordId`, `Time`, \
         `NodeName`, `Samples` and an object per source (`Fabric`, `Lustre`, `Rapl`) keyed by \
         port, file system or zone. These are each node's own figures behind the cluster-wide \
         `Fabric*`, `Lustre*` and `CpuPackagePower` metrics. Rates are over `Seconds`; counts and \
         `Joules` are totals for the flush.\n\n",
    );
    out.push_str(
        "The head node's stream carries one `scheduler_sample` record per flush: slurmctld's \
         figures that no default alarm watches and the Lambda does not read (sdiag's cycles, \
         depths, queue lengths and maxima, job and RPC rates, RPC time by message type, \
         slurmctld's threads, queues and response time, the capacity totals, node and job counts \
         by flag), node and job counts by state (`NodeCount.idle`, `JobCount.running`), and the \
         head's shipper's own figures no view reads, cluster-wide, each under its metric's name \
         in the [metric catalog](metrics.md) (by state, message type, flag or collector where it \
         has one), a level as its mean over the flush and an increase as its total; `Type`, \
         `RecordId`, `Time`, `NodeName` and `Samples` as above. The dashboard's *Scheduler* row \
         and its charts by state read them with Logs Insights. With `head.scheduler_detail = \
         \"metrics\"` they are metrics as well. While the cluster is at rest (no job waiting or \
         under way, no node with work; see [head-role.md](head-role.md)) the record also carries \
         every other figure of the head that no default alarm watches, where a destination \
         billed per series leaves them out.\n\n",
    );
    out.push_str("| Field | Meaning |\n|---|---|\n");
    for f in ALL_FIELDS {
        let _ = writeln!(out, "| `{}` | {} |", f.name, f.help.replace('|', "\\|"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn field_names_are_unique_and_not_metric_names() {
        let mut seen = HashSet::new();
        for f in ALL_FIELDS {
            assert!(seen.insert(f.name), "{} twice", f.name);
            assert!(f.help.ends_with('.'), "{}", f.name);
        }
        for m in crate::ALL {
            // A sample's figures are keyed by metric name: a field of the same name would clash,
            // except OomKills, which is the same figure.
            assert!(!seen.contains(m.name) || m.name == OOM_KILLS.name, "{} is a field and a metric", m.name);
        }
    }
}
