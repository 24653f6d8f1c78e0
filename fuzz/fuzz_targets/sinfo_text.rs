#![no_main]
//! sinfo output in the collector's format: never a panic, whatever the bytes, and every state
//! and flag one of the listed values (the catalog's help names those).
use libfuzzer_sys::fuzz_target;
use slurm_cw_formats::slurm::sinfo;
use slurm_cw_formats::slurm::state::{NODE_FLAGS, NODE_STATES};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let (rows, bad) = sinfo::parse_text(text);
        assert!(rows.len() + bad.len() <= text.lines().count());
        for r in &rows {
            assert!(NODE_STATES.contains(&r.state.primary), "{:?}", r.state);
            assert!(r.state.flags.iter().all(|f| NODE_FLAGS.contains(f)), "{:?}", r.state);
        }
    }
});
