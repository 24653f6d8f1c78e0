//! The per-job figures of the GPUs a job holds, out of each GPU's reading.

use super::source::{self, GpuId, Reading};
use crate::sample::{GpuLabel, OneGpu};
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::metrics::*;

/// The per-job figures of a set of GPUs: means of percentages and clocks, sums of memory,
/// power, errors and traffic, the hottest temperature, the most throttle reasons. A figure no
/// GPU of the set has is left out.
pub(super) fn job_figures(rs: &[&Reading]) -> Vec<(&'static Metric, f64)> {
    fn collect(rs: &[&Reading], f: impl Fn(&Reading) -> Option<f64>) -> Vec<f64> {
        rs.iter().filter_map(|r| f(r)).collect()
    }
    let mean = |v: Vec<f64>| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let sum = |v: Vec<f64>| (!v.is_empty()).then(|| v.iter().sum::<f64>());
    let max = |v: Vec<f64>| v.into_iter().reduce(f64::max);
    let gpm = |f: fn(&source::Gpm) -> f64| move |r: &Reading| r.gpm.as_ref().map(f);
    let figures = [
        (&GPU_UTILIZATION, mean(collect(rs, |r| r.utilization))),
        (&GPU_MEMORY_UTILIZATION, mean(collect(rs, |r| r.memory_utilization))),
        (&GPU_MEMORY_USED, sum(collect(rs, |r| r.memory_used.map(|b| b as f64)))),
        (&GPU_MEMORY_TOTAL, sum(collect(rs, |r| r.memory_total.map(|b| b as f64)))),
        (&GPU_POWER, sum(collect(rs, |r| r.power_watts))),
        (&GPU_TEMPERATURE, max(collect(rs, |r| r.temperature))),
        (&GPU_SM_CLOCK, mean(collect(rs, |r| r.sm_clock_mhz))),
        (&GPU_ECC_ERRORS, sum(collect(rs, |r| r.ecc_uncorrected.map(|e| e as f64)))),
        (&GPU_XID_ERRORS, sum(collect(rs, |r| Some(r.xid_errors as f64)))),
        (&GPU_THROTTLE_REASONS, max(collect(rs, |r| r.throttle_reasons.map(f64::from)))),
        (&GPU_SM_ACTIVITY, mean(collect(rs, gpm(|g| g.sm_activity)))),
        (&GPU_SM_OCCUPANCY, mean(collect(rs, gpm(|g| g.sm_occupancy)))),
        (&GPU_TENSOR_ACTIVITY, mean(collect(rs, gpm(|g| g.tensor_activity)))),
        (&GPU_FP64_ACTIVITY, mean(collect(rs, gpm(|g| g.fp64_activity)))),
        (&GPU_FP32_ACTIVITY, mean(collect(rs, gpm(|g| g.fp32_activity)))),
        (&GPU_FP16_ACTIVITY, mean(collect(rs, gpm(|g| g.fp16_activity)))),
        (&GPU_DRAM_ACTIVITY, mean(collect(rs, gpm(|g| g.dram_activity)))),
        (&GPU_PCIE_TX_BYTES, sum(collect(rs, gpm(|g| g.pcie_tx_bytes)))),
        (&GPU_PCIE_RX_BYTES, sum(collect(rs, gpm(|g| g.pcie_rx_bytes)))),
        (&GPU_NVLINK_TX_BYTES, sum(collect(rs, gpm(|g| g.nvlink_tx_bytes)))),
        (&GPU_NVLINK_RX_BYTES, sum(collect(rs, gpm(|g| g.nvlink_rx_bytes)))),
    ];
    figures.into_iter().filter_map(|(m, v)| Some((m, v?))).collect()
}

/// One GPU's own figures and the job's part of its energy, named by its UUID or its index.
pub(super) fn one_gpu(id: &GpuId, r: &Reading, joules: Option<f64>, by_uuid: bool) -> OneGpu {
    let label = if by_uuid { GpuLabel::Uuid(id.uuid.clone()) } else { GpuLabel::Index(id.label()) };
    OneGpu { label, figures: job_figures(&[r]), joules }
}
