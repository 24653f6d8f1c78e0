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
/// Levels below the job directory a walk goes at most (Slurm's own tree has three).
pub const MAX_DEPTH: usize = 32;

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
    // A directory wider than the whole bound is read no further than the bound: a user who
    // made 300,000 of them costs a listing of MAX_DIRS, not of all of them.
    let wide = std::cell::Cell::new(false);
    let list = |d: &Path| {
        let (names, more) = super::dir::subdir_names_at_most(d, MAX_DIRS);
        wide.set(wide.get() | more);
        names.into_iter().map(|n| d.join(n)).collect::<Vec<_>>()
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
        if found.dirs.len() >= MAX_DIRS {
            cut = true;
            break;
        }
        let Ok(links) = std::fs::metadata(&d).map(|m| m.nlink()) else {
            // Gone: a new sibling may have taken its link in the parent, so that is listed.
            if let Some(parent) = known_in
                && relisted.insert(parent.clone())
            {
                let now = list(&parent);
                for c in now.iter().filter(|c| entered(c)) {
                    if !found.dirs.contains_key(c) && !stack.iter().any(|(s, _)| s == c) {
                        stack.push((c.clone(), None));
                    }
                }
                if let Some(entry) = found.dirs.get_mut(&parent) {
                    entry.children = now;
                }
            }
            continue;
        };
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
            Some(n) if n == links => (known_children, true),
            _ => (list(&d), false),
        };
        cut |= children.iter().any(|c| depth_of(c) > MAX_DEPTH);
        stack.extend(children.iter().filter(|c| entered(c)).map(|c| (c.clone(), known.then(|| d.clone()))));
        found.dirs.insert(d, Dir { links, children, procs, empty });
    }
    let cut = cut || wide.get();
    found.cut = cut;
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
mod tests {
    use super::*;
    use crate::sources::node::discover::Version;
    use crate::sources::node::discover::tests::{layout, mk};
    use crate::sources::node::proc_cgroups::ProcCgroups;

    /// A job directory `job_7` and a /proc beside it, in `d`.
    struct Owned {
        job: PathBuf,
        proc: PathBuf,
    }

    impl Owned {
        fn new(d: &Path) -> Owned {
            Owned { job: d.join("job_7"), proc: d.join("proc") }
        }

        /// `pids` in the job's directory `rel`.
        fn put(&self, rel: &str, pids: &str) {
            mk(&self.job, rel);
            std::fs::write(self.job.join(rel).join("cgroup.procs"), pids).unwrap();
        }

        /// Process `pid`, named `name` (any bytes), run by `uid`.
        fn status(&self, pid: u32, name: &[u8], uid: u32) {
            mk(&self.proc, &pid.to_string());
            let mut s = b"Name:\t".to_vec();
            s.extend_from_slice(name);
            s.extend_from_slice(
                format!("\nState:\tS (sleeping)\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n").as_bytes(),
            );
            std::fs::write(self.proc.join(format!("{pid}/status")), s).unwrap();
        }

        fn owner(&self) -> Option<u32> {
            task_owner(&self.job, &self.proc, &mut String::new())
        }
    }

    #[test]
    fn an_ending_v2_job_is_owned_by_its_task_epilog_not_by_slurmstepd() {
        let d = tempfile::tempdir().unwrap();
        let j = Owned::new(d.path());
        j.status(100, b"slurmstepd", 0);
        j.status(101, b"python3", 1000);
        j.status(102, b"task-epilog.sh", 1000);
        // Running: its task names it.
        j.put("step_batch/slurm", "100\n");
        j.put("step_batch/user/task_0", "101\n");
        assert_eq!(j.owner(), Some(1000));
        // Ending, as seen on 26.05.5: the tasks are gone, the TaskEpilog runs beside slurmstepd.
        j.put("step_batch/user/task_0", "");
        j.put("step_batch/slurm", "100\n102\n");
        assert_eq!(j.owner(), Some(1000));
        // Only slurmstepd: nobody, never root.
        j.put("step_batch/slurm", "100\n");
        assert_eq!(j.owner(), None);
    }

    #[test]
    fn a_contained_v2_job_is_its_users_not_roots_whose_extern_sleep_came_first() {
        let d = tempfile::tempdir().unwrap();
        let j = Owned::new(d.path());
        // PrologFlags=Contain: slurmstepd forks `sleep 100000000` as root into the extern
        // step (Slurm's src/slurmd/slurmstepd/mgr.c) before the batch step starts. Seen on
        // Slurm 24.11 in the cgroup v2 VM: step_extern/user/task_special held root's `sleep`,
        // pid 650, and step_batch/user/task_0 the job's script, pid 670, as uid 1000.
        j.status(90, b"slurmstepd", 0);
        j.status(91, b"sleep", 0);
        j.put("step_extern/slurm", "90\n");
        j.put("step_extern/user/task_special", "91\n");
        assert_eq!(j.owner(), None, "only root's: Slurm names it");
        // The batch script, whose process names itself with bytes that are not UTF-8.
        j.status(120, b"\xff\xfejob", 1000);
        j.put("step_batch/user/task_0", "120\n");
        assert_eq!(j.owner(), Some(1000));
    }

    #[test]
    fn pids_of_a_subtree() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        mk(r, "job/step_0/task_0");
        std::fs::write(r.join("job/cgroup.procs"), "").unwrap();
        std::fs::write(r.join("job/step_0/cgroup.procs"), "12\n").unwrap();
        std::fs::write(r.join("job/step_0/task_0/cgroup.procs"), "13\n14\n12\n").unwrap();
        let mut out = Vec::new();
        pids(&r.join("job"), &mut String::new(), &mut out);
        assert_eq!(out, vec![12, 13, 14]);
        let mut none = Vec::new();
        pids(&r.join("gone"), &mut String::new(), &mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn a_subtree_a_user_filled_is_cut_and_its_processes_found_through_proc() {
        use std::os::unix::ffi::OsStrExt;
        let d = tempfile::tempdir().unwrap();
        let (root, proc) = (d.path().join("cg"), d.path().join("proc"));
        let job = root.join("memory/slurm/uid_1000/job_5");
        let procs = |dir: &Path, pids: &str| {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join("cgroup.procs"), pids).unwrap();
        };
        procs(&job.join("step_0/task_0"), "10\n");
        // The job's user: a directory named with bytes that are not UTF-8 holding a process,
        // more directories than the bound, and a chain deeper than it with a process at the end.
        let odd = job.join("step_0").join(OsStr::from_bytes(b"t\xff\xfe\n Account=x"));
        procs(&odd, "11\n");
        for i in 0..MAX_DIRS + 100 {
            std::fs::create_dir_all(job.join(format!("step_0/task_0/u{i}"))).unwrap();
        }
        let mut deep = job.join("step_0/task_0/u0");
        for i in 0..MAX_DEPTH + 2 {
            deep = deep.join(format!("d{i}"));
        }
        procs(&deep, "12\n");
        // /proc/<pid>/cgroup of the three, and of a process of another job.
        let rel = |p: &Path| p.strip_prefix(root.join("memory")).unwrap().to_owned();
        for (pid, dir) in [(10, job.join("step_0/task_0")), (11, odd.clone()), (12, deep.clone())] {
            std::fs::create_dir_all(proc.join(pid.to_string())).unwrap();
            let mut line = b"7:memory:/".to_vec();
            line.extend_from_slice(rel(&dir).as_os_str().as_bytes());
            line.push(b'\n');
            std::fs::write(proc.join(pid.to_string()).join("cgroup"), line).unwrap();
        }
        std::fs::create_dir_all(proc.join("13")).unwrap();
        std::fs::write(proc.join("13/cgroup"), "7:memory:/slurm/uid_1000/job_50/step_0\n").unwrap();

        let mut tree = Subtree::default();
        let mut out = Vec::new();
        let cut = pids_within(&job, &mut tree, &mut String::new(), &mut out);
        assert!(cut, "past the bounds");
        assert!(tree.dirs.len() <= MAX_DIRS, "the walk kept {} directories", tree.dirs.len());
        let layout = layout(&root, Version::V1);
        let rel_job = layout.relative(&job).unwrap();
        assert_eq!(rel_job, Path::new("slurm/uid_1000/job_5"));
        ProcCgroups::read(&proc, rel_job.components().count() + 1).pids_in(&rel_job, &mut out);
        assert_eq!(out, vec![10, 11, 12], "every process of the job, none of job_50's");

        // Within the bounds, a directory whose name is not UTF-8 is walked like any other.
        let small = d.path().join("small");
        procs(&small.join(OsStr::from_bytes(b"\xff")), "21\n");
        let mut out = Vec::new();
        assert!(!pids(&small, &mut String::new(), &mut out));
        assert_eq!(out, vec![21]);
    }

    #[test]
    fn known_pids_read_the_directories_that_held_processes_and_look_for_the_empty_ones() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let job = d.path().join("job_7");
        let procs = |rel: &str, pids: &str| {
            mk(&job, rel);
            std::fs::write(job.join(rel).join("cgroup.procs"), pids).unwrap();
        };
        // v1 as Slurm makes it: the job and step directories empty, the task's processes below.
        procs("", "");
        procs("step_batch", "");
        procs("step_batch/task_0", "10\n11\n");
        let mut tree = Subtree::default();
        let mut out = Vec::new();
        assert!(!pids_within(&job, &mut tree, &mut String::new(), &mut out));
        assert_eq!(out, vec![10, 11]);
        let links = || std::fs::metadata(&job).unwrap().nlink();
        let known = |tree: &mut Subtree| {
            let mut out = Vec::new();
            tree.known_pids(links(), &mut String::new(), &mut out).then_some(out)
        };
        assert_eq!(known(&mut tree), Some(vec![10, 11]));
        // A fork in the task's directory, or a process leaving it, is read there.
        procs("step_batch/task_0", "10\n11\n12\n");
        assert_eq!(known(&mut tree), Some(vec![10, 11, 12]));
        // One moved in from outside the job into its empty directory waits for the next walk.
        procs("", "40\n");
        assert_eq!(known(&mut tree), Some(vec![10, 11, 12]));
        out.clear();
        pids_within(&job, &mut tree, &mut String::new(), &mut out);
        assert_eq!(out, vec![10, 11, 12, 40]);
        // Now the job's directory is read each time.
        procs("", "");
        assert_eq!(known(&mut tree), Some(vec![10, 11, 12]));
        // An empty directory removed (the top's link count the same): only a walk can tell
        // what else changed.
        procs("step_batch/task_0/inner", "");
        out.clear();
        pids_within(&job, &mut tree, &mut String::new(), &mut out);
        assert_eq!(known(&mut tree), Some(vec![10, 11, 12]));
        std::fs::remove_dir_all(job.join("step_batch/task_0/inner")).unwrap();
        assert_eq!(known(&mut tree), None, "inner is gone");
    }

    #[test]
    fn pids_within_a_known_subtree_follow_its_changes() {
        let d = tempfile::tempdir().unwrap();
        let job = d.path().join("job");
        let step = |name: &str, pids: &str| {
            mk(&job, &format!("{name}/task_0"));
            std::fs::write(job.join(name).join("task_0/cgroup.procs"), pids).unwrap();
        };
        let read = |tree: &mut Subtree| {
            let mut out = Vec::new();
            pids_within(&job, tree, &mut String::new(), &mut out);
            out
        };
        step("step_0", "10\n11\n");
        let mut tree = Subtree::default();
        assert_eq!(read(&mut tree), vec![10, 11]);
        assert_eq!(read(&mut tree), vec![10, 11], "unchanged: from the known subtree");
        // A new step: the job directory has one link more.
        step("step_1", "20\n");
        assert_eq!(read(&mut tree), vec![10, 11, 20]);
        // One step ends and another starts between readings: the same link count.
        std::fs::remove_dir_all(job.join("step_0")).unwrap();
        step("step_2", "30\n");
        assert_eq!(read(&mut tree), vec![20, 30]);
        // A new task directory deeper down, and processes moving between known ones.
        step("step_2/task_0/inner", "31\n");
        std::fs::write(job.join("step_1/task_0/cgroup.procs"), "21\n").unwrap();
        assert_eq!(read(&mut tree), vec![21, 30, 31]);
        // Each result equals a fresh walk's.
        let mut fresh = Vec::new();
        pids(&job, &mut String::new(), &mut fresh);
        assert_eq!(read(&mut tree), fresh);
        // The job ends.
        std::fs::remove_dir_all(&job).unwrap();
        assert!(read(&mut tree).is_empty());
    }
}
