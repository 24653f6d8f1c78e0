#![no_main]
//! `squeue --json` of any version.
use libfuzzer_sys::fuzz_target;
use slurm_cw_formats::slurm::squeue;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = squeue::parse_json(text);
    }
});
