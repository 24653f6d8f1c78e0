#![no_main]
//! squeue output in the collector's format.
use libfuzzer_sys::fuzz_target;
use slurm_cw_formats::slurm::squeue;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let (queue, bad) = squeue::parse_text(text);
        let jobs: u64 = queue.cluster.states.values().sum();
        assert!(jobs as usize + bad.len() <= text.lines().count());
    }
});
