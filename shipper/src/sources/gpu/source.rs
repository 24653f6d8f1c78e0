//! What the GPU collector needs from a GPU library, as a trait: the real NVML ([`super::nvml`])
//! and a programmable fake for tests and benchmarks ([`super::fake`]) implement it.

/// One GPU, or one MIG instance of a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GpuId {
    /// NVML index of the (parent) GPU.
    pub index: u32,
    /// The MIG GPU instance id, for a MIG instance.
    pub mig: Option<u32>,
    pub uuid: String,
}

impl GpuId {
    /// The `Gpu` dimension value: `0`, or `0/3` for GPU instance 3 of GPU 0.
    pub fn label(&self) -> String {
        match self.mig {
            Some(gi) => format!("{}/{gi}", self.index),
            None => self.index.to_string(),
        }
    }
}

/// Profiling figures between this reading and the previous one (NVML GPM, Hopper and newer).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Gpm {
    pub sm_activity: f64,
    pub sm_occupancy: f64,
    pub tensor_activity: f64,
    pub fp64_activity: f64,
    pub fp32_activity: f64,
    pub fp16_activity: f64,
    pub dram_activity: f64,
    pub pcie_tx_bytes: f64,
    pub pcie_rx_bytes: f64,
    pub nvlink_tx_bytes: f64,
    pub nvlink_rx_bytes: f64,
}

/// One read of one GPU or MIG instance. A figure the library cannot give for this device (most
/// of them on a MIG instance before Hopper) is None: absent, never zero.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    pub utilization: Option<f64>,
    pub memory_utilization: Option<f64>,
    pub memory_used: Option<u64>,
    pub memory_total: Option<u64>,
    pub power_watts: Option<f64>,
    pub temperature: Option<f64>,
    pub sm_clock_mhz: Option<f64>,
    pub ecc_uncorrected: Option<u64>,
    /// Active clock throttle reasons that matter (not idle, not application settings).
    pub throttle_reasons: Option<u32>,
    /// Xid critical errors since the previous reading.
    pub xid_errors: u64,
    /// Processes running on it (compute and graphics).
    pub pids: Vec<u32>,
    /// GPU memory each compute process uses (NVML's `usedGpuMemory`), where NVML gives it.
    pub process_memory: Vec<(u32, u64)>,
    /// Each process's SM utilisation (percent of the GPU) since the previous reading
    /// (nvmlDeviceGetProcessUtilization); None where NVML cannot say, empty where no process ran.
    pub process_sm: Option<Vec<(u32, f64)>>,
    /// The processes among `pids` that run through an MPS server (NVML's MPS list): the
    /// others then include the server, which gets every client's SM samples (seen on an H200).
    pub mps_clients: Vec<u32>,
    pub gpm: Option<Gpm>,
    /// The device's minor number (`/dev/nvidia<minor>`), which Slurm's GPU indices name (see
    /// `Allocation` in the collector); None on a MIG instance or where NVML cannot say.
    pub minor: Option<u32>,
    /// NVML's total energy counter of the (whole) GPU, in millijoules since the driver loaded;
    /// None where the GPU does not report it (before Volta, and on MIG instances).
    pub energy_mj: Option<u64>,
}

/// Why a device could not be read this cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// Fallen off the bus or otherwise lost until a reset.
    Lost,
    Failed(String),
}

pub trait GpuSource {
    /// A short name for logs (driver version, or "fake").
    fn describe(&self) -> String;

    /// Reads every GPU and MIG instance. One device failing does not stop the others.
    fn read_all(&mut self) -> Vec<(GpuId, Result<Reading, ReadError>)>;

    /// Takes back what the last read of `id` measured over the time since the read before
    /// (GPM, the processes' SM samples; its Xid errors too where `errors`), so that the next
    /// read measures that time again: a final sample reads every GPU, and must not use up the
    /// other jobs' windows (nor their errors, read once).
    fn rewind(&mut self, _id: &GpuId, _errors: bool) {}
}
