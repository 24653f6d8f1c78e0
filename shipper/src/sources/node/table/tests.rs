//! The job table's listings: which trees, and when.

use super::*;
use crate::sources::node::discover::tests::{layout, mk};

/// A v1 cgroup root of the test's own, empty.
fn v1_tree() -> (tempfile::TempDir, Layout) {
    let d = tempfile::tempdir().unwrap();
    let l = layout(d.path(), Version::V1);
    (d, l)
}

/// No job directory here is named by a SLUID.
fn no_sluid(_: &str) -> Option<String> {
    None
}

fn ids(t: &JobTable) -> Vec<String> {
    t.jobs().map(|j| j.r.id.clone()).collect()
}

/// The CI failure of 2026-11-28: another slurmd's stale job in cpuacct (the first tree
/// listed) hid a job whose Slurm gives it no cpuacct or memory cgroup (ParallelCluster's
/// defaults): it was never found.
#[test]
fn a_job_outside_the_tree_listed_each_cycle_is_found() {
    let (d, layout) = v1_tree();
    let r = d.path();
    for c in ["cpuacct", "memory", "freezer", "cpuset"] {
        mk(r, &format!("{c}/slurm_m3/uid_0/job_29"));
    }
    let mut t = JobTable::default();
    t.refresh(&layout, &no_sluid);
    assert_eq!((ids(&t), t.primary), (vec!["29".to_owned()], Some("cpuacct")));

    // A job in freezer and cpuset alone: found by the next full listing.
    for c in ["freezer", "cpuset"] {
        mk(r, &format!("{c}/slurm_c1/uid_0/job_155"));
    }
    let mut cycles = 0;
    while t.len() < 2 {
        t.refresh(&layout, &no_sluid);
        cycles += 1;
        assert!(cycles <= FULL_SCAN_CYCLES, "not found in {cycles} cycles");
    }
    // Listed each cycle from now on: the first tree that holds both.
    assert_eq!((ids(&t), t.primary), (vec!["155".to_owned(), "29".to_owned()], Some("cpuset")));
    for _ in 0..2 * FULL_SCAN_CYCLES {
        t.refresh(&layout, &no_sluid);
        assert_eq!(t.len(), 2);
    }

    // Jobs in no one tree together: every tree, every cycle.
    std::fs::remove_dir(r.join("freezer/slurm_c1/uid_0/job_155")).unwrap();
    std::fs::remove_dir(r.join("freezer/slurm_m3/uid_0/job_29")).unwrap();
    mk(r, "freezer/slurm_c1/uid_0/job_156");
    std::fs::remove_dir(r.join("cpuset/slurm_m3/uid_0/job_29")).unwrap();
    for _ in 0..=FULL_SCAN_CYCLES {
        t.refresh(&layout, &no_sluid);
    }
    assert_eq!(ids(&t), vec!["155".to_owned(), "156".to_owned(), "29".to_owned()]);
    assert_eq!(t.primary, None);
}

#[test]
fn cycles_in_which_no_job_directory_came_or_went_list_nothing() {
    let (d, layout) = v1_tree();
    let r = d.path();
    let job = |id: u32| ["cpuacct", "memory"].map(|c| format!("{c}/slurm_c1/uid_0/job_{id}"));
    job(7).iter().for_each(|p| mk(r, p));
    let mut t = JobTable::default();
    t.refresh(&layout, &no_sluid);
    assert_eq!((ids(&t), t.listings()), (vec!["7".to_owned()], 1));
    for _ in 0..10 {
        t.refresh(&layout, &no_sluid);
    }
    assert_eq!((ids(&t), t.listings()), (vec!["7".to_owned()], 1), "ten quiet cycles");

    // A job begins, another ends: each seen at the next cycle.
    job(8).iter().for_each(|p| mk(r, p));
    t.refresh(&layout, &no_sluid);
    assert_eq!(ids(&t), vec!["7".to_owned(), "8".to_owned()]);
    job(7).iter().for_each(|p| std::fs::remove_dir(r.join(p)).unwrap());
    t.refresh(&layout, &no_sluid);
    assert_eq!(ids(&t), vec!["8".to_owned()]);
    // The full listing those primary-only listings owe comes on time, then quiet again.
    for _ in 0..FULL_SCAN_CYCLES {
        t.refresh(&layout, &no_sluid);
    }
    let listed = t.listings();
    for _ in 0..10 {
        t.refresh(&layout, &no_sluid);
    }
    assert_eq!((ids(&t), t.listings()), (vec!["8".to_owned()], listed));
    // And listed anyway every RELIST_CYCLES.
    for _ in 0..RELIST_CYCLES {
        t.refresh(&layout, &no_sluid);
    }
    assert_eq!(t.listings(), listed + 1);
}

#[test]
fn when_the_primary_empties_the_other_trees_are_listed_in_the_same_cycle() {
    let (d, layout) = v1_tree();
    let r = d.path();
    for c in ["cpuacct", "freezer"] {
        mk(r, &format!("{c}/slurm_c1/uid_0/job_7"));
    }
    let mut t = JobTable::default();
    t.refresh(&layout, &no_sluid);
    assert_eq!(t.primary, Some("cpuacct"));
    std::fs::remove_dir(r.join("cpuacct/slurm_c1/uid_0/job_7")).unwrap();
    t.refresh(&layout, &no_sluid);
    assert_eq!((ids(&t), t.primary), (vec!["7".to_owned()], Some("freezer")));
}

/// A job left out (Slurm says it ended; its cgroup stays) is back in the table at the next
/// cycle, listed or quiet, for the collector to ask about and leave out again; once its
/// directory goes, it is gone.
#[test]
fn a_job_left_out_comes_back_each_cycle_until_its_directory_goes() {
    let (d, layout) = v1_tree();
    let r = d.path();
    for id in [7, 8] {
        mk(r, &format!("cpuacct/slurm_c1/uid_0/job_{id}"));
    }
    let mut t = JobTable::default();
    t.refresh(&layout, &no_sluid);
    let out: Vec<String> = t.leave_out(|r| r.id == "7").into_iter().map(|r| r.id).collect();
    assert_eq!((out, ids(&t)), (vec!["7".to_owned()], vec!["8".to_owned()]));
    let listed = t.listings();
    t.refresh(&layout, &no_sluid);
    assert_eq!((ids(&t), t.listings()), (vec!["7".to_owned(), "8".to_owned()], listed), "quiet");
    t.leave_out(|r| r.id == "7");
    mk(r, "cpuacct/slurm_c1/uid_0/job_9");
    t.refresh(&layout, &no_sluid);
    assert_eq!(ids(&t), vec!["7".to_owned(), "8".to_owned(), "9".to_owned()], "listed");
    t.leave_out(|r| r.id == "7");
    std::fs::remove_dir(r.join("cpuacct/slurm_c1/uid_0/job_7")).unwrap();
    t.refresh(&layout, &no_sluid);
    assert_eq!(ids(&t), vec!["8".to_owned(), "9".to_owned()]);
    assert!(t.leave_out(|r| r.id == "7").is_empty());
}
