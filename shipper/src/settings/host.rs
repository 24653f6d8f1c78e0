//! What the settings say about this host once read: its slurm.conf, gres.conf, cluster and node
//! names (the files are read by [`crate::slurm_conf`]).

use super::{ConfigError, Settings};
use slurm_cw_formats::slurm::gres_conf::GresConf;
use std::path::PathBuf;

impl Settings {
    /// The slurm.conf to read: `slurm.conf`, else the first that exists of $SLURM_CONF and the
    /// usual places.
    pub fn slurm_conf_path(&self) -> Option<PathBuf> {
        crate::slurm_conf::conf_path(self.slurm.conf.as_deref())
    }

    /// gres.conf beside slurm.conf (with its includes), and where it was.
    pub fn gres_conf(&self) -> (Option<PathBuf>, GresConf) {
        crate::slurm_conf::gres_conf_beside(self.slurm_conf_path().as_deref())
    }

    /// The cluster name, and where it came from: configured, or slurm.conf's ClusterName.
    pub fn resolve_cluster_name(&self) -> Result<(String, String), ConfigError> {
        match &self.cluster_name {
            Some(c) => Ok((c.clone(), "configuration".into())),
            None => crate::slurm_conf::cluster_name_from(self.slurm_conf_path().as_deref()),
        }
    }

    /// The `NodeName` dimension of this host.
    pub fn node_name(&self) -> String {
        self.node_name.clone().unwrap_or_else(crate::role::short_hostname)
    }
}
