//! Whom a job runs as and its account, where no node collector's reading names them (the GPU
//! collector finding the jobs itself).

use super::{GpuCollector, GpuJob};
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
