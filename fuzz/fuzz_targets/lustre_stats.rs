#![no_main]
//! The Lustre client's llite stats file, any version; a mount's totals never go back against
//! themselves.
use libfuzzer_sys::fuzz_target;
use slurm_cw_formats::lustre;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(stats) = lustre::parse(text) {
            let t = stats.totals();
            assert_eq!(lustre::since(&t, &t), (lustre::Totals::default(), false));
        }
        let _ = lustre::fs_name(text.lines().next().unwrap_or(""));
    }
});
