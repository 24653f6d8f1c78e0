//! The real GPU library: NVML through nvml-wrapper, loaded at run time (a machine without the
//! driver gets an error from [`NvmlSource::init`], and the collector stays off).

use super::source::{Gpm, GpuId, GpuSource, ReadError, Reading};
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{Clock, EccCounter, MemoryError, TemperatureSensor};
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, EventSet, GpmSample, Nvml};
use std::collections::HashMap;

/// The GPM figures asked for, in the order of [`Gpm`]'s fields.
const GPM_METRICS: [GpmMetricId; 11] = [
    GpmMetricId::SmUtil,
    GpmMetricId::SmOccupancy,
    GpmMetricId::AnyTensorUtil,
    GpmMetricId::Fp64Util,
    GpmMetricId::Fp32Util,
    GpmMetricId::Fp16Util,
    GpmMetricId::DramBwUtil,
    GpmMetricId::PcieTxPerSec,
    GpmMetricId::PcieRxPerSec,
    GpmMetricId::NvlinkTotalTxPerSec,
    GpmMetricId::NvlinkTotalRxPerSec,
];

const MIB: f64 = 1024.0 * 1024.0;

/// Throttle reasons that do not mean the GPU is held back by power, heat or sync.
fn benign() -> ThrottleReasons {
    ThrottleReasons::GPU_IDLE
        | ThrottleReasons::APPLICATIONS_CLOCKS_SETTING
        | ThrottleReasons::DISPLAY_CLOCK_SETTING
}

pub struct NvmlSource {
    /// NVML lives as long as the process, so samples and handles can be kept between cycles.
    nvml: &'static Nvml,
    driver: String,
    xid: Option<EventSet<'static>>,
    /// The previous GPM sample of each GPU or MIG instance.
    gpm: HashMap<GpuId, GpmSample<'static>>,
    /// Whether each GPU supports GPM (asked once).
    gpm_support: HashMap<u32, bool>,
    /// The newest process utilisation sample seen of each GPU (NVML's CPU timestamp, µs).
    process_seen: HashMap<u32, u64>,
    /// What the last read moved on from, for [`GpuSource::rewind`]: the GPM sample it replaced,
    /// the process timestamp before it, the Xid errors it drained.
    gpm_before: HashMap<GpuId, GpmSample<'static>>,
    process_before: HashMap<u32, Option<u64>>,
    xid_read: HashMap<String, u64>,
    /// Xid errors drained and taken back: the next read's.
    xid_kept: HashMap<String, u64>,
}

impl NvmlSource {
    pub fn init() -> Result<NvmlSource, String> {
        let nvml = Nvml::init().map_err(|e| format!("NVML: {e}"))?;
        let nvml: &'static Nvml = Box::leak(Box::new(nvml));
        let driver = nvml.sys_driver_version().unwrap_or_else(|_| "?".into());
        let mut xid = nvml.create_event_set().ok();
        for i in 0..nvml.device_count().unwrap_or(0) {
            if let Ok(dev) = nvml.device_by_index(i) {
                // What Slurm's indices are matched through, and whether energy is counted.
                tracing::info!(
                    index = i,
                    minor = ?dev.minor_number().ok(),
                    pci_bus_id = ?dev.pci_info().ok().map(|p| p.bus_id),
                    energy_mj = ?dev.total_energy_consumption().ok(),
                    "GPU"
                );
            }
            if let (Ok(dev), Some(set)) = (nvml.device_by_index(i), xid.take()) {
                // Not every GPU supports events; keep the set for the others.
                xid = match dev.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
                    Ok(s) => Some(s),
                    Err(_) => nvml.create_event_set().ok(),
                };
            }
        }
        Ok(NvmlSource {
            nvml,
            driver,
            xid,
            gpm: HashMap::new(),
            gpm_support: HashMap::new(),
            process_seen: HashMap::new(),
            gpm_before: HashMap::new(),
            process_before: HashMap::new(),
            xid_read: HashMap::new(),
            xid_kept: HashMap::new(),
        })
    }

    /// Xid critical errors that arrived since the last call (and those taken back), per GPU
    /// UUID.
    fn drain_xid(&mut self) -> HashMap<String, u64> {
        let mut out = std::mem::take(&mut self.xid_kept);
        if let Some(set) = &self.xid {
            // wait(0) returns at once; a timeout means nothing is pending.
            for _ in 0..1000 {
                match set.wait(0) {
                    Ok(ev) => *out.entry(ev.device.uuid().unwrap_or_default()).or_default() += 1,
                    Err(_) => break,
                }
            }
        }
        out
    }

    fn gpm_supported(&mut self, index: u32, dev: &Device<'static>) -> bool {
        *self.gpm_support.entry(index).or_insert_with(|| dev.gpm_support().unwrap_or(false))
    }

    /// GPM between the previous sample of `id` and one taken now.
    fn gpm(&mut self, id: &GpuId, parent: &Device<'static>) -> Option<Gpm> {
        let now = match id.mig {
            Some(gi) => parent.gpm_mig_sample(gi),
            None => parent.gpm_sample(),
        }
        .ok()?;
        let before = self.gpm.insert(id.clone(), now)?;
        let now = self.gpm.get(id)?;
        let results = nvml_wrapper::gpm::gpm_metrics_get(self.nvml, &before, now, &GPM_METRICS).ok();
        self.gpm_before.insert(id.clone(), before);
        let results = results?;
        let v: Vec<Option<f64>> = results.into_iter().map(|r| r.ok().map(|m| m.value)).collect();
        let g = |i: usize| v.get(i).copied().flatten().unwrap_or(0.0);
        // All missing means nothing measured: absent, not zero.
        if v.iter().all(Option::is_none) {
            return None;
        }
        Some(Gpm {
            sm_activity: g(0),
            sm_occupancy: g(1),
            tensor_activity: g(2),
            fp64_activity: g(3),
            fp32_activity: g(4),
            fp16_activity: g(5),
            dram_activity: g(6),
            // NVML reports PCIe and NVLink traffic in MiB/s.
            pcie_tx_bytes: g(7) * MIB,
            pcie_rx_bytes: g(8) * MIB,
            nvlink_tx_bytes: g(9) * MIB,
            nvlink_rx_bytes: g(10) * MIB,
        })
    }

    /// Each process's mean SM utilisation in the samples NVML kept since the last call (it
    /// samples every few hundred ms); None where the GPU cannot say.
    fn process_sm(&mut self, index: u32, dev: &Device<'static>) -> Option<Vec<(u32, f64)>> {
        let since = self.process_seen.get(&index).copied();
        let samples = match dev.process_utilization_stats(since) {
            Ok(s) => s,
            // No sample since: no process ran.
            Err(NvmlError::NotFound) => Vec::new(),
            Err(_) => return None,
        };
        let mut by: HashMap<u32, (f64, f64)> = HashMap::new();
        for s in &samples {
            let e = by.entry(s.pid).or_default();
            e.0 += f64::from(s.sm_util);
            e.1 += 1.0;
        }
        if let Some(newest) = samples.iter().map(|s| s.timestamp).max() {
            self.process_before.insert(index, self.process_seen.insert(index, newest));
        }
        let mut out: Vec<(u32, f64)> = by.into_iter().map(|(pid, (sum, n))| (pid, sum / n)).collect();
        out.sort_by_key(|p| p.0);
        Some(out)
    }

    fn read_gpu(
        &mut self,
        index: u32,
        dev: &Device<'static>,
        xid: &HashMap<String, u64>,
    ) -> (GpuId, Result<Reading, ReadError>) {
        let uuid = dev.uuid().unwrap_or_default();
        let id = GpuId { index, mig: None, uuid: uuid.clone() };
        let util = dev.utilization_rates().ok();
        let mem = dev.memory_info().ok();
        let compute = match processes(dev.running_compute_processes()) {
            Ok(p) => p,
            Err(e) => return (id, Err(e)),
        };
        let process_memory = used_memory(&compute);
        let mut pids: Vec<u32> = compute.iter().map(|p| p.pid).collect();
        pids.extend(dev.running_graphics_processes().unwrap_or_default().iter().map(|p| p.pid));
        pids.sort_unstable();
        pids.dedup();
        let gpm = if self.gpm_supported(index, dev) { self.gpm(&id, dev) } else { None };
        let reading = Reading {
            utilization: util.as_ref().map(|u| u.gpu as f64),
            memory_utilization: util.as_ref().map(|u| u.memory as f64),
            memory_used: mem.as_ref().map(|m| m.used),
            memory_total: mem.as_ref().map(|m| m.total),
            power_watts: dev.power_usage().ok().map(|mw| mw as f64 / 1000.0),
            temperature: dev.temperature(TemperatureSensor::Gpu).ok().map(f64::from),
            sm_clock_mhz: dev.clock_info(Clock::SM).ok().map(f64::from),
            ecc_uncorrected: dev.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile).ok(),
            throttle_reasons: dev
                .current_throttle_reasons()
                .ok()
                .map(|r| (r - benign()).iter().count() as u32),
            xid_errors: xid.get(&uuid).copied().unwrap_or(0),
            pids,
            process_memory,
            process_sm: self.process_sm(index, dev),
            mps_clients: mps_clients(dev.mps_running_compute_processes()),
            gpm,
            minor: dev.minor_number().ok(),
            energy_mj: dev.total_energy_consumption().ok(),
        };
        (id, Ok(reading))
    }

    /// The MIG instances of a GPU in MIG mode: memory and processes (utilisation, power and
    /// clocks belong to the whole GPU and are not measurable per instance).
    fn read_migs(
        &mut self,
        index: u32,
        dev: &Device<'static>,
        out: &mut Vec<(GpuId, Result<Reading, ReadError>)>,
    ) {
        let gpm = self.gpm_supported(index, dev);
        for m in 0..dev.mig_device_count().unwrap_or(0) {
            let Ok(mig) = dev.mig_device_by_index(m) else {
                continue;
            };
            let Some(gi) = gpu_instance_id(self.nvml, &mig) else {
                continue;
            };
            let id = GpuId { index, mig: Some(gi), uuid: mig.uuid().unwrap_or_default() };
            let mem = mig.memory_info().ok();
            let compute = match processes(mig.running_compute_processes()) {
                Ok(p) => p,
                Err(e) => {
                    out.push((id, Err(e)));
                    continue;
                }
            };
            let reading = Reading {
                memory_used: mem.as_ref().map(|m| m.used),
                memory_total: mem.as_ref().map(|m| m.total),
                pids: compute.iter().map(|p| p.pid).collect(),
                process_memory: used_memory(&compute),
                mps_clients: mps_clients(mig.mps_running_compute_processes()),
                gpm: if gpm { self.gpm(&id, dev) } else { None },
                ..Reading::default()
            };
            out.push((id, Ok(reading)));
        }
    }
}

/// The processes NVML lists on a device. A list it cannot give is a failed reading, not an
/// empty one: taken for "no process", the job's GPU counted idle and wasted, its GpuErrors 0.
/// (NotSupported is an empty list: a device that has none to give.)
fn processes(
    listed: Result<Vec<nvml_wrapper::struct_wrappers::device::ProcessInfo>, NvmlError>,
) -> Result<Vec<nvml_wrapper::struct_wrappers::device::ProcessInfo>, ReadError> {
    match listed {
        Ok(p) => Ok(p),
        Err(NvmlError::NotSupported) => Ok(Vec::new()),
        Err(e) => Err(to_error(e)),
    }
}

/// The pids NVML lists as MPS clients; none where it cannot say (no MPS, an older driver).
fn mps_clients(
    listed: Result<Vec<nvml_wrapper::struct_wrappers::device::ProcessInfo>, NvmlError>,
) -> Vec<u32> {
    let mut pids: Vec<u32> = listed.unwrap_or_default().iter().map(|p| p.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// nvmlDeviceGetGpuInstanceId of a MIG device handle (not wrapped by nvml-wrapper): the one
/// call into the NVML library outside nvml-wrapper's safe API.
#[allow(unsafe_code)]
fn gpu_instance_id(nvml: &Nvml, mig: &Device) -> Option<u32> {
    let f = nvml.lib().nvmlDeviceGetGpuInstanceId.as_ref().ok()?;
    let mut id: std::os::raw::c_uint = 0;
    // SAFETY: `mig` is a valid device handle of this NVML instance; `id` outlives the call.
    let rc = unsafe { f(mig.handle(), &mut id) };
    (rc == 0).then_some(id)
}

impl GpuSource for NvmlSource {
    fn describe(&self) -> String {
        format!("NVIDIA driver {}", self.driver)
    }

    fn read_all(&mut self) -> Vec<(GpuId, Result<Reading, ReadError>)> {
        self.gpm_before.clear();
        self.process_before.clear();
        let xid = self.drain_xid();
        self.xid_read = xid.clone();
        let mut out = Vec::new();
        for index in 0..self.nvml.device_count().unwrap_or(0) {
            let dev = match self.nvml.device_by_index(index) {
                Ok(d) => d,
                Err(e) => {
                    let id = GpuId { index, mig: None, uuid: String::new() };
                    out.push((id, Err(to_error(e))));
                    continue;
                }
            };
            // A lost GPU answers every query with GpuLost: one probe says so.
            if let Err(NvmlError::GpuLost) = dev.uuid() {
                out.push((GpuId { index, mig: None, uuid: String::new() }, Err(ReadError::Lost)));
                continue;
            }
            let mig_on = dev.mig_mode().map(|m| m.current == 1).unwrap_or(false);
            if mig_on {
                self.read_migs(index, &dev, &mut out);
            } else {
                out.push(self.read_gpu(index, &dev, &xid));
            }
        }
        out
    }

    fn rewind(&mut self, id: &GpuId, errors: bool) {
        if let Some(before) = self.gpm_before.remove(id) {
            self.gpm.insert(id.clone(), before);
        }
        if id.mig.is_none()
            && let Some(before) = self.process_before.remove(&id.index)
        {
            match before {
                Some(t) => self.process_seen.insert(id.index, t),
                None => self.process_seen.remove(&id.index),
            };
        }
        if errors && let Some(n) = self.xid_read.remove(&id.uuid) {
            *self.xid_kept.entry(id.uuid.clone()).or_default() += n;
        }
    }
}

/// NVML's `usedGpuMemory` of each process, where it gives one.
fn used_memory(procs: &[nvml_wrapper::struct_wrappers::device::ProcessInfo]) -> Vec<(u32, u64)> {
    use nvml_wrapper::enums::device::UsedGpuMemory;
    procs
        .iter()
        .filter_map(|p| match p.used_gpu_memory {
            UsedGpuMemory::Used(b) => Some((p.pid, b)),
            UsedGpuMemory::Unavailable => None,
        })
        .collect()
}

fn to_error(e: NvmlError) -> ReadError {
    match e {
        NvmlError::GpuLost => ReadError::Lost,
        other => ReadError::Failed(other.to_string()),
    }
}
