#![no_main]
//! `scontrol show job -d -o`: never a panic, and any GPU set found is within what the text
//! could name.
use libfuzzer_sys::fuzz_target;
use slurm_cw_formats::slurm::job;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(d) = job::parse(text) {
            for (nodes, gpus) in &d.gpus {
                assert!(gpus.len() <= 4096 * text.len().max(1));
                let _ = job::hostlist_contains(nodes, "c1");
            }
        }
        let _ = job::hostlist_contains(text, "gpu-01");
    }
});
