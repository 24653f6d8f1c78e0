//! What Slurm (or a job's environment) says a job was allocated, and which GPUs that names.

use super::source::GpuId;
use slurm_cw_formats::slurm::gres_conf::GpuOrder;
use std::collections::BTreeSet;

/// What a job was allocated, as its environment names GPUs.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Allocation {
    pub(super) indices: BTreeSet<u32>,
    pub(super) uuids: BTreeSet<String>,
}

impl Allocation {
    /// Whether the allocation names this GPU (NVML's `id`, with device minor number `minor`
    /// where NVML gives it), Slurm's GPU numbers read as `order` says.
    pub(super) fn holds(&self, id: &GpuId, minor: Option<u32>, order: &GpuOrder) -> bool {
        (id.mig.is_none() && self.indices.iter().any(|&n| names(order, n, id.index, minor)))
            || self.uuids.contains(&id.uuid)
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

/// Whether Slurm's GPU number `n` names the GPU NVML enumerates as `nvml`, whose device is
/// `/dev/nvidia<minor>`.
///
/// Slurm's numbers are places in slurmd's list of the node's GPUs (`IDX:` in scontrol, and
/// SLURM_JOB_GPUS since Slurm 21.08; 20.11 and before wrote the device's number there, see
/// src/plugins/gres/common/gres_common.c), and gres.conf decides that list's order
/// ([`GpuOrder`]): NVML's with autodetection, else the files as named. Without either, the
/// number is taken for the device's minor number, the order of the usual
/// `File=/dev/nvidia[0-N]`; and where NVML gives no minor number, for its own index.
pub(super) fn names(order: &GpuOrder, n: u32, nvml: u32, minor: Option<u32>) -> bool {
    match order {
        GpuOrder::Detected => n == nvml,
        GpuOrder::Files(files) => match (files.get(n as usize), minor) {
            (Some(file), Some(m)) => *file == m,
            (Some(file), None) => *file == nvml,
            (None, _) => false,
        },
        GpuOrder::Unknown => n == minor.unwrap_or(nvml),
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
        let u = &GpuOrder::Unknown;
        assert!(a.holds(&g0, None, u) && !a.holds(&g1, None, u));
        let a = Allocation::parse(None, Some("MIG-x,GPU-b"));
        let mig = GpuId { index: 0, mig: Some(3), uuid: "MIG-x".into() };
        assert!(a.holds(&mig, None, u) && a.holds(&g1, None, u) && !a.holds(&g0, None, u));
        let mig_of_0 = GpuId { index: 0, mig: Some(1), uuid: "MIG-y".into() };
        assert!(!Allocation::parse(Some("0"), None).holds(&mig_of_0, None, u), "an index names a whole GPU");
        // NVML's GPU 2 is /dev/nvidia0: Slurm's 0; NVML's GPU 0 is /dev/nvidia2.
        let nvml_2 = GpuId { index: 2, mig: None, uuid: "GPU-c".into() };
        let zero = Allocation::parse(Some("0"), None);
        assert!(zero.holds(&nvml_2, Some(0), u) && !zero.holds(&g0, Some(2), u), "by minor number");
        assert!(zero.holds(&g0, None, u), "by NVML index where the minor number is unknown");
    }

    #[test]
    fn slurm_numbers_are_places_in_the_order_gres_conf_gives() {
        // Four GPUs whose minor numbers run against the bus: NVML index i is /dev/nvidia(3-i).
        let minor = |nvml: u32| Some(3 - nvml);
        let held = |order: &GpuOrder, n: u32| -> Vec<u32> {
            (0..4).filter(|&g| names(order, n, g, minor(g))).collect()
        };
        // AutoDetect=nvml: slurmd's list is NVML's order.
        assert_eq!(held(&GpuOrder::Detected, 0), vec![0]);
        assert_eq!(held(&GpuOrder::Detected, 3), vec![3]);
        // File=/dev/nvidia[0-3]: Slurm's 0 is /dev/nvidia0, NVML's 3.
        let files = GpuOrder::Files(vec![0, 1, 2, 3]);
        assert_eq!(held(&files, 0), vec![3]);
        assert_eq!(held(&files, 3), vec![0]);
        // Files named out of order: Slurm's 0 is the first named, /dev/nvidia2, NVML's 1.
        let named = GpuOrder::Files(vec![2, 0, 3, 1]);
        assert_eq!(held(&named, 0), vec![1]);
        assert!(held(&named, 4).is_empty(), "past the files gres.conf names");
        // Nothing in gres.conf: the minor number.
        assert_eq!(held(&GpuOrder::Unknown, 0), vec![3]);
        // No minor number from NVML: the NVML index stands in for it.
        assert!(names(&files, 1, 1, None) && names(&GpuOrder::Unknown, 2, 2, None));
    }
}
