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
        s.extend_from_slice(format!("\nState:\tS (sleeping)\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n").as_bytes());
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
    assert!(tree.dirs.is_empty(), "a cut walk keeps no directory: {}", tree.dirs.len());
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

impl Subtree {
    /// Bytes of the paths the walk kept: its directories and their subdirectories.
    fn kept_bytes(&self) -> usize {
        self.dirs
            .iter()
            .map(|(p, d)| p.as_os_str().len() + d.children.iter().map(|c| c.as_os_str().len()).sum::<usize>())
            .sum()
    }
}

/// A chain of directories named `len` bytes each under `top`, `levels` deep: its bottom.
fn long_chain(top: &Path, levels: usize, len: usize) -> PathBuf {
    let mut d = top.to_path_buf();
    for i in 0..levels {
        d = d.join(format!("{i:0>len$}"));
    }
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_subtree_of_long_paths_is_cut_before_the_walk_holds_megabytes() {
    let d = tempfile::tempdir().unwrap();
    let job = d.path().join("job_9");
    std::fs::create_dir_all(job.join("step_0/task_0")).unwrap();
    std::fs::write(job.join("step_0/task_0/cgroup.procs"), "10\n").unwrap();
    // The job's user: a chain of long names about 3.4 KiB deep, and at its bottom two
    // directories of 2,000 subdirectories each, every path near PATH_MAX. Walked whole, that
    // is 4,000 paths of 3.6 KiB: 15 MB kept, and more on each list of the walk.
    let bottom = long_chain(&job.join("step_0/task_0"), 13, 250);
    for side in ["a", "b"] {
        for i in 0..2000 {
            std::fs::create_dir_all(bottom.join(side).join(format!("{i:0>200}"))).unwrap();
        }
    }
    let mut tree = Subtree::default();
    let mut out = Vec::new();
    assert!(pids_within(&job, &mut tree, &mut String::new(), &mut out), "past the bounds: cut");
    assert!(tree.is_cut());
    // Nothing kept between cycles (many such jobs on a node must not add up to the unit's
    // memory limit); the walk itself stays within its bounds while it runs.
    assert_eq!(tree.kept_bytes(), 0, "a cut walk keeps no path");
    assert_eq!(out, vec![10], "what it read before the bound");
    // Walked again (the next cycle): the same.
    out.clear();
    assert!(pids_within(&job, &mut tree, &mut String::new(), &mut out));
    assert_eq!((tree.kept_bytes(), out), (0, vec![10]));
}

/// Directories under `top` named `lengths` bytes each, top down, holding `pids` at the bottom:
/// made with short names and renamed from the bottom up (the path to the one renamed stays
/// short), so that the whole may pass PATH_MAX. The bottom's path.
fn long_named(top: &Path, lengths: &[usize], pids: &str) -> PathBuf {
    let bottom = long_chain(top, lengths.len(), 1);
    std::fs::write(bottom.join("cgroup.procs"), pids).unwrap();
    let mut at = bottom;
    let mut names = Vec::new();
    for len in lengths.iter().rev() {
        let name = format!("{:x>len$}", at.file_name().unwrap().to_string_lossy());
        std::fs::rename(&at, at.with_file_name(&name)).unwrap();
        names.push(name);
        at = at.parent().unwrap().to_path_buf();
    }
    names.iter().rev().fold(top.to_path_buf(), |p, n| p.join(n))
}

#[test]
fn a_directory_past_path_max_cuts_the_walk_rather_than_passing_for_gone() {
    let d = tempfile::tempdir().unwrap();
    let job = d.path().join("job_9");
    std::fs::create_dir_all(job.join("step_0/task_0")).unwrap();
    std::fs::write(job.join("step_0/task_0/cgroup.procs"), "10\n").unwrap();
    // A process 20 levels down, 5 KiB of path.
    long_named(&job.join("step_0/task_0"), &[250; 20], "11\n");
    let mut out = Vec::new();
    assert!(pids(&job, &mut String::new(), &mut out), "a directory it cannot reach: cut");
    assert_eq!(out, vec![10]);
}

#[test]
fn a_directory_whose_cgroup_procs_is_past_path_max_cuts_the_walk() {
    let d = tempfile::tempdir().unwrap();
    let job = d.path().join("job_9");
    let task = job.join("step_0/task_0");
    std::fs::create_dir_all(&task).unwrap();
    std::fs::write(task.join("cgroup.procs"), "10\n").unwrap();
    // The directory's own path 4,090 bytes, within PATH_MAX; its cgroup.procs' 4,103, past it.
    let room = 4090 - task.as_os_str().len();
    let full = (room - 4) / 251;
    let mut lengths = vec![250; full];
    lengths.push(room - full * 251 - 1);
    let bottom = long_named(&task, &lengths, "11\n");
    assert_eq!(bottom.as_os_str().len(), 4090);
    let mut out = Vec::new();
    assert!(pids(&job, &mut String::new(), &mut out), "a cgroup.procs it cannot read: cut");
    assert_eq!(out, vec![10]);
}
