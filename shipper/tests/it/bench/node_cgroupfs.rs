//! The node collector's listings on a real cgroupfs (kernfs), where Slurm's job trees live:
//! a directory in one getdents64, and a job's subtree listed again only where a directory's
//! link count changed. A process is moved between steps as srun's would be, and each reading
//! must find it where it is. Needs root and a cgroup hierarchy (v2, or v1's memory controller).

use crate::common;

use slurm_cw_shipper::sources::node::dir;
use slurm_cw_shipper::sources::node::subtree::{Subtree, pids, pids_within};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

/// A job-shaped cgroup tree of the test's own, removed with the process in it at the end.
struct Tree {
    hierarchy: PathBuf,
    base: PathBuf,
    child: Child,
}

impl Tree {
    fn job(&self) -> PathBuf {
        self.base.join("job_1")
    }

    fn mkdir(&self, rel: &str) -> PathBuf {
        let d = self.job().join(rel);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn move_to(&self, dir: &Path) {
        std::fs::write(dir.join("cgroup.procs"), self.child.id().to_string()).unwrap();
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::write(self.hierarchy.join("cgroup.procs"), self.child.id().to_string());
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Deepest first: cgroup directories go with rmdir only, and only when empty.
        let mut dirs = Vec::new();
        let mut stack = vec![self.base.clone()];
        while let Some(d) = stack.pop() {
            stack.extend(dir::subdirs(&d).into_iter().map(|n| d.join(n)));
            dirs.push(d);
        }
        for d in dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

fn found(tree: &mut Subtree, job: &Path) -> Vec<u32> {
    let mut out = Vec::new();
    pids_within(job, tree, &mut String::new(), &mut out);
    let mut fresh = Vec::new();
    pids(job, &mut String::new(), &mut fresh);
    assert_eq!(out, fresh, "the known subtree gives what a fresh walk gives");
    out
}

#[ignore = "needs root and a writable cgroup hierarchy: scripts/test.sh runs it"]
#[test]
fn a_process_moving_between_steps_is_found_where_it_is() {
    let Some(hierarchy) = common::cgroupfs() else { return };
    let base = hierarchy.join(format!("slurm-cw-test-{}", std::process::id()));
    let child = Command::new("sleep").arg("60").spawn().expect("sleep");
    let t = Tree { hierarchy, base, child };
    let pid = t.child.id();
    let job = t.job();

    let task = t.mkdir("step_0/task_0");
    t.move_to(&task);
    let mut tree = Subtree::default();
    assert_eq!(found(&mut tree, &job), vec![pid]);
    assert_eq!(found(&mut tree, &job), vec![pid], "nothing changed");

    // A new step: the job directory has a link more.
    let task = t.mkdir("step_1/task_0");
    t.move_to(&task);
    assert_eq!(found(&mut tree, &job), vec![pid]);

    // A step ends and another starts between readings: the same link count.
    std::fs::remove_dir(job.join("step_0/task_0")).unwrap();
    std::fs::remove_dir(job.join("step_0")).unwrap();
    let task = t.mkdir("step_2/task_0");
    t.move_to(&task);
    assert_eq!(found(&mut tree, &job), vec![pid]);

    // A directory of kernfs lists as read_dir lists it: files and directories, in one call.
    let mut mine = BTreeSet::new();
    dir::entries(&job, |name, _| {
        mine.insert(name.to_owned());
    })
    .unwrap();
    let std: BTreeSet<_> = std::fs::read_dir(&job).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(mine, std);
    assert!(mine.len() > 3, "the cgroup's own files too: {mine:?}");
    assert_eq!(
        dir::subdirs(&job).into_iter().collect::<BTreeSet<_>>(),
        BTreeSet::from(["step_1".into(), "step_2".into()])
    );
}

/// On kernfs a held cgroup file reads fresh with pread, and fails once its cgroup is removed
/// (ENODEV), so a job that ended is never read from its old files; the process set read from
/// the known directories' cgroup.procs sees a process leave, and a step begin by the link
/// count. v1's cgroup.procs is never held: read again through the same open file within a
/// second, it gives the old list.
#[ignore = "needs root and a writable cgroup hierarchy: scripts/test.sh runs it"]
#[test]
fn held_files_read_fresh_and_fail_once_the_cgroup_is_gone() {
    use slurm_cw_shipper::sources::node::held::{Files, read_via};
    use std::os::unix::fs::MetadataExt;
    let Some(hierarchy) = common::cgroupfs() else { return };
    let v2 = hierarchy.join("cgroup.controllers").is_file();
    let base = hierarchy.join(format!("slurm-cw-held-{}", std::process::id()));
    let child = Command::new("sleep").arg("60").spawn().expect("sleep");
    let t = Tree { hierarchy, base, child };
    let pid = t.child.id();
    let job = t.job();
    let task = t.mkdir("step_0/task_0");
    let mut buf = String::new();
    let mut files = Files::default();
    // A file whose text the test sets: v2's cgroup.procs (a process moved in), v1's memory limit.
    let (name, set, want) = if v2 {
        ("cgroup.procs", ("cgroup.procs", pid.to_string()), pid.to_string())
    } else {
        ("memory.limit_in_bytes", ("memory.limit_in_bytes", "104857600".into()), "104857600".into())
    };
    let before = files.text("", &task, name, true, &mut buf).map(str::to_owned);
    assert!(before.is_some() && files.held() == 1);
    std::fs::write(task.join(set.0), &set.1).unwrap();
    assert_eq!(files.text("", &task, name, true, &mut buf).map(str::trim), Some(want.as_str()), "fresh");
    if !v2 {
        let mut procs = Files::default();
        assert_eq!(procs.text("", &task, "cgroup.procs", true, &mut buf), Some(""));
        t.move_to(&task);
        assert_eq!(procs.text("", &task, "cgroup.procs", true, &mut buf), Some(""), "v1: the old list");
    }
    t.move_to(&task);

    let mut tree = Subtree::default();
    tree.hold_procs(v2);
    assert_eq!(found(&mut tree, &job), vec![pid]);
    assert_eq!(tree.held(), if v2 { 3 } else { 0 }, "job, step and task held on v2 only");
    let links = |d: &Path| std::fs::metadata(d).unwrap().nlink();
    let mut pids = Vec::new();
    assert!(tree.known_pids(links(&job), &mut buf, &mut pids));
    assert_eq!(pids, vec![pid], "from the known directories");
    // The process leaves for a new step: the job directory has a link more.
    let step1 = t.mkdir("step_1");
    t.move_to(&step1);
    pids.clear();
    assert!(!tree.known_pids(links(&job), &mut buf, &mut pids), "a walk is needed");
    assert_eq!(found(&mut tree, &job), vec![pid]);

    // The task directory removed: its held file fails and is closed, the path is gone.
    std::fs::remove_dir(&task).unwrap();
    assert_eq!(files.text("", &task, name, true, &mut buf), None);
    assert_eq!(files.held(), 0);
    let mut slot = None;
    assert!(!read_via(&mut slot, &task, name, true, &mut buf) && slot.is_none());
    pids.clear();
    assert!(!tree.known_pids(links(&job), &mut buf, &mut pids), "a known directory is gone");
}

/// cgroupfs (kernfs) tells inotify of a cgroup made or removed, as the job table's quiet
/// cycles assume: a job directory made under a watched one is a change, and its removal too;
/// a step made inside the (unwatched) job directory is none.
#[ignore = "needs root and a writable cgroup hierarchy: scripts/test.sh runs it"]
#[test]
fn a_job_cgroup_made_or_removed_is_a_change_the_watch_sees() {
    use slurm_cw_shipper::sys::watch::Watch;
    let Some(hierarchy) = common::cgroupfs() else { return };
    let base = hierarchy.join(format!("slurm-cw-watch-{}", std::process::id()));
    let child = Command::new("sleep").arg("60").spawn().expect("sleep");
    let t = Tree { hierarchy, base, child };
    std::fs::create_dir(&t.base).unwrap();
    let mut w = Watch::new().unwrap();
    w.dir(&t.base).unwrap();
    assert!(!w.changed().unwrap());
    t.mkdir("");
    assert!(w.changed().unwrap(), "job_1 made");
    t.mkdir("step_0");
    assert!(!w.changed().unwrap(), "a step inside the job is not the watched directory's");
    std::fs::remove_dir(t.job().join("step_0")).unwrap();
    std::fs::remove_dir(t.job()).unwrap();
    assert!(w.changed().unwrap(), "job_1 removed");
}
