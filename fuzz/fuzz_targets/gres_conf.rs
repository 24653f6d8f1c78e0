#![no_main]
//! gres.conf: never a panic, and a node's GPU files are no more than the text could name.
use libfuzzer_sys::fuzz_target;
use slurm_cw_formats::slurm::gres_conf::{GpuOrder, GresConf};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let conf = GresConf::parse(text);
        for node in ["n1", "gpu-01", ""] {
            if let GpuOrder::Files(files) = conf.gpu_order(node) {
                assert!(files.len() <= 1024 * text.len().max(1));
            }
        }
    }
});
