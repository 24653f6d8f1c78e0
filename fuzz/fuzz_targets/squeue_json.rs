#![no_main]
//! `squeue --json` of any version: never a panic; states and flags from the lists, pending
//! reasons Slurm's codes.
use libfuzzer_sys::fuzz_target;
use slurm_cw_formats::slurm::squeue;
use slurm_cw_formats::slurm::state::{JOB_FLAGS, job_states};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok((queue, _)) = squeue::parse_json(text)
    {
        for s in std::iter::once(&queue.cluster).chain(queue.partitions.values()) {
            assert!(s.states.keys().all(|k| job_states().any(|j| j == *k)), "{:?}", s.states);
            assert!(s.flags.keys().all(|k| JOB_FLAGS.contains(k)), "{:?}", s.flags);
            for r in s.pending_reasons.keys() {
                let code = (1..=64).contains(&r.len()) && r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
                assert!(code, "reason {r:?}");
            }
        }
    }
});
