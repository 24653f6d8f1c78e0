//! A programmable GPU library for tests and benchmarks (no driver on CI machines). It models
//! what the collector must handle: utilisation and processes, MIG instances (which report
//! memory and processes but no utilisation or power; GPM where their GPU has it), a GPU that falls off the bus, GPUs without GPM
//! (whose profiling figures, like NVML's, need two samples), minor numbers that differ from the
//! enumeration order, and an energy counter.

use super::source::{Gpm, GpuId, GpuSource, ReadError, Reading};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone)]
pub struct FakeGpu {
    pub id: GpuId,
    /// What a read returns (GPM is filled in from `gpm` when supported and sampled before).
    pub reading: Reading,
    pub gpm: Option<Gpm>,
    pub lost: bool,
}

impl FakeGpu {
    /// A whole GPU, busy at `util` percent, 80 GB, everything measurable, GPM supported.
    pub fn gpu(index: u32, util: f64) -> FakeGpu {
        FakeGpu {
            id: GpuId { index, mig: None, uuid: format!("GPU-fake-{index:04}") },
            reading: Reading {
                utilization: Some(util),
                memory_utilization: Some(util / 2.0),
                memory_used: Some(1 << 30),
                memory_total: Some(80 << 30),
                power_watts: Some(100.0 + util * 5.0),
                temperature: Some(40.0 + util / 4.0),
                sm_clock_mhz: Some(1980.0),
                ecc_uncorrected: Some(0),
                throttle_reasons: Some(0),
                xid_errors: 0,
                pids: Vec::new(),
                process_memory: Vec::new(),
                process_sm: None,
                mps_clients: Vec::new(),
                gpm: None,
                minor: Some(index),
                energy_mj: None,
            },
            gpm: Some(gpm_at(util)),
            lost: false,
        }
    }

    /// MIG instance `gi` of GPU `index`: memory and processes only, as NVML gives before Hopper
    /// (a GPU with GPM gives each instance its own GPM figures too: [`FakeGpu::with_gpm`]).
    pub fn mig(index: u32, gi: u32, memory_total: u64) -> FakeGpu {
        FakeGpu {
            id: GpuId { index, mig: Some(gi), uuid: format!("MIG-fake-{index:04}-{gi}") },
            reading: Reading { memory_used: Some(0), memory_total: Some(memory_total), ..Reading::default() },
            gpm: None,
            lost: false,
        }
    }

    /// GPM figures as a device busy at `util` percent gives them: what a MIG instance of a GPU
    /// with GPM (Hopper and newer) has of its own (`nvmlGpmMigSampleGet`).
    pub fn with_gpm(mut self, util: f64) -> FakeGpu {
        self.gpm = Some(gpm_at(util));
        self
    }

    pub fn with_pids(mut self, pids: &[u32]) -> FakeGpu {
        self.reading.pids = pids.to_vec();
        self
    }

    /// A process on it using `memory` bytes and `sm` percent of its SMs (as NVML's process
    /// figures give them; the GPU's own figures are the test's to set).
    pub fn with_process(mut self, pid: u32, memory: u64, sm: f64) -> FakeGpu {
        self.reading.pids.push(pid);
        self.reading.process_memory.push((pid, memory));
        self.reading.process_sm.get_or_insert_with(Vec::new).push((pid, sm));
        self
    }

    /// Through an MPS server `server` busy at `sm` percent: the clients (pid, memory) are
    /// listed with their memory and as MPS clients, and the server alone has SM samples, as
    /// an H200 (driver 580) showed.
    pub fn with_mps(mut self, server: u32, sm: f64, clients: &[(u32, u64)]) -> FakeGpu {
        self = self.with_process(server, 64 << 20, sm);
        for (pid, memory) in clients {
            self.reading.pids.push(*pid);
            self.reading.process_memory.push((*pid, *memory));
            self.reading.mps_clients.push(*pid);
        }
        self
    }

    /// Its device file is `/dev/nvidia<minor>` (None: NVML cannot say).
    pub fn with_minor(mut self, minor: Option<u32>) -> FakeGpu {
        self.reading.minor = minor;
        self
    }

    /// Its total energy counter, in millijoules (tests move it between collections).
    pub fn with_energy_mj(mut self, mj: u64) -> FakeGpu {
        self.reading.energy_mj = Some(mj);
        self
    }
}

/// GPM figures of a device busy at `util` percent.
fn gpm_at(util: f64) -> Gpm {
    Gpm {
        sm_activity: util,
        sm_occupancy: util / 2.0,
        tensor_activity: util / 3.0,
        fp64_activity: 0.0,
        fp32_activity: util / 4.0,
        fp16_activity: util / 5.0,
        dram_activity: util / 6.0,
        pcie_tx_bytes: 1e9,
        pcie_rx_bytes: 2e9,
        nvlink_tx_bytes: 3e9,
        nvlink_rx_bytes: 4e9,
    }
}

/// Shared with the test, which changes the GPUs between collections.
pub type FakeGpus = Arc<Mutex<Vec<FakeGpu>>>;

pub struct FakeSource {
    gpus: FakeGpus,
    /// Devices sampled before: GPM figures exist from the second sample on.
    sampled: HashSet<GpuId>,
    pub reads: u64,
    /// The Xid errors the last read used up, per device.
    xid_read: HashMap<GpuId, u64>,
}

impl FakeSource {
    pub fn new(gpus: Vec<FakeGpu>) -> (FakeSource, FakeGpus) {
        let shared = Arc::new(Mutex::new(gpus));
        let source =
            FakeSource { gpus: shared.clone(), sampled: HashSet::new(), reads: 0, xid_read: HashMap::new() };
        (source, shared)
    }
}

impl GpuSource for FakeSource {
    fn describe(&self) -> String {
        "fake GPUs".into()
    }

    fn read_all(&mut self) -> Vec<(GpuId, Result<Reading, ReadError>)> {
        self.reads += 1;
        let gpus = match self.gpus.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        };
        // Xid errors, as NVML's events, are read once: the test's count is used up.
        self.xid_read.clear();
        if let Ok(mut shared) = self.gpus.lock() {
            for g in shared.iter_mut().filter(|g| !g.lost) {
                self.xid_read.insert(g.id.clone(), std::mem::take(&mut g.reading.xid_errors));
            }
        }
        gpus.into_iter()
            .map(|g| {
                if g.lost {
                    self.sampled.remove(&g.id);
                    return (g.id, Err(ReadError::Lost));
                }
                let mut r = g.reading;
                let second = !self.sampled.insert(g.id.clone());
                r.gpm = if second { g.gpm } else { None };
                (g.id, Ok(r))
            })
            .collect()
    }

    fn rewind(&mut self, id: &GpuId, errors: bool) {
        let n = if errors { self.xid_read.remove(id).unwrap_or(0) } else { 0 };
        if n > 0
            && let Ok(mut shared) = self.gpus.lock()
            && let Some(g) = shared.iter_mut().find(|g| g.id == *id)
        {
            g.reading.xid_errors += n;
        }
    }
}
