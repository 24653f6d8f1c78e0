//! Every file generated from the catalog must match what the catalog generates now.

use std::path::Path;

#[test]
fn generated_files_are_fresh() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut stale = Vec::new();
    for (path, content) in slurm_cw_catalog::generated::files() {
        let on_disk = std::fs::read_to_string(root.join(path)).unwrap_or_default();
        if on_disk != content {
            stale.push(path);
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated files {stale:?}: run `cargo run -p slurm-cw-catalog -- write`"
    );
}
