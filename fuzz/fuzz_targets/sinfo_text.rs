#![no_main]
//! sinfo output in the collector's format: never a panic, whatever the bytes.
use libfuzzer_sys::fuzz_target;
use slurm_cw_formats::slurm::sinfo;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let (rows, bad) = sinfo::parse_text(text);
        assert!(rows.len() + bad.len() <= text.lines().count());
    }
});
