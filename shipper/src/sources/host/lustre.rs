//! The Lustre client's per-mount stats (FSx for Lustre): `llite/<fsname>-<instance>/stats`,
//! under `/proc/fs/lustre` on clients up to 2.11 and under `/sys/kernel/debug/lustre` (debugfs)
//! from 2.12. Both places are looked in every collection.

use super::{names, read_small, reading, seconds};
use crate::sample::{Batch, Dims, Shown};
use crate::sources::Errors;
use slurm_cw_catalog::dims::NODE_NAME;
use slurm_cw_catalog::metrics::{LUSTRE_METADATA_OPS, LUSTRE_READ_BYTES, LUSTRE_WRITE_BYTES};
use slurm_cw_catalog::records as r;
use slurm_cw_formats::log_once::LogOnce;
use slurm_cw_formats::lustre::{self as fmt, Totals};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

/// One mounted Lustre file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The llite directory's name, `<fsname>-<instance>`: new at every mount.
    pub instance: String,
    /// The name the record uses: the file system's, or the instance's when the same file
    /// system is mounted twice.
    pub key: String,
    pub stats: PathBuf,
    /// `procfs` or `debugfs`.
    pub place: &'static str,
}

/// The mounts under the llite directories (an instance in both is taken once, from the first).
pub fn mounts(dirs: &[(PathBuf, &'static str)]) -> Vec<Mount> {
    let mut out: Vec<Mount> = Vec::new();
    for (dir, place) in dirs {
        for instance in names(dir) {
            let stats = dir.join(&instance).join("stats");
            if stats.is_file() && !out.iter().any(|m| m.instance == instance) {
                let key = fmt::fs_name(&instance).to_owned();
                out.push(Mount { instance, key, stats, place });
            }
        }
    }
    let mut count: HashMap<String, usize> = HashMap::new();
    for m in &out {
        *count.entry(m.key.clone()).or_default() += 1;
    }
    for m in &mut out {
        if count.get(&m.key).is_some_and(|n| *n > 1) {
            m.key = m.instance.clone();
        }
    }
    out
}

/// `--check`'s line: the mounts and where their stats are.
pub fn survey(dirs: &[(PathBuf, &'static str)]) -> Option<String> {
    let mounts = mounts(dirs);
    if mounts.is_empty() {
        return None;
    }
    let mut buf = String::new();
    let list: Vec<String> = mounts
        .iter()
        .map(|m| {
            let unreadable = read_small(&m.stats, &mut buf).is_err();
            let note = if unreadable {
                ", not readable: debugfs is root's, and closed under kernel lockdown"
            } else {
                ""
            };
            format!("{} ({}{note})", m.key, m.stats.display())
        })
        .collect();
    Some(format!("{} mount(s): {}", mounts.len(), list.join(", ")))
}

pub struct Lustre {
    dirs: [(PathBuf, &'static str); 2],
    previous: HashMap<String, (Instant, Totals)>,
    buf: String,
    log: LogOnce,
}

impl Lustre {
    pub fn new(dirs: [(PathBuf, &'static str); 2]) -> Self {
        Lustre { dirs, previous: HashMap::new(), buf: String::new(), log: LogOnce::default() }
    }

    /// One mount's totals now; None (counted by the caller, logged once) when its stats file
    /// cannot be read or parsed.
    fn read(&mut self, m: &Mount) -> Option<Totals> {
        let path = m.stats.display().to_string();
        if let Err(e) = read_small(&m.stats, &mut self.buf) {
            // debugfs under kernel lockdown, or not root.
            if self.log.first(&path) {
                tracing::warn!(detail = path, "cannot read Lustre client stats: {e}");
            }
            return None;
        }
        match fmt::parse(&self.buf) {
            Ok(s) => Some(s.totals()),
            Err(e) => {
                if self.log.first(&path) {
                    tracing::warn!(detail = path, "cannot parse Lustre client stats: {e}");
                }
                None
            }
        }
    }

    /// Reads every mount; returns whether there is any.
    pub fn collect(&mut self, now: Instant, node: &str, out: &mut Batch, errors: &mut Errors) -> bool {
        let mounts = mounts(&self.dirs);
        if mounts.is_empty() {
            self.previous.clear();
            return false;
        }
        errors.ran("lustre");
        let (mut read, mut written, mut metadata, mut rated) = (0.0, 0.0, 0.0, false);
        let mut seen = HashMap::with_capacity(mounts.len());
        for m in &mounts {
            if self.log.first(&m.instance) {
                tracing::info!(detail = m.instance, "Lustre client stats in {}", m.place);
            }
            let Some(totals) = self.read(m) else {
                errors.add("lustre", 1);
                continue;
            };
            if let Some((then, before)) = self.previous.get(&m.instance)
                && let Some(secs) = seconds(*then, now)
            {
                let (d, reset) = fmt::since(before, &totals);
                read += d.read_bytes as f64 / secs;
                written += d.write_bytes as f64 / secs;
                metadata += d.metadata_ops as f64 / secs;
                rated = true;
                if reset {
                    tracing::info!(mount = m.instance, "Lustre stats went back (cleared): counted from zero");
                }
                let figures = vec![
                    (&r::READ_BYTES_PER_SECOND, d.read_bytes as f64, Shown::PerSecond),
                    (&r::WRITE_BYTES_PER_SECOND, d.write_bytes as f64, Shown::PerSecond),
                    (&r::READS_PER_SECOND, d.reads as f64, Shown::PerSecond),
                    (&r::WRITES_PER_SECOND, d.writes as f64, Shown::PerSecond),
                    (&r::OPENS_PER_SECOND, d.opens as f64, Shown::PerSecond),
                    (&r::METADATA_OPS_PER_SECOND, d.metadata_ops as f64, Shown::PerSecond),
                ];
                out.devices.push(reading(&r::LUSTRE, &m.key, secs, reset, figures));
            }
            seen.insert(m.instance.clone(), (now, totals));
        }
        self.previous = seen;
        if rated {
            let host = Dims::new().with(NODE_NAME, node);
            out.push(&LUSTRE_READ_BYTES, host.clone(), read);
            out.push(&LUSTRE_WRITE_BYTES, host.clone(), written);
            out.push(&LUSTRE_METADATA_OPS, host, metadata);
        }
        true
    }
}
