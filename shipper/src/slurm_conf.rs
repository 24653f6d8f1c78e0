//! Reads the few slurm.conf keys the shipper needs (ClusterName, SlurmctldHost), and gres.conf's
//! GPU order, following `Include` lines as Slurm does.

use crate::config::ConfigError;
use slurm_cw_formats::slurm::gres_conf::GresConf;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("cannot read {path}: {source}")]
pub struct ReadError {
    pub path: PathBuf,
    source: std::io::Error,
}

/// Every `Key=Value` of the file and its includes, keys as written, in file order.
pub fn entries(path: &Path) -> Result<Vec<(String, String)>, ReadError> {
    let mut out = Vec::new();
    for line in with_includes(path)?.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        // A node or partition line carries several Key=Value pairs; the first names the line.
        if let Some((k, v)) = line.split_once('=') {
            let value = v.split_whitespace().next().unwrap_or("");
            out.push((k.trim().to_owned(), value.to_owned()));
        }
    }
    Ok(out)
}

/// The text of a Slurm configuration file with its `Include` lines replaced by the files they
/// name (relative to the including file), as Slurm reads it.
pub fn with_includes(path: &Path) -> Result<String, ReadError> {
    let mut out = String::new();
    include_into(path, &mut out, 0)?;
    Ok(out)
}

fn include_into(path: &Path, out: &mut String, depth: usize) -> Result<(), ReadError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReadError { path: path.to_owned(), source })?;
    for line in text.lines() {
        let bare = line.split('#').next().unwrap_or("").trim();
        if let Some(rest) = strip_prefix_ci(bare, "include ") {
            let inc = Path::new(rest.trim());
            let inc = if inc.is_absolute() {
                inc.to_owned()
            } else {
                path.parent().unwrap_or(Path::new("/")).join(inc)
            };
            // Includes of includes are rare; a loop must not hang the daemon.
            if depth < 8 && inc.is_file() {
                include_into(&inc, out, depth + 1)?;
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    Ok(())
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    if s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix) {
        Some(&s[prefix.len()..])
    } else {
        None
    }
}

/// The first value of `key` (case-insensitive).
pub fn value(entries: &[(String, String)], key: &str) -> Option<String> {
    entries.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v.clone())
}

/// What `PrivateData` keeps from users (`jobs`, `users`, `accounts`...), in lower case.
pub fn private_data(entries: &[(String, String)]) -> Vec<String> {
    value(entries, "PrivateData")
        .map(|v| v.split(',').map(|w| w.trim().to_ascii_lowercase()).filter(|w| !w.is_empty()).collect())
        .unwrap_or_default()
}

pub fn cluster_name(path: &Path) -> Result<Option<String>, ReadError> {
    Ok(value(&entries(path)?, "ClusterName").filter(|v| !v.is_empty()))
}

/// Host names of the controllers: `SlurmctldHost=name(addr)` lines, or the old `ControlMachine`.
pub fn controller_hosts(entries: &[(String, String)]) -> Vec<String> {
    controllers(entries).into_iter().map(|c| c.name).collect()
}

/// One slurmctld slurm.conf names: its host name and, where given, its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Controller {
    pub name: String,
    pub addr: Option<String>,
}

impl Controller {
    /// Where to reach it: the address where slurm.conf gives one (a login node may not resolve
    /// the controller's name: AWS PCS's lives in another account), else the name.
    pub fn host(&self) -> &str {
        self.addr.as_deref().unwrap_or(&self.name)
    }
}

/// The controllers, primary first then the backups in order, as slurmctld takes over:
/// `SlurmctldHost=name(addr)` lines, or the old `ControlMachine`/`ControlAddr` and
/// `BackupController`/`BackupAddr`.
pub fn controllers(entries: &[(String, String)]) -> Vec<Controller> {
    let parse = |v: &str, old_addr: Option<&str>| {
        let (name, addr) = match v.split_once('(') {
            Some((n, a)) => (n.trim(), Some(a.trim_end_matches(')').trim().to_owned())),
            None => (v.trim(), None),
        };
        let addr =
            addr.filter(|a| !a.is_empty()).or_else(|| value(entries, old_addr?).filter(|a| !a.is_empty()));
        (!name.is_empty()).then(|| Controller { name: name.to_owned(), addr })
    };
    let of =
        |key: &'static str| entries.iter().filter(move |(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v);
    let mut out: Vec<Controller> = of("SlurmctldHost").filter_map(|v| parse(v, None)).collect();
    out.extend(of("ControlMachine").filter_map(|v| parse(v, Some("ControlAddr"))));
    out.extend(of("BackupController").filter_map(|v| parse(v, Some("BackupAddr"))));
    out
}

/// slurmctld's port: the first of `SlurmctldPort` (a range on ParallelCluster), else 6817.
pub fn slurmctld_port(entries: &[(String, String)]) -> String {
    value(entries, "SlurmctldPort")
        .map(|p| p.split(['-', ',']).next().unwrap_or("").trim().to_owned())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "6817".into())
}

/// Where Slurm's clients look for slurm.conf, after `$SLURM_CONF`: ParallelCluster's, the
/// packages', and the configless cache (`/run/slurm/conf`, which slurmd or, on a login node,
/// sackd fetches from slurmctld: AWS PCS's only copy).
pub const SLURM_CONF_PLACES: [&str; 4] = [
    "/opt/slurm/etc/slurm.conf",
    "/etc/slurm/slurm.conf",
    "/etc/slurm-llnl/slurm.conf",
    "/run/slurm/conf/slurm.conf",
];

/// The slurm.conf to read: `configured` (the `slurm.conf` key), else the first that exists of
/// $SLURM_CONF and the usual places.
pub fn conf_path(configured: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = configured {
        return Some(p.to_owned());
    }
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("SLURM_CONF") {
        candidates.push(p.into());
    }
    candidates.extend(SLURM_CONF_PLACES.iter().map(PathBuf::from));
    candidates.into_iter().find(|p| p.is_file())
}

/// gres.conf beside slurm.conf (with its includes), and where it was; empty when there is none
/// or it cannot be read.
pub fn gres_conf_beside(slurm_conf: Option<&Path>) -> (Option<PathBuf>, GresConf) {
    let Some(path) = slurm_conf.and_then(|p| Some(p.parent()?.join("gres.conf"))) else {
        return (None, GresConf::default());
    };
    match with_includes(&path) {
        Ok(text) => (Some(path), GresConf::parse(&text)),
        Err(e) => {
            if path.exists() {
                tracing::warn!(error = %e, "gres.conf unreadable: GPU numbers taken for device numbers");
            }
            (None, GresConf::default())
        }
    }
}

/// The cluster name when `cluster_name` is not set: slurm.conf's ClusterName, and the file it
/// came from.
pub fn cluster_name_from(conf: Option<&Path>) -> Result<(String, String), ConfigError> {
    let Some(conf) = conf else {
        return Err(ConfigError::invalid(
            "cluster_name",
            format!(
                "not set, and no slurm.conf found ($SLURM_CONF, {}) to read ClusterName from; \
                 set cluster_name or SLURM_CW_CLUSTER_NAME",
                SLURM_CONF_PLACES.join(", ")
            ),
        ));
    };
    match cluster_name(conf) {
        Ok(Some(name)) => Ok((name, conf.display().to_string())),
        Ok(None) => Err(ConfigError::invalid(
            "cluster_name",
            format!("not set, and {} has no ClusterName; set cluster_name", conf.display()),
        )),
        Err(e) => Err(ConfigError::invalid("cluster_name", format!("not set, and {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_keys_and_includes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("slurm.conf"),
            "# ParallelCluster style\nSlurmctldHost=ip-10-0-0-1(10.0.0.1)\n\
             include slurm_parallelcluster.conf\nNodeName=a CPUs=2\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("slurm_parallelcluster.conf"), "ClusterName=pcluster # x\n").unwrap();
        let e = entries(&dir.path().join("slurm.conf")).unwrap();
        assert_eq!(value(&e, "clustername").as_deref(), Some("pcluster"));
        assert_eq!(controller_hosts(&e), vec!["ip-10-0-0-1"]);
        assert_eq!(value(&e, "NodeName").as_deref(), Some("a"));
        assert!(entries(&dir.path().join("missing.conf")).is_err());
    }

    #[test]
    fn gres_conf_beside_slurm_conf_with_its_includes() {
        use slurm_cw_formats::slurm::gres_conf::GpuOrder;
        let dir = tempfile::tempdir().unwrap();
        let pc = dir.path().join("pcluster");
        std::fs::create_dir_all(&pc).unwrap();
        std::fs::write(dir.path().join("slurm.conf"), "ClusterName=c\n").unwrap();
        // Shaped like ParallelCluster's: gres.conf includes the file it generates per queue.
        std::fs::write(
            dir.path().join("gres.conf"),
            format!(
                "# PCLUSTER CONFIGURATION\ninclude {}\n",
                pc.join("slurm_parallelcluster_gres.conf").display()
            ),
        )
        .unwrap();
        std::fs::write(
            pc.join("slurm_parallelcluster_gres.conf"),
            "NodeName=gpu-st-p5-[1-4] Name=gpu Type=h100 File=/dev/nvidia[0-7]\n",
        )
        .unwrap();
        let conf = dir.path().join("slurm.conf");
        let (path, gres) = gres_conf_beside(Some(&conf));
        assert_eq!(path, Some(dir.path().join("gres.conf")));
        assert_eq!(gres.gpu_order("gpu-st-p5-2"), GpuOrder::Files((0..8).map(Some).collect()));
        std::fs::remove_file(dir.path().join("gres.conf")).unwrap();
        assert_eq!(gres_conf_beside(Some(&conf)), (None, Default::default()));
    }

    #[test]
    fn controllers_primary_first_with_their_addresses() {
        let e = |text: &str| -> Vec<(String, String)> {
            text.lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        };
        let c = |name: &str, addr: Option<&str>| Controller { name: name.into(), addr: addr.map(Into::into) };
        // A login node's: the controller elsewhere, reached by its address.
        let pcs =
            e("SlurmctldHost=slurmctld-primary(10.3.149.220)\nSlurmctldHost=backup\nSlurmctldPort=6817");
        assert_eq!(controllers(&pcs), [c("slurmctld-primary", Some("10.3.149.220")), c("backup", None)]);
        assert_eq!(controllers(&pcs)[0].host(), "10.3.149.220");
        assert_eq!(controller_hosts(&pcs), ["slurmctld-primary", "backup"]);
        let old = e("BackupController=b\nControlMachine=a\nControlAddr=10.0.0.1\nBackupAddr=10.0.0.2");
        assert_eq!(controllers(&old), [c("a", Some("10.0.0.1")), c("b", Some("10.0.0.2"))], "primary first");
        assert_eq!(controllers(&e("SlurmctldHost=v6([fd00::1])"))[0].host(), "[fd00::1]");
        assert_eq!(slurmctld_port(&e("SlurmctldPort=6820-6829")), "6820");
        assert_eq!(slurmctld_port(&e("ClusterName=x")), "6817");
    }

    #[test]
    fn include_loops_stop() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.conf"), "Include a.conf\nClusterName=x\n").unwrap();
        assert_eq!(cluster_name(&dir.path().join("a.conf")).unwrap().as_deref(), Some("x"));
    }
}
