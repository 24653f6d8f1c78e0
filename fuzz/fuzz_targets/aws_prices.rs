#![no_main]
//! AWS's price answers (DescribeSpotPriceHistory's XML, GetProducts' JSON) and `scontrol show
//! node -o`: never a panic, and any price or size found is finite and not negative.
use libfuzzer_sys::fuzz_target;
use slurm_cw_formats::price;
use slurm_cw_formats::slurm::node;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = price::on_demand_price(data) {
        assert!(p.is_finite() && p >= 0.0);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        for zone in [None, Some("us-east-1a")] {
            if let Ok(p) = price::spot_price(text, zone) {
                assert!(p.hourly.is_finite() && p.hourly >= 0.0);
            }
        }
        if let Ok(s) = node::parse(text, "c1") {
            assert!(s.cpus > 0.0 && s.memory_bytes.is_finite() && s.memory_bytes >= 0.0 && s.gpus >= 0.0);
        }
    }
});
