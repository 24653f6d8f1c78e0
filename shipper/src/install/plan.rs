//! What this node is, found by the daemon's own code ([`crate::role::resolve`], slurm.conf's
//! reader with its `Include`s, the configuration's checks) on the node's tree under `--root`.

use super::{InstallArgs, Root, Stop};
use crate::role::{self, Role};
use crate::settings::Settings;
use std::path::{Path, PathBuf};

const CFNCONFIG: &str = "/etc/parallelcluster/cfnconfig";
/// ParallelCluster's facts about this node, when it is one of its nodes.
#[derive(Debug, Default)]
pub struct Cfn {
    pub node_type: Option<String>,
    pub stack_name: Option<String>,
}

impl Cfn {
    fn read(path: &Path) -> Cfn {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let value = |key: &str| {
            text.lines()
                .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
                .map(|v| v.trim().trim_matches(|c| c == '"' || c == '\'').to_owned())
                .filter(|v| !v.is_empty())
        };
        Cfn { node_type: value("cfn_node_type"), stack_name: value("stack_name") }
    }
}

/// What happens to instance metadata.
#[derive(Debug, PartialEq, Eq)]
pub enum Imds {
    /// Root only: jobs or login users run here.
    Restrict,
    /// `--no-imds-restriction`: open, an earlier restriction taken away.
    Open,
    /// A controller host: left as it is (ParallelCluster's head node secures it itself;
    /// slurmctld's power-saving scripts may need the instance role as SlurmUser).
    Leave(&'static str),
}

/// The configured role, and checks the arguments that need no node: Err is exit 2.
pub fn check_args(args: &InstallArgs) -> Result<Option<Role>, Stop> {
    if let Some(p) = &args.slurm_conf
        && !p.is_absolute()
    {
        return Err(Stop::BadArguments(format!("--slurm-conf {}: give an absolute path", p.display())));
    }
    // The configuration's own checks, on what the arguments would write.
    config_text(args.cluster_name.as_deref().unwrap_or("x"), args, "auto")?;
    Ok(args.role)
}

/// A ParallelCluster login node, left alone unless a role is given: the head node ships the
/// cluster's figures.
pub fn parallelcluster_login_node(root: &Root, args: &InstallArgs) -> bool {
    args.role.is_none() && Cfn::read(&root.path(CFNCONFIG)).node_type.as_deref() == Some("LoginNode")
}

/// The role, given or detected; the reason is logged.
pub fn role(root: &Root, setting: Option<Role>, slurm_conf: Option<&Path>) -> Result<Role, Stop> {
    let proc_root = root.path("/proc");
    let host = hostname(root);
    let probe = role::Probe {
        cfnconfig: &root.path(CFNCONFIG),
        proc_root: &proc_root,
        slurm_conf,
        hostname: &host,
        trusted_owner: trusted_owner(root),
        pcs_root: &root.path(crate::sources::head::command::PCS_SCHEDULER),
    };
    let (role, why) = role::resolve(setting, &probe).map_err(|e| Stop::Failed(e.to_string()))?;
    tracing::info!("role {} ({why})", role.as_str());
    Ok(role)
}

/// Root owns what is trusted on a node; in a fake tree, whoever made it.
fn trusted_owner(root: &Root) -> u32 {
    use std::os::unix::fs::MetadataExt;
    if root.is_real() {
        return 0;
    }
    std::fs::metadata(root.dir()).map(|m| m.uid()).unwrap_or(0)
}

/// slurm.conf under the root: `--slurm-conf`, else where the daemon looks ([`crate::slurm_conf::conf_path`]
/// on the host itself, the same places under a fake root).
pub fn slurm_conf(root: &Root, args: &InstallArgs) -> Option<PathBuf> {
    if let Some(p) = &args.slurm_conf {
        return Some(root.path(p));
    }
    if root.is_real() {
        return crate::slurm_conf::conf_path(None);
    }
    crate::slurm_conf::SLURM_CONF_PLACES.iter().map(|p| root.path(p)).find(|p| p.is_file())
}

/// What IMDS needs here.
pub fn imds(root: &Root, args: &InstallArgs, role: Role, slurm_conf: Option<&Path>) -> Imds {
    if args.no_imds_restriction {
        Imds::Open
    } else if Cfn::read(&root.path(CFNCONFIG)).node_type.as_deref() == Some("HeadNode") {
        // Whatever the role (`--role all` too): a rule of ours would also shut out the users
        // ParallelCluster lets through (pcluster-admin) and its own services.
        Imds::Leave("ParallelCluster's head node: HeadNode/Imds/Secured restricts it")
    } else if role.runs_node() {
        // Jobs run here, slurmctld's host or not: the instance role is not theirs. (A
        // power-saving program run as SlurmUser here needs --no-imds-restriction.)
        if names_this_host(slurm_conf, root) {
            tracing::warn!(
                "slurmctld's host runs jobs too: IMDS for root only, so a ResumeProgram or \
                 SuspendProgram run as SlurmUser loses the instance role (--no-imds-restriction \
                 keeps it open, to jobs as well)"
            );
        }
        Imds::Restrict
    } else if names_this_host(slurm_conf, root) {
        Imds::Leave("slurmctld's host: its power-saving scripts may use the instance role")
    } else {
        // A login node (AWS PCS): its users must not write metrics as the cluster.
        Imds::Restrict
    }
}

/// The cluster name (argument, slurm.conf's ClusterName with its includes, ParallelCluster's
/// cluster name) and the configuration file's text.
pub fn config(
    root: &Root,
    args: &InstallArgs,
    role: Role,
    slurm_conf: Option<&Path>,
) -> Result<(String, String), Stop> {
    let stack_name = Cfn::read(&root.path(CFNCONFIG)).stack_name;
    let cluster = match &args.cluster_name {
        Some(c) => c.clone(),
        None => {
            let conf = crate::slurm_conf::conf_path(slurm_conf);
            match (conf.as_deref().map(|c| crate::slurm_conf::cluster_name_from(Some(c))), stack_name) {
                (Some(Ok((name, from))), _) => {
                    tracing::info!("cluster name {name} (from {from})");
                    name
                }
                (found, Some(stack)) => {
                    if let Some(Err(e)) = found {
                        tracing::info!("{e}");
                    }
                    tracing::info!("cluster name {stack} (ParallelCluster's, {CFNCONFIG})");
                    stack
                }
                (Some(Err(e)), None) => return Err(Stop::Failed(format!("{e}; or give --cluster-name"))),
                (None, None) => {
                    return Err(Stop::Failed(
                        "no cluster name: give --cluster-name, or set ClusterName in slurm.conf".into(),
                    ));
                }
            }
        }
    };
    let text = config_text(&cluster, args, role.as_str()).map_err(|e| match e {
        // A name from slurm.conf or cfnconfig the configuration refuses is the node's fault.
        Stop::BadArguments(why) if args.cluster_name.is_none() => Stop::Failed(why),
        other => other,
    })?;
    Ok((cluster, text))
}

/// True when slurm.conf names this host as a controller.
fn names_this_host(conf: Option<&Path>, root: &Root) -> bool {
    let Some(entries) = conf.and_then(|c| crate::slurm_conf::entries(c).ok()) else {
        return false;
    };
    crate::slurm_conf::controller_hosts(&entries).contains(&hostname(root))
}

/// The short host name, as [`role::short_hostname`] reads it, under the root.
fn hostname(root: &Root) -> String {
    if root.is_real() {
        return role::short_hostname();
    }
    let raw = std::fs::read_to_string(root.path("/proc/sys/kernel/hostname")).unwrap_or_default();
    raw.trim().split('.').next().filter(|h| !h.is_empty()).unwrap_or("unknown-host").to_owned()
}

/// The configuration file, checked by the daemon's own parser (exit 2 when it refuses it).
fn config_text(cluster: &str, args: &InstallArgs, role: &str) -> Result<String, Stop> {
    let quote = |s: &str| toml::Value::String(s.to_owned()).to_string();
    let mut text = format!(
        "# Written by `slurm-cw-shipper install`, rewritten when it runs again: keep site\n\
         # settings as SLURM_CW_* variables in /etc/slurm-cw-shipper/environment. Every key is\n\
         # described in infra/systemd/config.toml.example.\n\
         cluster_name = {}\n",
        quote(cluster)
    );
    // No namespace unless given: the shipper then uses the cluster's own.
    if let Some(ns) = &args.namespace {
        text.push_str(&format!("namespace = {}\n", quote(ns)));
    }
    text.push_str(&format!("role = {}\n", quote(role)));
    if let Some(conf) = &args.slurm_conf {
        text.push_str(&format!("\n[slurm]\nconf = {}\n", quote(&conf.to_string_lossy())));
    }
    match Settings::from_toml(&text, "the configuration", std::iter::empty()) {
        Ok(_) => Ok(text),
        Err(e) => Err(Stop::BadArguments(e.to_string())),
    }
}
