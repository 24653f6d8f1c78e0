use super::*;

#[test]
fn reads_this_process() {
    let me = std::process::id();
    let want = Want { io: true, fd_by_size: is_procfs(Path::new("/proc")) };
    let mut buf = Vec::new();
    let p = read(Path::new("/proc"), me, want, &KnownThreads::new(), &mut buf, &mut { usize::MAX })
        .expect("our own process");
    assert_eq!(p.key.0, me);
    assert!(p.threads.iter().sum::<u64>() >= 1);
    assert!(p.open_files.unwrap_or(0) >= 3, "stdin, stdout, stderr at least");
    assert!(!p.comm.is_empty());
    assert!(p.io.is_some());
    assert!(
        read(Path::new("/proc"), u32::MAX - 1, want, &KnownThreads::new(), &mut buf, &mut 0).is_none(),
        "no such process"
    );
    assert!(is_procfs(Path::new("/proc")));
    assert!(!is_procfs(Path::new("/")));
}

#[test]
fn a_command_name_of_any_bytes_is_read() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("77");
    std::fs::create_dir_all(dir.join("fd")).unwrap();
    let mut stat = b"77 (a\xff) b) S 1 77 77 0 -1 4194304 100 0 0 0 5000 200 ".to_vec();
    stat.extend_from_slice(b"0 0 20 0 1 0 1000 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n");
    std::fs::write(dir.join("stat"), stat).unwrap();
    let want = Want { io: false, fd_by_size: false };
    let p = read(root.path(), 77, want, &KnownThreads::new(), &mut Vec::new(), &mut 0)
        .expect("read despite the name");
    assert_eq!(p.cpu_ticks, 5200);
    assert_eq!(p.threads[1], 1, "one sleeping thread");
    assert!(p.comm.starts_with('a') && p.comm.ends_with(" b"), "{:?}", p.comm);
}

#[test]
fn a_process_holding_more_descriptors_than_the_bound_is_listed_only_to_it() {
    // As /proc/<pid>/fd before Linux 6.2 (its size 0): a process of the job's user holding
    // more descriptors than the bound costs a listing of the bound, each collection.
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("78");
    std::fs::create_dir_all(dir.join("fd")).unwrap();
    for fd in 0..MAX_FDS_LISTED + 10 {
        std::os::unix::fs::symlink("/dev/null", dir.join("fd").join(fd.to_string())).unwrap();
    }
    let stat = "78 (holder) S 1 78 78 0 -1 4194304 100 0 0 0 5 2 0 0 20 0 1 0 1000 1234 20 \
                18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
    std::fs::write(dir.join("stat"), stat).unwrap();
    let want = Want { io: false, fd_by_size: false };
    let p = read(root.path(), 78, want, &KnownThreads::new(), &mut Vec::new(), &mut 0).unwrap();
    assert_eq!(p.open_files, Some(MAX_FDS_LISTED));
    std::fs::remove_dir_all(dir.join("fd")).unwrap();
    std::fs::create_dir_all(dir.join("fd")).unwrap();
    std::os::unix::fs::symlink("/dev/null", dir.join("fd/0")).unwrap();
    let p = read(root.path(), 78, want, &KnownThreads::new(), &mut Vec::new(), &mut 0).unwrap();
    assert_eq!(p.open_files, Some(1));
}

#[test]
fn a_huge_environment_is_read_up_to_the_bound_and_whole_entries_only() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("9")).unwrap();
    let mut env = b"HOME=/home/u\0SLURM_JOB_ACCOUNT=physics\0".to_vec();
    // Padding up to just before the bound, then a variable the bound cuts in its value,
    // then one wholly past it.
    let pad = ENVIRON_MAX - env.len() - 30;
    env.extend_from_slice(b"PAD=");
    env.extend(std::iter::repeat_n(b'x', pad - 5));
    env.push(0);
    env.extend_from_slice(b"SLURM_JOB_PARTITION=");
    env.extend(std::iter::repeat_n(b'p', 100));
    env.push(0);
    env.extend_from_slice(b"SLURM_JOB_GPUS=0,1\0");
    env.extend(std::iter::repeat_n(b'y', 3 * ENVIRON_MAX));
    std::fs::write(root.path().join("9/environ"), &env).unwrap();
    let cuts = environ_cuts();
    let v = environ_vars(root.path(), 9, &["SLURM_JOB_ACCOUNT", "SLURM_JOB_PARTITION", "SLURM_JOB_GPUS"]);
    assert_eq!(v, vec![Some("physics".to_owned()), None, None], "no half value from the cut");
    assert!(environ_cuts() > cuts, "the cut is counted");

    // Under the bound: everything, the first of a name, nothing unset, empty or not UTF-8.
    let env = b"A=1\0B=\0A=2\0C=\xff\0NOEQUALS\0D=x=y\0";
    std::fs::write(root.path().join("9/environ"), env).unwrap();
    let v = environ_vars(root.path(), 9, &["A", "B", "C", "D", "E"]);
    assert_eq!(v, vec![Some("1".into()), None, None, Some("x=y".into()), None]);
    assert_eq!(environ_var(root.path(), 10, "A"), None, "no such process");

    // A small bound, exactly met: nothing is cut.
    let mut buf = Vec::new();
    assert_eq!(read_capped(&root.path().join("9/environ"), env.len(), &mut buf), Some(false));
    assert_eq!(read_capped(&root.path().join("9/environ"), env.len() - 1, &mut buf), Some(true));
    assert_eq!(buf.len(), env.len() - 1);
    assert_eq!(environ_read(root.path(), 9, &["A", "D"], 8), (vec![Some("1".into()), None], 8, true));

    // A budget shared by processes: each read takes off what it read; spent, none is read.
    let mut budget = env.len() + 8;
    assert_eq!(environ_vars_within(root.path(), 9, &["A"], &mut budget), vec![Some("1".into())]);
    assert_eq!(budget, 8);
    assert_eq!(environ_vars_within(root.path(), 9, &["A", "D"], &mut budget), vec![Some("1".into()), None]);
    assert_eq!(budget, 0);
    assert_eq!(environ_vars_within(root.path(), 9, &["A"], &mut budget), vec![None]);
}

#[test]
fn threads_are_listed_again_only_when_they_changed() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("50");
    let stat = |state: char, threads: u32| {
        format!(
            "50 (solver) {state} 1 50 50 0 -1 4194304 100 0 0 0 5000 200 0 0 20 0 {threads} 0 1000 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
        )
    };
    let set = |path: &str, text: String| {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    set("stat", stat('R', 3));
    set("task/50/stat", stat('R', 3));
    set("task/51/stat", stat('S', 3));
    set("task/52/stat", stat('D', 3));
    std::fs::create_dir_all(dir.join("fd")).unwrap();
    let want = Want { io: false, fd_by_size: false };
    let mut buf = Vec::new();
    let mut known = KnownThreads::new();
    let mut read_again = |known: &mut KnownThreads| {
        let p = read(root.path(), 50, want, known, &mut buf, &mut { usize::MAX }).unwrap();
        known.clear();
        known.insert(p.key, p.tids.clone());
        let mut tids = p.tids.clone();
        tids.sort();
        (p.threads, tids)
    };
    let mut states = ThreadCounts::default();
    (states[0], states[1], states[2]) = (1, 1, 1);
    assert_eq!(read_again(&mut known), (states, vec![51, 52]));
    // Known threads change state: read through their known ids.
    set("task/52/stat", stat('S', 3));
    (states[1], states[2]) = (2, 0);
    assert_eq!(read_again(&mut known), (states, vec![51, 52]));
    // One thread ends, another starts: the same number, listed again.
    std::fs::remove_dir_all(dir.join("task/51")).unwrap();
    set("task/53/stat", stat('R', 3));
    (states[0], states[1]) = (2, 1);
    assert_eq!(read_again(&mut known), (states, vec![52, 53]));
    // A thread more: the process says so, listed again.
    set("stat", stat('R', 4));
    set("task/54/stat", stat('Z', 4));
    states[4] = 1;
    assert_eq!(read_again(&mut known), (states, vec![52, 53, 54]));
    // Back to one thread: nothing listed, the leader alone.
    for t in [52, 53, 54] {
        std::fs::remove_dir_all(dir.join(format!("task/{t}"))).unwrap();
    }
    set("stat", stat('S', 1));
    let mut one = ThreadCounts::default();
    one[1] = 1;
    assert_eq!(read_again(&mut known), (one, vec![]));

    // Past the job's bound of threads: one more read, the rest counted as `other`.
    set("stat", stat('R', 4));
    for (t, state) in [(52, 'S'), (53, 'D'), (54, 'S')] {
        set(&format!("task/{t}/stat"), stat(state, 4));
    }
    let mut left = 1;
    let p = read(root.path(), 50, want, &KnownThreads::new(), &mut buf, &mut left).unwrap();
    assert_eq!((p.tids.len(), left), (1, 0), "one thread read, the bound spent");
    assert_eq!(p.threads.iter().sum::<u64>(), 4, "every thread counted: {:?}", p.threads);
    assert_eq!((p.threads[0], p.threads[6]), (1, 2), "the leader, and two not read: {:?}", p.threads);
}

#[test]
fn thread_states() {
    assert_eq!(THREAD_STATES[thread_state_index('R')], "running");
    assert_eq!(THREAD_STATES[thread_state_index('D')], "disk_sleep");
    assert_eq!(THREAD_STATES[thread_state_index('t')], "stopped");
    assert_eq!(THREAD_STATES[thread_state_index('?')], "other");
}
