#![no_main]
//! squeue output in the collector's format: never a panic; states and flags from the lists,
//! pending reasons Slurm's codes (one word, never a node list or a description).
use libfuzzer_sys::fuzz_target;
use slurm_cw_formats::slurm::squeue::{self, Queue};
use slurm_cw_formats::slurm::state::{JOB_FLAGS, job_states};

fn check(queue: &Queue) {
    for s in std::iter::once(&queue.cluster).chain(queue.partitions.values()) {
        assert!(s.states.keys().all(|k| job_states().any(|j| j == *k)), "{:?}", s.states);
        assert!(s.flags.keys().all(|k| JOB_FLAGS.contains(k)), "{:?}", s.flags);
        for r in s.pending_reasons.keys() {
            let code = (1..=64).contains(&r.len()) && r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            assert!(code, "reason {r:?}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let (queue, bad) = squeue::parse_text(text);
        let jobs: u64 = queue.cluster.states.values().sum();
        assert!(jobs as usize + bad.len() <= text.lines().count());
        check(&queue);
    }
});
