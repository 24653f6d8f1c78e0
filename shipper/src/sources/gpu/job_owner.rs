//! Whose a GPU process is, and whom a job runs as and its account where no node collector's
//! reading names them (the GPU collector finding the jobs itself).

use super::{GpuCollector, GpuJob};
use crate::sources::node::config::NodeConfig;
use crate::sources::node::discover::job_of_proc_cgroup;
use crate::sources::node::owner;
use crate::sources::node::procs;

impl GpuCollector {
    /// Whom a job runs as and its account, where no node collector's reading names them.
    pub(super) fn owner(&mut self, gj: &GpuJob) -> (String, String) {
        let proc_root = &self.node.proc_root;
        let user = self.owners.user(gj.uid);
        let account = match &gj.account {
            Some(a) => a.clone(),
            None => {
                self.owners
                    .account(&gj.r.id, || {
                        let account = gj
                            .pids
                            .iter()
                            .find_map(|p| procs::environ_var(proc_root, *p, "SLURM_JOB_ACCOUNT"))?;
                        Some((account, owner::UNKNOWN.to_owned()))
                    })
                    .0
            }
        };
        (user, account)
    }
}

/// What /proc/<pid>/cgroup says of a GPU process.
pub(super) enum ProcSays {
    /// In the cgroup of `jobs[j]`.
    Job(usize),
    /// Read: in none of `jobs`.
    NoJob,
    /// Not read (gone, or a fixture without it).
    Unread,
}

/// The job of a GPU process, from /proc/<pid>/cgroup: only where Slurm puts jobs
/// ([`job_of_proc_cgroup`]), never a `job_<id>` a user made in a tree of their own (their job's,
/// or systemd's `user@UID.service`); telling a process /proc places in no job from one it does
/// not show.
pub(super) fn proc_says(node: &NodeConfig, pid: u32, jobs: &[GpuJob]) -> ProcSays {
    let mut text = String::new();
    if !crate::sources::node::read_into(&node.proc_root.join(pid.to_string()).join("cgroup"), &mut text) {
        return ProcSays::Unread;
    }
    let Some((on, id, sluid)) = job_of_proc_cgroup(node, &text) else { return ProcSays::NoJob };
    // A SLUID job keeps its SLUID once Slurm named its id.
    let found = jobs.iter().position(|j| {
        j.r.node == on
            && match &sluid {
                Some(s) => j.r.sluid.as_ref() == Some(s),
                None => j.r.sluid.is_none() && j.r.id == id,
            }
    });
    found.map_or(ProcSays::NoJob, ProcSays::Job)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The job /proc names, None where it names none or does not show the process.
    fn job_of_pid(node: &NodeConfig, pid: u32, jobs: &[GpuJob]) -> Option<usize> {
        match proc_says(node, pid, jobs) {
            ProcSays::Job(j) => Some(j),
            ProcSays::NoJob | ProcSays::Unread => None,
        }
    }
    use crate::sources::node::discover::{JobDirs, JobRef};

    #[test]
    fn a_gpu_process_belongs_to_the_job_directory_slurm_made_never_a_users_look_alike() {
        let d = tempfile::tempdir().unwrap();
        let node = NodeConfig { proc_root: d.path().to_owned(), ..NodeConfig::default() };
        let job = |id: &str, sluid: Option<&str>| GpuJob {
            r: JobRef {
                id: id.into(),
                sluid: sluid.map(Into::into),
                uid: None,
                node: None,
                dirs: JobDirs::V2(d.path().join(id)),
            },
            pids: Vec::new(),
            uid: None,
            account: None,
        };
        let cgroup = |pid: u32, text: &str| {
            std::fs::create_dir_all(d.path().join(pid.to_string())).unwrap();
            std::fs::write(d.path().join(format!("{pid}/cgroup")), text).unwrap();
        };
        // Job 8's user made a directory named after job 9 below its own task.
        cgroup(1, "0::/system.slice/slurmstepd.scope/job_8/step_0/user/task_0/job_9\n");
        cgroup(2, "0::/system.slice/slurmstepd.scope/job_9/step_0/user/task_0\n");
        cgroup(3, "0::/system.slice/n1_slurmstepd.scope/s5F1M87GJ0R200/step_0/user/task_0/job_9\n");
        // A user's own systemd tree (delegated to them): a GPU process there is no job's.
        cgroup(4, "0::/user.slice/user-1000.slice/user@1000.service/app.slice/job_9\n");
        cgroup(5, "0::/user.slice/user-1000.slice/user@1000.service/app.slice/s5F1M87GJ0R200\n");
        let only_9 = [job("9", None)];
        assert_eq!(job_of_pid(&node, 1, &only_9), None, "job 8's process is never job 9's");
        assert_eq!(job_of_pid(&node, 2, &only_9), Some(0));
        assert_eq!(job_of_pid(&node, 3, &only_9), None);
        assert_eq!(job_of_pid(&node, 4, &only_9), None, "a user's app.slice/job_9 is not job 9");
        let mut both = vec![job("9", None), job("8", None), job("s5F1M87GJ0R200", Some("s5F1M87GJ0R200"))];
        assert_eq!(job_of_pid(&node, 1, &both), Some(1));
        assert_eq!(job_of_pid(&node, 4, &both), None);
        assert_eq!(job_of_pid(&node, 5, &both), None, "nor its SLUID look-alike");
        assert_eq!(job_of_pid(&node, 3, &both), None, "node n1's job is not this host's");
        both[2].r.node = Some("n1".into());
        assert_eq!(job_of_pid(&node, 3, &both), Some(2), "a SLUID directory, before the user's names");
        both[2].r.id = "77".into();
        assert_eq!(job_of_pid(&node, 3, &both), Some(2), "found by its SLUID once Slurm named its id");
    }
}
