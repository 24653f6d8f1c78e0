#![no_main]
//! EFA and InfiniBand port counter files, as `name value` lines (one file each); the delta
//! between two readings is never more than the second reading.
use libfuzzer_sys::fuzz_target;
use slurm_cw_formats::infiniband::{self, CounterSet};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let files: Vec<(&str, &str)> = text.lines().filter_map(|l| l.split_once(' ')).collect();
    let (half_a, half_b) = files.split_at(files.len() / 2);
    for set in [CounterSet::Infiniband, CounterSet::Efa] {
        let (Some(a), Some(b)) = (infiniband::port_totals(set, half_a), infiniband::port_totals(set, half_b)) else {
            continue;
        };
        let (d, _) = infiniband::since(&a, &b);
        assert!(d.rx_bytes <= b.rx_bytes && d.tx_bytes <= b.tx_bytes && d.errors <= b.errors);
    }
});
