//! The Lambda's integration tests, one binary (one link of the AWS SDK instead of one per file):
//! the loopback tests are the modules here; those that need LocalStack are under [`bench`],
//! `#[ignore]`d so that a plain `cargo test` skips them, run by scripts/test.sh with
//! `--include-ignored` a module at a time (`cargo test -p slurm-cw-lambda --test it --
//! --include-ignored bench::cw_localstack::` runs one). The helpers they share are [`common`].

mod bench;
mod common;
mod no_ca_certificates;
