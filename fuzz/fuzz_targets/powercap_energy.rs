#![no_main]
//! RAPL zone names and energy counters; energy used is never negative and, across a wrap,
//! never more than the counter's range.
use libfuzzer_sys::fuzz_target;
use slurm_cw_formats::powercap;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut lines = text.lines();
    let _ = powercap::zone(lines.next().unwrap_or(""));
    let _ = powercap::name(lines.next().unwrap_or(""));
    let mut n = || lines.next().and_then(powercap::micro_joules);
    let (before, now, range) = (n(), n(), n());
    if let (Some(before), Some(now)) = (before, now) {
        match powercap::energy_since(before, now, range) {
            Some(used) if now < before => assert!(range.is_some_and(|r| used <= r.saturating_add(now))),
            Some(used) => assert_eq!(used, now - before),
            None => assert!(now < before),
        }
    }
});
