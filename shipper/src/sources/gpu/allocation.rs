//! What Slurm (or a job's environment) says a job was allocated, and which GPUs that names.

use super::source::GpuId;
use crate::sources::node::procs;
use slurm_cw_formats::slurm::gres_conf::GpuOrder;
use std::collections::BTreeSet;
use std::path::Path;

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

/// Environment bytes read per job and cycle to find its allocation: a few hundred processes'
/// usual environments, or eight that made theirs as large as [`procs::ENVIRON_MAX`].
const ENVIRON_BUDGET: usize = 8 << 20;

/// SLURM_JOB_GPUS / CUDA_VISIBLE_DEVICES from the first of the job processes `pids` that has
/// them, reading at most [`ENVIRON_BUDGET`] of their environments (a job without GPUs is looked
/// at every cycle). Only where Slurm cannot be asked: a job's user writes its environment.
pub(super) fn from_environment(proc_root: &Path, pids: &[u32]) -> Option<Allocation> {
    let mut budget = ENVIRON_BUDGET;
    for &p in pids {
        if budget == 0 {
            break;
        }
        let mut v = procs::environ_vars_within(
            proc_root,
            p,
            &["SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"],
            &mut budget,
        );
        let (visible, job_gpus) = (v.pop().flatten(), v.pop().flatten());
        let a = Allocation::parse(job_gpus.as_deref(), visible.as_deref());
        if job_gpus.is_some() || !a.uuids.is_empty() {
            return Some(a);
        }
    }
    None
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
        GpuOrder::Files(files) => match (files.get(n as usize).copied().flatten(), minor) {
            (Some(file), Some(m)) => file == m,
            (Some(file), None) => file == nvml,
            // Past the files named, or a MIG instance's place: no whole GPU.
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

    /// What Slurm writes into CUDA_VISIBLE_DEVICES (src/plugins/gres/common/gres_common.c: a
    /// device's unique id where GRES_CONF_UUID is set, else its index; SLURM_JOB_GPUS, the
    /// global list, stays indices; gpu_nvml.c's unique ids): a whole GPU's `GPU-<uuid>` with
    /// gres.conf's `Flags=env_uuid` (new in Slurm 26.05.0rc1, SchedMD commit fc1f3f48cc and
    /// CHANGELOG/slurm-26.05.md; 25.11 has no such change; gres.conf(5)'s example
    /// `CUDA_VISIBLE_DEVICES=GPU-8932f937-d72c-4106-c12f-20bd9faed9f6`), a MIG instance's
    /// `MIG-<uuid>` on drivers from R470, `MIG-GPU-<parent uuid>/<GPU instance>/<compute
    /// instance>` before; NVML names each device the same way on the same driver.
    #[test]
    fn every_uuid_form_slurm_writes_lands_on_its_device() {
        let u = &GpuOrder::Unknown;
        let parent = "GPU-5d1e0c4f-33c1-4a5e-9c3a-4d2e4c0f6a11";
        let whole = GpuId { index: 1, mig: None, uuid: parent.into() };
        let new_mig =
            GpuId { index: 0, mig: Some(3), uuid: "MIG-9c2f7a1e-1b2d-5e6f-8a9b-0c1d2e3f4a5b".into() };
        let old_mig = GpuId { index: 0, mig: Some(5), uuid: format!("MIG-{parent}/5/0") };
        let env = format!("{},MIG-9c2f7a1e-1b2d-5e6f-8a9b-0c1d2e3f4a5b,MIG-{parent}/5/0", parent);
        let a = Allocation::parse(Some("1"), Some(&env));
        assert!(a.holds(&whole, None, u) && a.holds(&new_mig, None, u) && a.holds(&old_mig, None, u));
        let other = GpuId { index: 0, mig: Some(4), uuid: format!("MIG-{parent}/4/0") };
        assert!(!a.holds(&other, None, u), "another instance of the same GPU");
        // SLURM_JOB_GPUS always holds indices, and an index names no MIG instance.
        assert!(!Allocation::parse(Some("0"), None).holds(&new_mig, None, u));
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
        let files = GpuOrder::Files(vec![Some(0), Some(1), Some(2), Some(3)]);
        assert_eq!(held(&files, 0), vec![3]);
        assert_eq!(held(&files, 3), vec![0]);
        // Files named out of order: Slurm's 0 is the first named, /dev/nvidia2, NVML's 1.
        let named = GpuOrder::Files(vec![Some(2), Some(0), Some(3), Some(1)]);
        assert_eq!(held(&named, 0), vec![1]);
        assert!(held(&named, 4).is_empty(), "past the files gres.conf names");
        let with_mig = GpuOrder::Files(vec![Some(0), None, Some(1)]);
        assert!(held(&with_mig, 1).is_empty(), "a MIG instance's place names no whole GPU");
        assert_eq!(held(&with_mig, 2), vec![2]);
        // Nothing in gres.conf: the minor number.
        assert_eq!(held(&GpuOrder::Unknown, 0), vec![3]);
        // No minor number from NVML: the NVML index stands in for it.
        assert!(names(&files, 1, 1, None) && names(&GpuOrder::Unknown, 2, 2, None));
    }

    #[test]
    fn an_allocation_is_found_within_a_budget_of_environment_bytes() {
        let proc = tempfile::tempdir().unwrap();
        let env = |pid: u32, text: &[u8]| {
            std::fs::create_dir_all(proc.path().join(pid.to_string())).unwrap();
            std::fs::write(proc.path().join(format!("{pid}/environ")), text).unwrap();
        };
        env(10, b"HOME=/root\0");
        env(11, b"SLURM_JOB_GPUS=1\0CUDA_VISIBLE_DEVICES=MIG-a\0");
        let mut huge = b"PAD=".to_vec();
        huge.extend(std::iter::repeat_n(b'x', 2 * procs::ENVIRON_MAX));
        for pid in 20..30 {
            env(pid, &huge);
        }
        env(30, b"SLURM_JOB_GPUS=3\0");
        let find = |pids: &[u32]| from_environment(proc.path(), pids);
        let a = find(&[9, 10, 11, 30]).expect("from pid 11");
        assert_eq!(a.indices, BTreeSet::from([1]));
        assert_eq!(a.uuids, BTreeSet::from(["MIG-a".to_owned()]));
        assert_eq!(find(&[30]).map(|a| a.indices), Some(BTreeSet::from([3])));
        // Ten processes with 1 MiB environments spend the budget before pid 30 is read.
        let pids: Vec<u32> = (20..=30).collect();
        assert_eq!(find(&pids), None);
        assert_eq!(find(&[10]), None);
    }
}
