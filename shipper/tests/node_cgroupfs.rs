//! The node collector's listings on a real cgroupfs (kernfs), where Slurm's job trees live:
//! a directory in one getdents64, and a job's subtree listed again only where a directory's
//! link count changed. A process is moved between steps as srun's would be, and each reading
//! must find it where it is. Needs root and a cgroup hierarchy (v2, or v1's memory controller).

mod common;

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
