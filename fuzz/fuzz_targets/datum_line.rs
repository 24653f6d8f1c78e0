#![no_main]
//! A datum JSON line (the stdout sink's output, the spool's content): what parses writes
//! back to the same datum.
use libfuzzer_sys::fuzz_target;
use slurm_cw_formats::datum::Datum;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok((ns, d)) = Datum::from_json_line(text) {
            if d.value.numbers().iter().all(|x| x.is_finite()) {
                let again = Datum::from_json_line(&d.to_json_line(&ns));
                assert!(again.is_ok_and(|(n, e)| n == ns && e == d));
            }
        }
    }
});
