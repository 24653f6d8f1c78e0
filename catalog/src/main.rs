//! Writes the files generated from the metric catalog.
//!
//! `cargo run -p slurm-cw-catalog -- write` (from anywhere in the repository) rewrites them;
//! `-- check` exits 1 when one is stale; `-- print PATH` prints one.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = repo_root();
    match args.first().map(String::as_str) {
        Some("write") => {
            for (path, content) in slurm_cw_catalog::generated::files() {
                let full = root.join(path);
                if let Some(dir) = full.parent()
                    && let Err(e) = std::fs::create_dir_all(dir)
                {
                    eprintln!("cannot create {}: {e}", dir.display());
                    return ExitCode::FAILURE;
                }
                if let Err(e) = std::fs::write(&full, content) {
                    eprintln!("cannot write {}: {e}", full.display());
                    return ExitCode::FAILURE;
                }
                println!("wrote {path}");
            }
            ExitCode::SUCCESS
        }
        Some("check") => {
            let mut ok = true;
            for (path, content) in slurm_cw_catalog::generated::files() {
                if std::fs::read_to_string(root.join(path)).ok().as_deref() != Some(&content) {
                    eprintln!("{path} is stale: run `cargo run -p slurm-cw-catalog -- write`");
                    ok = false;
                }
            }
            if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
        Some("print") => {
            let wanted = args.get(1).map(String::as_str).unwrap_or("docs/metrics.md");
            match slurm_cw_catalog::generated::files().into_iter().find(|(p, _)| *p == wanted) {
                Some((_, content)) => {
                    print!("{content}");
                    ExitCode::SUCCESS
                }
                None => {
                    eprintln!("no generated file {wanted}");
                    ExitCode::from(2)
                }
            }
        }
        _ => {
            eprintln!("usage: slurm-cw-catalog write | check | print [PATH]");
            ExitCode::from(2)
        }
    }
}
