//! What Slurm (or a job's environment) says a job was allocated, and which GPUs that names.

use super::source::GpuId;
use std::collections::BTreeSet;

/// What a job was allocated, as its environment names GPUs.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Allocation {
    pub(super) indices: BTreeSet<u32>,
    pub(super) uuids: BTreeSet<String>,
}

impl Allocation {
    /// Whether the allocation names this GPU. Slurm's GPU indices are not NVML's enumeration
    /// order: slurmd takes a GPU's number from the trailing digits of its device file
    /// (`gres_device->dev_num`, `/dev/nvidia<N>` -> N, in src/plugins/gres/common/gres_common.c,
    /// which writes that number into SLURM_JOB_GPUS; the gres.conf `File=` of each GPU, or
    /// AutoDetect=nvml's `/dev/nvidia<minor>`), and N is the device's minor number, while NVML
    /// enumerates by PCI bus id. The two differ where the driver numbered the devices in
    /// another order than the bus. So an index is matched against the GPU's minor number
    /// (`minor`); only where NVML cannot give it, against the enumeration index. (Newer Slurm
    /// releases write the GRES index, in PCI bus order, for GPUs instead: there the two agree
    /// where minor numbers follow the bus, the usual case.)
    pub(super) fn holds(&self, id: &GpuId, minor: Option<u32>) -> bool {
        let slurm_index = minor.unwrap_or(id.index);
        (id.mig.is_none() && self.indices.contains(&slurm_index)) || self.uuids.contains(&id.uuid)
    }

    /// From SLURM_JOB_GPUS (`0,2`) and CUDA_VISIBLE_DEVICES (`GPU-…`, `MIG-…`; plain indices
    /// there are relative to the job's cgroup and say nothing about which GPU).
    pub(super) fn parse(job_gpus: Option<&str>, visible: Option<&str>) -> Allocation {
        let mut a = Allocation::default();
        for t in job_gpus.unwrap_or("").split(',') {
            if let Ok(i) = t.trim().parse() {
                a.indices.insert(i);
            }
        }
        for t in visible.unwrap_or("").split(',') {
            let t = t.trim();
            if t.starts_with("GPU-") || t.starts_with("MIG-") {
                a.uuids.insert(t.to_owned());
            }
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_from_the_environment() {
        let a = Allocation::parse(Some("0,2"), Some("0,1"));
        assert_eq!(a.indices, BTreeSet::from([0, 2]));
        assert!(a.uuids.is_empty(), "relative CUDA indices say nothing");
        let g0 = GpuId { index: 0, mig: None, uuid: "GPU-a".into() };
        let g1 = GpuId { index: 1, mig: None, uuid: "GPU-b".into() };
        assert!(a.holds(&g0, None) && !a.holds(&g1, None));
        let a = Allocation::parse(None, Some("MIG-x,GPU-b"));
        let mig = GpuId { index: 0, mig: Some(3), uuid: "MIG-x".into() };
        assert!(a.holds(&mig, None) && a.holds(&g1, None) && !a.holds(&g0, None));
        let mig_of_0 = GpuId { index: 0, mig: Some(1), uuid: "MIG-y".into() };
        assert!(!Allocation::parse(Some("0"), None).holds(&mig_of_0, None), "an index names a whole GPU");
        // NVML's GPU 2 is /dev/nvidia0: Slurm's 0; NVML's GPU 0 is /dev/nvidia2.
        let nvml_2 = GpuId { index: 2, mig: None, uuid: "GPU-c".into() };
        let zero = Allocation::parse(Some("0"), None);
        assert!(zero.holds(&nvml_2, Some(0)) && !zero.holds(&g0, Some(2)), "by minor number");
        assert!(zero.holds(&g0, None), "by NVML index where the minor number is unknown");
    }
}
