//! The spool's tests, on a real directory.

use super::*;
use crate::datum::{Datum, DatumValue};

type Spool = super::Spool<Datum>;
use std::time::Duration;

fn batch(n: usize, tag: &str) -> Vec<Datum> {
    (0..n)
        .map(|i| Datum {
            metric: format!("M{tag}"),
            unit: "Count".into(),
            dimensions: vec![
                ("ClusterName".into(), "c".into()),
                ("I".into(), format!("{i}-{}", "x".repeat(40))),
            ],
            timestamp: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
            value: DatumValue::Value { value: i as f64 },
        })
        .collect()
}

#[test]
fn oldest_first_and_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, d) = Spool::open(dir.path(), 1 << 20).unwrap();
    assert_eq!(d, Dropped::default());
    let (a, _) = s.push("Slurm", &batch(3, "a")).unwrap();
    let (b, _) = s.push("Slurm", &batch(2, "b")).unwrap();
    assert!(a < b);
    drop(s); // the process ends
    let (mut s, _) = Spool::open(dir.path(), 1 << 20).unwrap();
    assert_eq!((s.files(), s.oldest()), (2, Some(a.clone())));
    let e = s.read(&a).unwrap();
    assert_eq!((e.label.as_str(), e.items.len(), e.items[0].metric.as_str()), ("Slurm", 3, "Ma"));
    s.remove(&a);
    assert_eq!(s.oldest(), Some(b));
}

#[test]
fn the_batch_just_pushed_is_read_from_memory_until_its_file_changes() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = Spool::open(dir.path(), 1 << 20).unwrap();
    let (a, _) = s.push("Slurm", &batch(3, "a")).unwrap();
    s.keep_fresh(a.clone(), "Slurm", batch(3, "a"));
    // Not read back: a file spoiled after the write does not matter to the sender.
    std::fs::write(dir.path().join(&a), b"spoiled").unwrap();
    let e = s.read(&a).unwrap();
    assert_eq!((e.label.as_str(), e.items), ("Slurm", batch(3, "a")));
    // Taken once: a second read (a retry after a failed send) reads the file.
    assert!(matches!(s.read(&a), Err(ReadError::Corrupt(..))));

    let (b, _) = s.push("Slurm", &batch(3, "b")).unwrap();
    s.keep_fresh(b.clone(), "Slurm", batch(3, "b"));
    s.rewrite(&b, "Slurm", &batch(1, "b")).unwrap();
    assert_eq!(s.read(&b).unwrap().items, batch(1, "b"), "what is left after a partial send");

    // A newer push replaces it; the older file is read from the disk.
    let (c, _) = s.push("Slurm", &batch(2, "c")).unwrap();
    s.keep_fresh(c.clone(), "Slurm", batch(2, "c"));
    let (d, _) = s.push("Slurm", &batch(2, "d")).unwrap();
    s.keep_fresh(d.clone(), "Slurm", batch(2, "d"));
    assert_eq!(s.read(&c).unwrap().items, batch(2, "c"));
    assert_eq!(s.read(&d).unwrap().items, batch(2, "d"));
}

#[test]
fn a_full_spool_drops_the_oldest_and_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let one = spool::encode("Slurm", &batch(50, "a")).len() as u64;
    let (mut s, _) = Spool::open(dir.path(), one * 3 + 10).unwrap();
    for tag in ["a", "b", "c"] {
        assert_eq!(s.push("Slurm", &batch(50, tag)).unwrap().1, Dropped::default());
    }
    let (_, d) = s.push("Slurm", &batch(50, "d")).unwrap();
    assert_eq!(d.full, 50, "the oldest batch of 50 went");
    assert_eq!(s.files(), 3);
    let oldest = s.oldest().unwrap();
    assert_eq!(s.read(&oldest).unwrap().items[0].metric, "Mb");
    assert!(s.bytes() <= one * 3 + 10);
}

#[test]
fn torn_and_corrupt_files_are_counted_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = Spool::open(dir.path(), 1 << 20).unwrap();
    let (a, _) = s.push("Slurm", &batch(7, "a")).unwrap();
    let (b, _) = s.push("Slurm", &batch(4, "b")).unwrap();
    // Power loss: a torn temporary file, and a final file cut short.
    let full = std::fs::read(dir.path().join(&a)).unwrap();
    std::fs::write(dir.path().join("99999999999999999999-00000009.spool.tmp"), &full[..full.len() / 2])
        .unwrap();
    std::fs::write(dir.path().join(&b), &std::fs::read(dir.path().join(&b)).unwrap()[..40]).unwrap();
    drop(s); // the process ends
    let (mut s, d) = Spool::open(dir.path(), 1 << 20).unwrap();
    assert_eq!((d.corrupt_files, d.corrupt_datums), (1, 7), "the torn write, by its header");
    assert_eq!(s.read(&a).unwrap().items.len(), 7);
    let Err(ReadError::Corrupt(err, named)) = s.read(&b) else { panic!("corrupt") };
    assert_eq!(named, 4);
    assert!(matches!(err, SpoolError::Length { .. }), "{err}");
    assert!(!dir.path().join(&b).exists(), "removed");
    assert_eq!(s.files(), 1);
}

#[test]
fn an_unreadable_file_is_moved_aside_and_a_vanished_one_forgotten_neither_counted_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = Spool::open(dir.path(), 1 << 20).unwrap();
    let (a, _) = s.push("Slurm", &batch(3, "a")).unwrap();
    let (b, _) = s.push("Slurm", &batch(2, "b")).unwrap();
    let (c, _) = s.push("Slurm", &batch(1, "c")).unwrap();
    // A read that fails with an I/O error (EISDIR here: chmod does not stop root).
    std::fs::remove_file(dir.path().join(&a)).unwrap();
    std::fs::create_dir(dir.path().join(&a)).unwrap();
    let Err(ReadError::Unreadable(why)) = s.read(&a) else { panic!("unreadable") };
    assert!(why.starts_with("cannot read spool file") && why.ends_with("moved to aside/"), "{why}");
    assert!(dir.path().join(ASIDE).join(&a).is_dir() && !dir.path().join(&a).exists());
    std::fs::remove_file(dir.path().join(&b)).unwrap();
    let Err(ReadError::Unreadable(why)) = s.read(&b) else { panic!("gone") };
    assert!(why.ends_with("it is gone"), "{why}");
    assert_eq!((s.files(), s.oldest()), (1, Some(c.clone())), "the rest is next in line");
    assert_eq!(s.read(&c).unwrap().items.len(), 1);
    drop(s);
    let (s, d) = Spool::open(dir.path(), 1 << 20).unwrap();
    assert_eq!((s.files(), d), (1, Dropped::default()), "nothing came back, nothing counted");
}

#[test]
fn a_second_process_cannot_open_a_spool_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = Spool::open(dir.path(), 1 << 20).unwrap();
    s.push("Slurm", &batch(3, "a")).unwrap();
    // The daemon's write in progress.
    std::fs::write(dir.path().join("99999999999999999999-00000009.spool.tmp"), b"half").unwrap();
    // flock is per open file description: a second open here stands for a second process.
    let err = Spool::open(dir.path(), 1 << 20).map(|_| ()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
    assert!(err.to_string().contains(&format!("in use by process {}", std::process::id())), "{err}");
    assert!(dir.path().join("99999999999999999999-00000009.spool.tmp").exists(), "left alone");
    drop(s);
    let (again, dropped) = Spool::open(dir.path(), 1 << 20).unwrap();
    assert_eq!((again.files(), dropped.corrupt_files), (1, 1), "free once the first is gone");
}

#[test]
fn rewrite_keeps_what_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = Spool::open(dir.path(), 1 << 20).unwrap();
    let (a, _) = s.push("Slurm", &batch(10, "a")).unwrap();
    s.rewrite(&a, "Slurm", &batch(3, "a")).unwrap();
    assert_eq!(s.read(&a).unwrap().items.len(), 3);
}

#[test]
fn the_file_being_sent_is_never_deleted_to_make_room() {
    let dir = tempfile::tempdir().unwrap();
    let one =
        Spool::open(dir.path(), 1 << 20).unwrap().0.encoder.encode("Slurm", &batch(3, "a")).len() as u64;
    let (mut s, _) = Spool::open(dir.path(), 2 * one + one / 2).unwrap();
    let (a, _) = s.push("Slurm", &batch(3, "a")).unwrap();
    let (b, _) = s.push("Slurm", &batch(3, "b")).unwrap();
    // The sender reads the oldest and waits on an outage; a flush needs room meanwhile.
    assert_eq!(s.read(&a).unwrap().items.len(), 3);
    let (c, dropped) = s.push("Slurm", &batch(3, "c")).unwrap();
    assert_eq!(dropped.full, 3, "b's items, not a's");
    assert_eq!(s.oldest(), Some(a.clone()));
    assert!(!dir.path().join(&b).exists());
    // The send fails: a is written back, whole, and counted nowhere as dropped.
    s.rewrite(&a, "Slurm", &batch(3, "a")).unwrap();
    assert_eq!(s.read(&a).unwrap().items, batch(3, "a"));
    s.remove(&a);
    // Done sending: the oldest makes room again.
    let (_, dropped) = s.push("Slurm", &batch(3, "d")).unwrap();
    assert_eq!(dropped.full, 0);
    let (_, dropped) = s.push("Slurm", &batch(3, "e")).unwrap();
    assert_eq!(dropped.full, 3, "c's");
    assert!(!dir.path().join(&c).exists());
}

#[test]
fn items_deleted_for_a_write_that_failed_are_counted_all_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let one =
        Spool::open(dir.path(), 1 << 20).unwrap().0.encoder.encode("Slurm", &batch(3, "a")).len() as u64;
    let (mut s, _) = Spool::open(dir.path(), one + one / 2).unwrap();
    s.push("Slurm", &batch(3, "a")).unwrap();
    s.fail_writes = true;
    let not = s.push("Slurm", &batch(3, "b")).unwrap_err();
    assert_eq!(s.files(), 0, "a was deleted to make room");
    assert_eq!(not.evicted, 3, "and its items are reported");
}

#[test]
fn a_rewrite_cut_short_by_a_crash_is_no_corrupt_data() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = Spool::open(dir.path(), 1 << 20).unwrap();
    let (a, _) = s.push("Slurm", &batch(3, "a")).unwrap();
    drop(s);
    // The process died while rewriting a: its temporary file, torn, beside a whole a.
    std::fs::write(dir.path().join(format!("{a}{TMP_SUFFIX}")), b"torn").unwrap();
    let (mut s, dropped) = Spool::open(dir.path(), 1 << 20).unwrap();
    assert_eq!(dropped, Dropped::default());
    assert_eq!(s.read(&a).unwrap().items.len(), 3, "sent whole, as before the rewrite");
    assert!(!dir.path().join(format!("{a}{TMP_SUFFIX}")).exists());
}
