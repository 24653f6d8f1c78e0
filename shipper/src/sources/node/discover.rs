//! Finds the Slurm jobs on this node from their cgroups.
//!
//! - cgroup v1: `<root>/<controller>/slurm[_<node>]/uid_<uid>/job_<id>/` in each controller
//!   (memory, cpuacct, cpuset, freezer, pids, blkio, cpu); `slurm_<node>` with several slurmd on
//!   one host.
//! - cgroup v2: `<root>/system.slice/[<node>_]slurmstepd.scope/job_<id>/`.
//! - Slurm 26.05 names a job's directory by its SLUID instead (`.../slurmstepd.scope/
//!   s5F1M87GJ0R200/`) unless cgroup.conf sets `CgroupJobIdPaths=yes`: such a job is found
//!   with its SLUID, and the job table gets its job id from Slurm.
//!
//! The prefixes are configurable.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// cgroup v1 controllers the collector reads, by the directory name under the root.
pub const V1_CONTROLLERS: &[&str] = &["memory", "cpuacct", "cpuset", "freezer", "pids", "blkio", "cpu"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// Where to look and how names look.
#[derive(Debug, Clone)]
pub struct Layout {
    pub root: PathBuf,
    pub version: Version,
    /// v1: the Slurm directory under each controller, `slurm` or `slurm_<node>`.
    pub v1_prefix: String,
    /// v2: the parent of the scopes and the scope name suffix.
    pub v2_parent: String,
    pub v2_scope: String,
    /// The prefix of a job directory (`job_`).
    pub job_prefix: String,
}

impl Layout {
    /// v2 when the root is a unified hierarchy, v1 when it holds controller directories.
    pub fn detect_version(root: &Path) -> Option<Version> {
        if root.join("cgroup.controllers").is_file() {
            Some(Version::V2)
        } else if V1_CONTROLLERS.iter().any(|c| root.join(c).is_dir()) {
            Some(Version::V1)
        } else {
            None
        }
    }

    /// The layout `node.*` describes: the configured version, else the one the root shows; None
    /// when neither says (no hierarchy at the root).
    pub fn from_config(cfg: &super::config::NodeConfig) -> Option<Layout> {
        use super::config::CgroupVersion;
        let version = match cfg.cgroup_version {
            CgroupVersion::V1 => Some(Version::V1),
            CgroupVersion::V2 => Some(Version::V2),
            CgroupVersion::Auto => Layout::detect_version(&cfg.cgroup_root),
        }?;
        Some(Layout {
            root: cfg.cgroup_root.clone(),
            version,
            v1_prefix: cfg.v1_slurm_dir.clone(),
            v2_parent: cfg.v2_parent.clone(),
            v2_scope: cfg.v2_scope.clone(),
            job_prefix: cfg.job_dir_prefix.clone(),
        })
    }
}

impl Layout {
    /// `dir` from its hierarchy's root, as /proc/<pid>/cgroup names it (v1: below the
    /// controller's directory).
    pub fn relative(&self, dir: &Path) -> Option<PathBuf> {
        let rel = dir.strip_prefix(&self.root).ok()?;
        Some(match self.version {
            Version::V2 => rel.to_path_buf(),
            Version::V1 => rel.components().skip(1).collect(),
        })
    }
}

/// One job's cgroup directories on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRef {
    /// The job id; the SLUID itself until Slurm named the job of a SLUID directory.
    pub id: String,
    /// The SLUID a 26.05 job directory is named by.
    pub sluid: Option<String>,
    /// From the v1 path (`uid_<uid>`); v2 paths carry none.
    pub uid: Option<u32>,
    /// The Slurm node name in the path (`slurm_<node>`, `<node>_slurmstepd.scope`), if any.
    pub node: Option<String>,
    pub dirs: JobDirs,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobDirs {
    /// controller name -> job directory in that controller.
    V1(BTreeMap<&'static str, PathBuf>),
    V2(PathBuf),
}

impl JobRef {
    /// Its key in the job table: its node in the path (None: this host's) and its id.
    pub fn key(&self) -> super::table::Key {
        (self.node.clone(), self.id.clone())
    }

    /// The job directory of a v1 controller (or the v2 directory, whatever is asked).
    pub fn dir(&self, controller: &str) -> Option<&Path> {
        match &self.dirs {
            JobDirs::V1(m) => m.get(controller).map(PathBuf::as_path),
            JobDirs::V2(p) => Some(p),
        }
    }

    /// A directory whose subtree holds every process of the job. In v1, cpuacct first: Slurm
    /// puts only the tasks there, while slurmstepd also sits in the job's freezer and memory
    /// directories.
    pub fn process_dir(&self) -> Option<&Path> {
        match &self.dirs {
            JobDirs::V1(m) => ["cpuacct", "memory", "cpuset", "freezer", "pids"]
                .iter()
                .find_map(|c| m.get(c))
                .map(PathBuf::as_path),
            JobDirs::V2(p) => Some(p),
        }
    }
}

/// Every job with a cgroup, sorted by (node, id).
pub fn jobs(layout: &Layout) -> Vec<JobRef> {
    listed(layout, &mut |_| {})
}

/// The same, `before` called with each directory before it is listed (to watch it).
pub fn listed(layout: &Layout, before: &mut dyn FnMut(&Path)) -> Vec<JobRef> {
    match layout.version {
        Version::V1 => jobs_in(layout, V1_CONTROLLERS, before),
        Version::V2 => jobs_v2(layout, before),
    }
}

/// `(name, path)` of the subdirectories of `dir`; nothing when it cannot be read (a job that
/// just ended, a controller Slurm does not use).
fn subdirs(dir: &Path, before: &mut dyn FnMut(&Path)) -> Vec<(String, PathBuf)> {
    before(dir);
    super::dir::subdirs(dir)
        .into_iter()
        .map(|name| {
            let path = dir.join(&name);
            (name, path)
        })
        .collect()
}

/// (job id, SLUID) of a job directory's name: `job_<id>`, or a SLUID (whose id is not known
/// yet: the SLUID stands in).
fn parse_job_dir(name: &str, prefix: &str) -> Option<(String, Option<String>)> {
    if let Some(id) = name.strip_prefix(prefix).filter(|id| !id.is_empty()) {
        return Some((id.to_owned(), None));
    }
    crate::sources::slurm_jobs::is_sluid(name).then(|| (name.to_owned(), Some(name.to_owned())))
}

/// A job's place, as one process's /proc/<pid>/cgroup names it: (its node in the path, the job
/// id or SLUID, the SLUID).
pub type ProcJob = (Option<String>, String, Option<String>);

/// The job a process's cgroup (the text of /proc/<pid>/cgroup) lies in, found only where Slurm
/// puts jobs: v1 `/<slurm>[_<node>]/uid_<uid>/<job dir>/...` in a controller's line, v2
/// `/<v2_parent>/[<node>_]<v2_scope>/<job dir>/...`. A `job_<id>` elsewhere (below a job's
/// own directory, or in a user's delegated `user@UID.service/app.slice/`) is a user's name
/// and never a job's. On v1, where the lines of several controllers name jobs, they must name
/// the same one: a user owns their jobs' step directories in some controllers and could move a
/// process into another job of theirs in one (a GPU's use moved to another account).
pub fn job_of_proc_cgroup(cfg: &super::config::NodeConfig, text: &str) -> Option<ProcJob> {
    let mut named = text.lines().filter_map(|line| job_of_line(cfg, line));
    let first = named.next()?;
    named.all(|other| other == first).then_some(first)
}

/// The job one line of /proc/<pid>/cgroup names, as [`job_of_proc_cgroup`] reads it.
fn job_of_line(cfg: &super::config::NodeConfig, line: &str) -> Option<ProcJob> {
    let mut fields = line.splitn(3, ':');
    let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
    let mut parts = path.split('/').filter(|p| !p.is_empty());
    let node = if controllers.is_empty() {
        for want in cfg.v2_parent.split('/').filter(|p| !p.is_empty()) {
            if parts.next()? != want {
                return None;
            }
        }
        let scope = parts.next()?;
        match scope.strip_suffix(cfg.v2_scope.as_str()) {
            Some("") => None,
            Some(n) => Some(n.strip_suffix('_').filter(|n| !n.is_empty())?.to_owned()),
            None => return None,
        }
    } else {
        let slurm = parts.next()?;
        let node = match slurm.strip_prefix(cfg.v1_slurm_dir.as_str()) {
            Some("") => None,
            Some(n) => Some(n.strip_prefix('_').filter(|n| !n.is_empty())?.to_owned()),
            None => return None,
        };
        parts.next()?.strip_prefix("uid_")?.parse::<u32>().ok()?;
        node
    };
    let (id, sluid) = parse_job_dir(parts.next()?, &cfg.job_dir_prefix)?;
    Some((node, id, sluid))
}

/// v1: the jobs in the trees of `controllers` alone, their directories in those; `before` is
/// called with each directory before it is listed.
pub fn jobs_in(layout: &Layout, controllers: &[&'static str], before: &mut dyn FnMut(&Path)) -> Vec<JobRef> {
    let mut found: BTreeMap<(Option<String>, String), JobRef> = BTreeMap::new();
    for controller in controllers {
        for (name, slurm_dir) in subdirs(&layout.root.join(controller), before) {
            let node = if name == layout.v1_prefix {
                None
            } else if let Some(n) = name.strip_prefix(&format!("{}_", layout.v1_prefix)) {
                Some(n.to_owned())
            } else {
                continue;
            };
            for (uid_name, uid_dir) in subdirs(&slurm_dir, before) {
                let Some(uid) = uid_name.strip_prefix("uid_").and_then(|u| u.parse::<u32>().ok()) else {
                    continue;
                };
                for (job_name, job_dir) in subdirs(&uid_dir, before) {
                    let Some((id, sluid)) = parse_job_dir(&job_name, &layout.job_prefix) else {
                        continue;
                    };
                    let entry = found.entry((node.clone(), id.clone())).or_insert_with(|| JobRef {
                        id,
                        sluid,
                        uid: Some(uid),
                        node: node.clone(),
                        dirs: JobDirs::V1(BTreeMap::new()),
                    });
                    if let JobDirs::V1(m) = &mut entry.dirs {
                        m.insert(controller, job_dir);
                    }
                }
            }
        }
    }
    found.into_values().collect()
}

fn jobs_v2(layout: &Layout, before: &mut dyn FnMut(&Path)) -> Vec<JobRef> {
    let mut out = Vec::new();
    for (scope, scope_dir) in subdirs(&layout.root.join(&layout.v2_parent), before) {
        let node = if scope == layout.v2_scope {
            None
        } else if let Some(n) = scope.strip_suffix(&format!("_{}", layout.v2_scope)) {
            Some(n.to_owned())
        } else {
            continue;
        };
        for (job_name, job_dir) in subdirs(&scope_dir, before) {
            if let Some((id, sluid)) = parse_job_dir(&job_name, &layout.job_prefix) {
                out.push(JobRef { id, sluid, uid: None, node: node.clone(), dirs: JobDirs::V2(job_dir) });
            }
        }
    }
    out.sort_by(|a, b| (&a.node, &a.id).cmp(&(&b.node, &b.id)));
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn mk(root: &Path, rel: &str) {
        std::fs::create_dir_all(root.join(rel)).unwrap();
    }

    pub(crate) fn layout(root: &Path, version: Version) -> Layout {
        Layout {
            root: root.to_owned(),
            version,
            v1_prefix: "slurm".into(),
            v2_parent: "system.slice".into(),
            v2_scope: "slurmstepd.scope".into(),
            job_prefix: "job_".into(),
        }
    }

    #[test]
    fn v1_jobs_merge_controllers_and_read_nodes_and_uids() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        mk(r, "memory/slurm_c1/uid_1000/job_7/step_batch/task_0");
        mk(r, "cpuacct/slurm_c1/uid_1000/job_7/step_batch");
        mk(r, "cpuset/slurm_c1/uid_1000/job_7");
        mk(r, "memory/slurm/uid_0/job_8");
        mk(r, "memory/other/uid_0/job_9");
        mk(r, "memory/slurm/uid_x/job_10");
        mk(r, "memory/slurm/uid_0/notajob");
        assert_eq!(Layout::detect_version(r), Some(Version::V1));
        let jobs = jobs(&layout(r, Version::V1));
        assert_eq!(jobs.len(), 2, "{jobs:?}");
        let j7 = jobs.iter().find(|j| j.id == "7").unwrap();
        assert_eq!((j7.uid, j7.node.as_deref()), (Some(1000), Some("c1")));
        assert!(j7.dir("memory").unwrap().ends_with("memory/slurm_c1/uid_1000/job_7"));
        assert!(j7.dir("cpuset").is_some() && j7.dir("pids").is_none());
        assert!(j7.process_dir().unwrap().starts_with(r.join("cpuacct")), "tasks only, no slurmstepd");
        let j8 = jobs.iter().find(|j| j.id == "8").unwrap();
        assert_eq!((j8.uid, j8.node.as_deref()), (Some(0), None));
    }

    #[test]
    fn a_process_belongs_to_a_job_only_in_the_places_slurm_makes() {
        let cfg = crate::sources::node::config::NodeConfig::default();
        let job = |text: &str| job_of_proc_cgroup(&cfg, text);
        let plain = |id: &str| Some((None, id.to_owned(), None));
        assert_eq!(job("0::/system.slice/slurmstepd.scope/job_9/step_0/user/task_0\n"), plain("9"));
        assert_eq!(
            job("0::/system.slice/n1_slurmstepd.scope/job_9/step_0\n"),
            Some((Some("n1".into()), "9".into(), None))
        );
        let sluid = "0::/system.slice/slurmstepd.scope/s5F1M87GJ0R200/step_0/user/task_0/job_9\n";
        assert_eq!(job(sluid), Some((None, "s5F1M87GJ0R200".into(), Some("s5F1M87GJ0R200".into()))));
        let v1 = "12:pids:/user.slice\n4:memory:/slurm_c2/uid_1000/job_7/step_0/task_0\n0::/user.slice\n";
        assert_eq!(job(v1), Some((Some("c2".into()), "7".into(), None)));
        assert_eq!(job("3:cpu,cpuacct:/slurm/uid_1000/job_7/step_batch\n"), plain("7"));
        // Its controllers agree (steps apart), or it is no job's: a user who moved a process of
        // job 7 into their job 8's directory in one controller moves nothing to job 8.
        let both = "3:cpu,cpuacct:/slurm/uid_1000/job_7/step_0\n4:memory:/slurm/uid_1000/job_7/step_batch\n";
        assert_eq!(job(both), plain("7"));
        let moved = "6:freezer:/slurm/uid_1000/job_8/step_0\n3:cpu,cpuacct:/slurm/uid_1000/job_7/step_0\n";
        assert_eq!(job(moved), None);
        // A user's own names: below their job, in their delegated systemd tree, or look-alikes.
        assert_eq!(job("0::/system.slice/slurmstepd.scope/job_8/step_0/user/task_0/job_9\n"), plain("8"));
        for hostile in [
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/job_9\n",
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/s5F1M87GJ0R200\n",
            "0::/user.slice/user-1000.slice/session-3.scope/system.slice/slurmstepd.scope/job_9\n",
            "0::/system.slice/job_9\n",
            "0::/system.slice/evil_slurmstepd.scope.d/job_9\n",
            "0::/system.slice/_slurmstepd.scope/job_9\n",
            "4:memory:/user.slice/job_9\n",
            "4:memory:/slurm/job_9\n",
            "4:memory:/slurmx/uid_0/job_9\n",
            "4:memory:/slurm/uid_x/job_9\n",
            "1:name=systemd:/user.slice/user-1000.slice/user@1000.service/app.slice/job_9\n",
            "0::/system.slice/slurmstepd.scope/notajob/job_9\n",
        ] {
            assert_eq!(job(hostile), None, "{hostile}");
        }
    }

    #[test]
    fn v2_jobs_with_and_without_node_names() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        std::fs::write(r.join("cgroup.controllers"), "cpu memory io pids\n").unwrap();
        mk(r, "system.slice/slurmstepd.scope/job_41/step_0/user/task_0");
        mk(r, "system.slice/n5_slurmstepd.scope/job_42");
        mk(r, "system.slice/slurmstepd.scope/system");
        mk(r, "system.slice/sshd.service");
        // Slurm 26.05: named by SLUID (as seen on 26.05.5), beside look-alikes that are not.
        mk(r, "system.slice/n5_slurmstepd.scope/s5F1M87GJ0R200/step_batch/user/task_0");
        mk(r, "system.slice/n5_slurmstepd.scope/s5f1m87gj0r200");
        mk(r, "system.slice/n5_slurmstepd.scope/sshort");
        assert_eq!(Layout::detect_version(r), Some(Version::V2));
        let jobs = jobs(&layout(r, Version::V2));
        let ids: Vec<(&str, Option<&str>, Option<&str>)> =
            jobs.iter().map(|j| (j.id.as_str(), j.node.as_deref(), j.sluid.as_deref())).collect();
        assert_eq!(
            ids,
            vec![
                ("41", None, None),
                ("42", Some("n5"), None),
                ("s5F1M87GJ0R200", Some("n5"), Some("s5F1M87GJ0R200"))
            ]
        );
        assert_eq!(jobs[0].uid, None);
    }
}
