//! The way to a job's processes when its cgroup subtree is past the walk's bounds
//! ([`super::subtree`]): every process's cgroup paths, from /proc/<pid>/cgroup.

use std::path::Path;

/// Every process's cgroup paths (from /proc/<pid>/cgroup), read once a cycle where some
/// job's walk was cut (one pass serves every such job). Only the distinct paths below the
/// hierarchies' roots are kept, each to its first `levels` levels (a job directory's and one
/// more: v1 `slurm_<node>/uid_<uid>/job_<id>`, v2 `system.slice/slurmstepd.scope/job_<id>`), in one
/// exact-size allocation a process, and the file is read into one buffer: a user who starts
/// 30,000 processes costs about 100 bytes each, not a page each (the unit's MemoryMax is
/// 128 MB), however long the names of the directories they made.
#[derive(Debug, Default)]
pub struct ProcCgroups(Vec<(u32, Box<[u8]>)>);

impl ProcCgroups {
    pub fn read(proc_root: &Path, levels: usize) -> ProcCgroups {
        let mut all = Vec::new();
        let mut text = Vec::new();
        let mut paths = Vec::new();
        let _ = super::dir::entries(proc_root, |name, _| {
            let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else { return };
            text.clear();
            if !super::read_bytes(&proc_root.join(name).join("cgroup"), &mut text) {
                return;
            }
            paths.clear();
            // `hierarchy-ID:controllers:path`, the path from the hierarchy's root.
            for line in text.split(|&b| b == b'\n') {
                let path = line.splitn(3, |&b| b == b':').nth(2).unwrap_or_default();
                let path = path.strip_prefix(b"/").unwrap_or(path);
                // Down to a job's directory and a level more: what a job's user names below is
                // theirs to make as long as the kernel allows, and never needed here.
                let path = match path
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| **b == b'/')
                    .nth(levels.saturating_sub(1))
                {
                    Some((cut, _)) => &path[..cut],
                    None => path,
                };
                let known = paths.split(|&b| b == b'\n').any(|p: &[u8]| p == path);
                if !path.is_empty() && !known {
                    if !paths.is_empty() {
                        paths.push(b'\n');
                    }
                    paths.extend_from_slice(path);
                }
            }
            if !paths.is_empty() {
                all.push((pid, paths.as_slice().into()));
            }
        });
        all.shrink_to_fit();
        ProcCgroups(all)
    }

    /// The pids of every process whose cgroup (any line) is `rel` or below it: the way to a
    /// job's processes when its subtree is past the walk's bounds, bounded by the processes on
    /// the node rather than by what its user made.
    pub fn pids_in(&self, rel: &Path, out: &mut Vec<u32>) {
        use std::os::unix::ffi::OsStrExt;
        let want = rel.as_os_str().as_bytes();
        for (pid, paths) in &self.0 {
            let inside = paths
                .split(|&b| b == b'\n')
                .any(|path| path.strip_prefix(want).is_some_and(|rest| rest.is_empty() || rest[0] == b'/'));
            if inside {
                out.push(*pid);
            }
        }
        out.sort_unstable();
        out.dedup();
    }
}
