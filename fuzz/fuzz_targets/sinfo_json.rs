#![no_main]
//! `sinfo --json` of any version: never a panic, and every state and flag one of the listed
//! values.
use libfuzzer_sys::fuzz_target;
use slurm_cw_formats::slurm::sinfo;
use slurm_cw_formats::slurm::state::{NODE_FLAGS, NODE_STATES};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok((rows, _)) = sinfo::parse_json(text)
    {
        for r in &rows {
            assert!(NODE_STATES.contains(&r.state.primary), "{:?}", r.state);
            assert!(r.state.flags.iter().all(|f| NODE_FLAGS.contains(f)), "{:?}", r.state);
        }
    }
});
