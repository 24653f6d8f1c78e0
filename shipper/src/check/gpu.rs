//! `--check`'s GPU rows: NVML, what each GPU can give, and how Slurm's GPU numbers are read.

use super::{Row, Status, row};
use crate::settings::Settings;
use crate::sources::gpu::nvml::NvmlSource;
use crate::sources::gpu::source::{GpuSource, Reading};
use std::fmt::Write;

/// NVML loaded and read as the GPU collector does (see [`NvmlSource`]).
pub(super) fn nvml_row(config: &Settings) -> Row {
    if config.gpu.enabled == crate::config::Toggle::Off {
        return row("nvml", Status::Skip, "gpu.enabled = off");
    }
    match NvmlSource::init() {
        Ok(mut source) => gpu_row(&mut source),
        Err(e) => {
            let status =
                if config.gpu.enabled == crate::config::Toggle::On { Status::Fail } else { Status::Skip };
            row("nvml", status, format!("not available ({e}); the GPU collector stays off"))
        }
    }
}

/// How Slurm's GPU numbers are read on this node, from gres.conf (see
/// [`crate::sources::gpu`]'s allocation matching).
pub(super) fn gres_row(config: &Settings) -> Row {
    use slurm_cw_formats::slurm::gres_conf::GpuOrder;
    let (path, gres) = config.gres_conf();
    let from = path.map_or_else(|| "no gres.conf".to_owned(), |p| p.display().to_string());
    let how = match gres.gpu_order(&config.node_name()) {
        GpuOrder::Detected => "autodetected: Slurm's GPU numbers follow NVML's order".to_owned(),
        GpuOrder::Files(f) => {
            let files: Vec<String> = f
                .iter()
                .map(|n| n.map_or_else(|| "(MIG)".to_owned(), |n| format!("/dev/nvidia{n}")))
                .collect();
            format!("File= lines: Slurm's GPU numbers are {} in turn", files.join(", "))
        }
        GpuOrder::Unknown => "nothing for this node: Slurm's GPU numbers taken for device numbers".to_owned(),
    };
    row("gres.conf", Status::Ok, format!("{how} ({from})"))
}

/// What reads of every GPU give: how many, the first that could not be read, and what each
/// kind of device cannot give (those figures are absent from its jobs' records, never 0).
fn gpu_row(source: &mut dyn GpuSource) -> Row {
    // GPM compares two samples: the second read has it where the GPU does.
    let _ = source.read_all();
    let readings = source.read_all();
    let gpus: std::collections::BTreeSet<u32> = readings.iter().map(|(id, _)| id.index).collect();
    let mut detail = format!("{}, {} GPU(s)", source.describe(), gpus.len());
    let failed: Vec<String> = readings
        .iter()
        .filter_map(|(id, r)| Some(format!("{}: {:?}", id.label(), r.as_ref().err()?)))
        .collect();
    // Devices by what they cannot give, in the order first seen.
    let mut missing: Vec<(Vec<&str>, Vec<String>)> = Vec::new();
    for (id, r) in readings.iter().filter_map(|(id, r)| Some((id, r.as_ref().ok()?))) {
        let lacks = cannot_give(r);
        if lacks.is_empty() {
            continue;
        }
        match missing.iter_mut().find(|(l, _)| *l == lacks) {
            Some((_, ids)) => ids.push(id.label()),
            None => missing.push((lacks, vec![id.label()])),
        }
    }
    for (lacks, ids) in &missing {
        let _ = write!(
            detail,
            "; {} cannot give {} (left out of their jobs' records)",
            ids.join(", "),
            lacks.join(", ")
        );
    }
    match failed.first() {
        None => row("nvml", Status::Ok, detail),
        Some(first) => row("nvml", Status::Warn, format!("{detail}; {} unreadable ({first})", failed.len())),
    }
}

/// The figures a device's reading lacks: GPM before Hopper (A100, A10G, L4, L40S: most of
/// AWS's GPU instances), utilisation, power and clocks on a MIG instance, the energy counter
/// before Volta, per-process utilisation where the driver keeps none.
fn cannot_give(r: &Reading) -> Vec<&'static str> {
    let figures: [(&'static str, bool); 8] = [
        ("utilisation", r.utilization.is_some()),
        ("memory", r.memory_used.is_some()),
        ("power", r.power_watts.is_some()),
        ("temperature", r.temperature.is_some()),
        ("clocks", r.sm_clock_mhz.is_some()),
        ("energy", r.energy_mj.is_some()),
        ("GPM (SM, tensor, DRAM activity; PCIe and NVLink)", r.gpm.is_some()),
        ("per-process utilisation (shared GPUs' split)", r.process_sm.is_some()),
    ];
    figures.into_iter().filter(|(_, has)| !has).map(|(name, _)| name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::gpu::fake::{FakeGpu, FakeSource};

    #[test]
    fn the_gpu_row_counts_gpus_not_mig_instances_and_names_an_unreadable_one() {
        let (mut src, _) = FakeSource::new(vec![
            FakeGpu::gpu(0, 50.0),
            FakeGpu::mig(1, 1, 1 << 30),
            FakeGpu::mig(1, 2, 1 << 30),
        ]);
        let r = gpu_row(&mut src);
        assert_eq!(
            (r.status, r.detail.as_str()),
            (
                Status::Ok,
                "fake GPUs, 2 GPU(s); 0 cannot give energy, per-process utilisation (shared GPUs' split) (left out of their jobs' records); 1/1, 1/2 cannot give utilisation, power, temperature, clocks, energy, GPM (SM, tensor, DRAM activity; PCIe and NVLink), per-process utilisation (shared GPUs' split) (left out of their jobs' records)"
            )
        );
        let (mut src, _) =
            FakeSource::new(vec![FakeGpu::gpu(0, 50.0), FakeGpu { lost: true, ..FakeGpu::gpu(1, 0.0) }]);
        let r = gpu_row(&mut src);
        assert_eq!(
            (r.status, r.detail.as_str()),
            (
                Status::Warn,
                "fake GPUs, 2 GPU(s); 0 cannot give energy, per-process utilisation (shared GPUs' split) (left out of their jobs' records); 1 unreadable (1: Lost)"
            )
        );
    }

    #[test]
    fn a_mig_instance_of_a_gpu_with_gpm_lacks_only_what_belongs_to_the_whole_gpu() {
        let (mut src, _) = FakeSource::new(vec![FakeGpu::mig(0, 1, 1 << 30).with_gpm(50.0)]);
        let r = gpu_row(&mut src);
        assert_eq!(
            r.detail,
            "fake GPUs, 1 GPU(s); 0/1 cannot give utilisation, power, temperature, clocks, energy, per-process utilisation (shared GPUs' split) (left out of their jobs' records)"
        );
    }

    #[test]
    fn a_gpu_without_gpm_says_so_and_its_jobs_records_leave_gpm_out() {
        let mut a100 = FakeGpu::gpu(0, 50.0).with_process(7, 1 << 30, 50.0).with_energy_mj(1);
        a100.gpm = None;
        let h200 = FakeGpu::gpu(1, 50.0).with_process(8, 1 << 30, 50.0).with_energy_mj(1);
        let (mut src, _) = FakeSource::new(vec![a100, h200]);
        let r = gpu_row(&mut src);
        assert_eq!(
            r.detail,
            "fake GPUs, 2 GPU(s); 0 cannot give GPM (SM, tensor, DRAM activity; PCIe and NVLink) (left out of their jobs' records)"
        );
    }
}
