#![no_main]
//! Plain sdiag output of any version.
use libfuzzer_sys::fuzz_target;
use slurm_cw_formats::slurm::sdiag;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = sdiag::parse_text(text);
    }
});
