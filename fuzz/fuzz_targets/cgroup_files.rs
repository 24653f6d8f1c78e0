#![no_main]
//! Every cgroup file format the node collector reads.
use libfuzzer_sys::fuzz_target;
use slurm_cw_formats::cgroup;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = cgroup::flat_key(text, "total_rss");
        let _ = cgroup::flat_keys(text, ["total_cache", "total_rss", "file"]);
        let _ = cgroup::single(text);
        let _ = cgroup::numbers(text);
        if let Some(cpus) = cgroup::cpu_list(text) {
            assert!(cpus.len() <= 65_537 * text.split(',').count());
        }
        let _ = cgroup::io_stat(text);
        let _ = cgroup::blkio(text);
    }
});
