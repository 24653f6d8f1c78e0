//! A job's cgroup subtree: the pids in it, walked within bounds a job's user cannot push
//! past (the directories below a job's steps are its user's), and whom the job runs as.

use super::held::{Held, PER_JOB_DIRS, read_via};
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Directories of one job's subtree a walk visits at most. A job's user owns its step and
/// task directories (v1; delegated subtrees on v2) and may make 100,000 of them: past this
/// the walk stops and the job's processes are found from /proc instead
/// (`proc_cgroups.rs`).
/// Slurm's own tree is a few directories a step and one a task.
pub const MAX_DIRS: usize = 4096;
/// The longest path the kernel takes, its NUL included.
const PATH_MAX: usize = 4096;
/// Levels below the job directory a walk goes at most (Slurm's own tree has three).
pub const MAX_DEPTH: usize = 32;
/// Bytes of paths a walk keeps at most. Within [`MAX_DIRS`] a user could still name each
/// directory near `PATH_MAX` (4 KiB) deep in a chain of long names, and make a walk hold tens
/// of megabytes; Slurm's own paths are about 100 bytes, 400 KiB for [`MAX_DIRS`] of them.
pub const MAX_PATH_BYTES: usize = 1 << 20;

/// Every pid in the cgroup subtree at `dir` (cgroup.procs of it and all its descendants).
/// True when the subtree was larger than the bounds and the walk was cut.
pub fn pids(dir: &Path, buf: &mut String, out: &mut Vec<u32>) -> bool {
    walk_pids(dir, &mut Subtree::default(), false, buf, out, |_| true)
}

/// A job's cgroup subtree as last listed: each directory's link count and subdirectories,
/// and its cgroup.procs held open (v2: the first [`PER_JOB_DIRS`] directories). On cgroupfs
/// (kernfs) and tmpfs a directory has two links plus one per subdirectory, so an unchanged
/// count with every known subdirectory still there means nothing was added: one stat instead
/// of a listing.
#[derive(Debug, Default)]
pub struct Subtree {
    dirs: HashMap<PathBuf, Dir>,
    /// The directory walked from.
    top: Option<PathBuf>,
    /// The last walk was past the bounds: [`Subtree::known_pids`] cannot tell.
    cut: bool,
    /// cgroup.procs may be held open (v2). v1 serves it from a pid list cached per open file
    /// and reloaded only a second after its last read: a held one would read stale.
    hold: bool,
}

#[derive(Debug)]
struct Dir {
    links: u64,
    children: Vec<PathBuf>,
    procs: Option<Held>,
    /// Its cgroup.procs read empty at the walk.
    empty: bool,
}

/// [`pids`], listing only the directories of `tree` whose subdirectories changed, and keeping
/// the subtree as found (its cgroup.procs files open) in `tree`.
pub fn pids_within(dir: &Path, tree: &mut Subtree, buf: &mut String, out: &mut Vec<u32>) -> bool {
    walk_pids(dir, tree, true, buf, out, |_| true)
}

impl Subtree {
    /// Every pid in the subtree as last walked, read from its directories' cgroup.procs (held
    /// open: one pread each), without a listing; `links` is the top directory's link count
    /// now. False (and `out` unfinished) when only a walk can tell: the top directory has
    /// another link count (a step began or ended), a known directory is gone, the last walk
    /// was cut, or there was none.
    ///
    /// Why this is enough to see a job's process set change: a process enters a job's subtree
    /// by fork (into its parent's directory, a known one), or moved by Slurm into a new step's
    /// directory (a link more at the top) or by the job's user from one directory of it into
    /// another (it leaves a known one); a new thread is no new process.
    ///
    /// So a directory that held no process at the walk, and whose cgroup.procs is not held
    /// (v1), is only looked for: one stat (none for the top, which the caller stats) instead
    /// of an open, a read and a close. A process moved into it from outside the job waits for
    /// the job's next walk (every `process_every` cycles); its memory and CPU are in the job's
    /// figures all along.
    pub fn known_pids(&mut self, links: u64, buf: &mut String, out: &mut Vec<u32>) -> bool {
        let top_links = self.top.as_ref().and_then(|t| self.dirs.get(t)).map(|d| d.links);
        if self.cut || top_links != Some(links) {
            return false;
        }
        for (path, d) in &mut self.dirs {
            if d.empty && d.procs.is_none() {
                // The top directory's stat is the caller's `links`.
                if Some(path) != self.top.as_ref() && std::fs::symlink_metadata(path).is_err() {
                    return false;
                }
                continue;
            }
            if !read_via(&mut d.procs, path, "cgroup.procs", false, buf) {
                return false;
            }
            out.extend(buf.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
        }
        out.sort_unstable();
        out.dedup();
        true
    }

    /// Holds the directories' cgroup.procs open from the next walk on (cgroup v2 only).
    pub fn hold_procs(&mut self, on: bool) {
        self.hold = on;
    }

    /// The last walk was past the bounds.
    pub fn is_cut(&self) -> bool {
        self.cut
    }

    /// cgroup.procs files held open.
    pub fn held(&self) -> usize {
        self.dirs.values().filter(|d| d.procs.is_some()).count()
    }
}

/// The job's task processes: [`pids`] less cgroup v2's `step_*/slurm/`, where Slurm's step
/// daemon (root) lives beside the step's `user/` tree.
pub fn task_pids(dir: &Path, buf: &mut String, out: &mut Vec<u32>) {
    walk_pids(dir, &mut Subtree::default(), false, buf, out, |name| name != STEP_DAEMON_DIR);
}

/// cgroup v2: the directory of a step that holds slurmstepd.
const STEP_DAEMON_DIR: &str = "slurm";

/// The pids of the subtree at `dir`, into the directories `enter` accepts by name; `tree` is
/// the subtree as last listed, and as found on return (its cgroup.procs held open when `hold`).
fn walk_pids(
    dir: &Path,
    tree: &mut Subtree,
    hold: bool,
    buf: &mut String,
    out: &mut Vec<u32>,
    enter: impl Fn(&OsStr) -> bool,
) -> bool {
    use std::os::unix::fs::MetadataExt;
    // Every name, UTF-8 or not: a directory a user named with other bytes still holds
    // processes.
    // The walk keeps at most MAX_DIRS subdirectory names, and MAX_PATH_BYTES of their paths,
    // in all (each directory listed, or known from the last walk): a user who made 300,000
    // directories, or a few thousand with paths near PATH_MAX, costs a listing of the bound
    // and a cut walk, not all of them held in memory.
    let kept = std::cell::Cell::new((0usize, 0usize));
    let wide = std::cell::Cell::new(false);
    let keep = |children: &[PathBuf]| {
        let (names, bytes) = kept.get();
        let bytes = bytes + children.iter().map(|c| c.as_os_str().len()).sum::<usize>();
        kept.set((names + children.len(), bytes));
        wide.set(wide.get() | (bytes > MAX_PATH_BYTES));
    };
    let list = |d: &Path| {
        let (names, bytes) = kept.get();
        let room = (MAX_DIRS.saturating_sub(names), MAX_PATH_BYTES.saturating_sub(bytes));
        let (names, more) = super::dir::subdir_names_within(d, room.0, room.1);
        wide.set(wide.get() | more);
        let children = names.into_iter().map(|n| d.join(n)).collect::<Vec<_>>();
        keep(&children);
        children
    };
    let depth_of = |p: &Path| p.strip_prefix(dir).map_or(0, |r| r.components().count());
    let entered = |p: &PathBuf| p.file_name().is_some_and(&enter) && depth_of(p) <= MAX_DEPTH;
    let mut cut = false;
    let hold = hold && tree.hold;
    let mut found = Subtree { top: Some(dir.to_path_buf()), hold: tree.hold, ..Subtree::default() };
    let mut relisted = HashSet::new();
    let mut held = 0;
    // (directory, its parent when it came from the parent's earlier listing)
    let mut stack: Vec<(PathBuf, Option<PathBuf>)> = vec![(dir.to_path_buf(), None)];
    while let Some((d, known_in)) = stack.pop() {
        if found.dirs.len() >= MAX_DIRS || wide.get() {
            cut = true;
            break;
        }
        // A directory queued twice (listed again after a sibling went) is walked once.
        if found.dirs.contains_key(&d) {
            continue;
        }
        let links = match std::fs::metadata(&d) {
            Ok(m) => m.nlink(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Gone: a new sibling may have taken its link in the parent, so that is listed.
                if let Some(parent) = known_in
                    && relisted.insert(parent.clone())
                {
                    let now = list(&parent);
                    stack.extend(
                        now.iter()
                            .filter(|c| entered(c) && !found.dirs.contains_key(*c))
                            .map(|c| (c.clone(), None)),
                    );
                    if let Some(entry) = found.dirs.get_mut(&parent) {
                        entry.children = now;
                    }
                }
                continue;
            }
            // There but out of reach (a path past PATH_MAX, which /proc/<pid>/cgroup cannot
            // print either): the walk cannot tell what it holds.
            Err(_) => {
                cut = true;
                continue;
            }
        };
        // Its cgroup.procs past PATH_MAX: a read that fails, not an empty directory.
        cut |= d.as_os_str().len() + "/cgroup.procs".len() >= PATH_MAX;
        let (known_links, known_children, mut procs) = match tree.dirs.remove(&d) {
            Some(o) => (Some(o.links), o.children, o.procs),
            None => (None, Vec::new(), None),
        };
        let read = read_via(&mut procs, &d, "cgroup.procs", hold && held < PER_JOB_DIRS, buf);
        if read {
            out.extend(buf.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
        }
        let empty = read && buf.trim().is_empty();
        held += usize::from(procs.is_some());
        let (children, known) = match known_links {
            Some(n) if n == links => {
                keep(&known_children);
                (known_children, true)
            }
            _ => (list(&d), false),
        };
        cut |= children.iter().any(|c| depth_of(c) > MAX_DEPTH);
        stack.extend(children.iter().filter(|c| entered(c)).map(|c| (c.clone(), known.then(|| d.clone()))));
        found.dirs.insert(d, Dir { links, children, procs, empty });
    }
    let cut = cut || wide.get();
    found.cut = cut;
    if cut {
        // Nothing of a cut walk is kept: its next walk starts afresh anyway (`known_pids` asks
        // for one), and forty jobs of one user, each past the bounds, would otherwise keep
        // about 100 MB of paths and descriptors between cycles, against the unit's 128 MB.
        found.dirs.clear();
    }
    *tree = found;
    out.sort_unstable();
    out.dedup();
    cut
}

/// Whom a job runs as: the real uid (`Uid:` in /proc/<pid>/status, which a setuid program
/// does not change) of its first task process that is not Slurm's. Asking slurmstepd instead
/// would make every cgroup v2 job root's, and deny its user's own final-sample request.
/// A job whose tasks have all ended (cgroup v2, its TaskEpilog asking for the final sample)
/// has only Slurm's processes left: the TaskEpilog, which slurmstepd starts as the job's user
/// in `step_*/slurm/`, where no user can move a process, names it.
pub fn task_owner(dir: &Path, proc_root: &Path, buf: &mut String) -> Option<u32> {
    let mut pids = Vec::new();
    task_pids(dir, buf, &mut pids);
    if let Some(uid) = first_owner(&pids, proc_root, buf) {
        return Some(uid);
    }
    pids.clear();
    self::pids(dir, buf, &mut pids);
    first_owner(&pids, proc_root, buf)
}

/// The real uid of the first of `pids` that is not root's. Root runs Slurm's own processes in
/// a job's cgroup: slurmstepd, and with `PrologFlags=Contain` the extern step's
/// `sleep 100000000`, which slurmstepd forks without leaving root and which usually has the
/// job's lowest pid. A job run as root is named by Slurm instead.
fn first_owner(pids: &[u32], proc_root: &Path, buf: &mut String) -> Option<u32> {
    // Root's own are a few (slurmstepd, the extern sleep, sshd sessions pam_slurm_adopt put
    // there): past them a job all root's is root's, and is not read whole each cycle.
    const LOOKED_AT: usize = 64;
    pids.iter().take(LOOKED_AT).find_map(|&pid| {
        super::procs::name_and_uid(proc_root, pid, buf).map(|(_, uid)| uid).filter(|&u| u != 0)
    })
}

#[cfg(test)]
#[path = "subtree_tests.rs"]
mod tests;
