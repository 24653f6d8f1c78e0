#![no_main]
//! slurmctld's OpenMetrics text (Slurm 25.11+), or any Prometheus exposition.
use libfuzzer_sys::fuzz_target;
use slurm_cw_formats::slurm::openmetrics;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let e = openmetrics::parse(text);
        // Every line is a sample, a comment, blank, or counted bad.
        assert!(e.samples.len() + e.bad_total <= text.lines().count() && e.bad.len() <= e.bad_total);
    }
});
