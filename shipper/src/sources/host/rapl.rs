//! CPU energy from RAPL, in the powercap class (`/sys/class/powercap/intel-rapl:N` for package
//! N, `intel-rapl:N:M` for its subzones: dram, core, uncore). `energy_uj` wraps at
//! `max_energy_range_uj` (at 200 W, every 20 minutes or so): a reading below the one before is
//! a wrap. Virtual instances hide RAPL; metal instances show it. `energy_uj` is root's to read
//! since Linux 5.10.

use super::{names, read_small, reading, seconds};
use crate::sample::{Batch, Dims, Shown};
use crate::sources::Errors;
use slurm_cw_catalog::dims::NODE_NAME;
use slurm_cw_catalog::metrics::CPU_PACKAGE_POWER;
use slurm_cw_catalog::records as r;
use slurm_cw_formats::log_once::LogOnce;
use slurm_cw_formats::powercap;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// One RAPL zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    /// `package-0`, or `package-0/dram` for a subzone.
    pub key: String,
    pub dir: PathBuf,
    /// A package zone (what CpuPackagePower adds up), not a subzone nor `psys`.
    pub package: bool,
    pub range: Option<u64>,
}

/// The zones under `root` (`/sys/class/powercap`), packages first, in number order.
pub fn zones(root: &Path) -> Vec<Zone> {
    let mut found: Vec<((u32, Option<u32>), String, PathBuf)> = Vec::new();
    let mut buf = String::new();
    for dir in names(root) {
        let Some(id) = powercap::zone(&dir) else { continue };
        let path = root.join(&dir);
        if read_small(&path.join("name"), &mut buf).is_err() {
            continue;
        }
        if let Some(name) = powercap::name(&buf) {
            found.push((id, name.to_owned(), path));
        }
    }
    found.sort_by_key(|(id, _, _)| *id);
    let parent_name =
        |pkg: u32| found.iter().find(|(id, _, _)| *id == (pkg, None)).map(|(_, n, _)| n.clone());
    let mut out = Vec::new();
    for ((pkg, sub), name, dir) in &found {
        let key = match sub {
            None => name.clone(),
            Some(_) => format!("{}/{name}", parent_name(*pkg).unwrap_or_else(|| format!("intel-rapl:{pkg}"))),
        };
        let range = read_small(&dir.join("max_energy_range_uj"), &mut buf)
            .ok()
            .and_then(|_| powercap::micro_joules(&buf));
        out.push(Zone {
            key,
            dir: dir.clone(),
            package: sub.is_none() && name.starts_with("package"),
            range,
        });
    }
    out
}

/// `--check`'s line: the zones.
pub fn survey(root: &Path) -> Option<String> {
    let zones = zones(root);
    if zones.is_empty() {
        return None;
    }
    let mut buf = String::new();
    let readable = zones.iter().any(|z| read_small(&z.dir.join("energy_uj"), &mut buf).is_ok());
    let list: Vec<&str> = zones.iter().map(|z| z.key.as_str()).collect();
    let note = if readable { "" } else { " (energy_uj not readable: root only since Linux 5.10)" };
    Some(format!("{} zone(s) under {}: {}{note}", zones.len(), root.display(), list.join(" ")))
}

pub struct Rapl {
    root: PathBuf,
    previous: HashMap<String, (Instant, u64)>,
    buf: String,
    log: LogOnce,
}

impl Rapl {
    pub fn new(root: PathBuf) -> Self {
        Rapl { root, previous: HashMap::new(), buf: String::new(), log: LogOnce::default() }
    }

    /// Reads every zone; returns whether there is any.
    pub fn collect(&mut self, now: Instant, node: &str, out: &mut Batch, errors: &mut Errors) -> bool {
        let zones = zones(&self.root);
        if zones.is_empty() {
            self.previous.clear();
            return false;
        }
        errors.ran("rapl");
        let (mut watts, mut rated) = (0.0, false);
        let mut seen = HashMap::with_capacity(zones.len());
        for z in &zones {
            let path = z.dir.join("energy_uj");
            let uj = match read_small(&path, &mut self.buf) {
                Ok(()) => powercap::micro_joules(&self.buf),
                Err(e) => {
                    let key = path.display().to_string();
                    if self.log.first(&key) {
                        tracing::warn!(detail = key, "cannot read RAPL energy: {e}");
                    }
                    None
                }
            };
            let Some(uj) = uj else {
                errors.add("rapl", 1);
                continue;
            };
            if let Some((then, before)) = self.previous.get(&z.key)
                && let Some(secs) = seconds(*then, now)
            {
                // A counter that went back with no range to wrap at is a reset: no figure.
                let used = powercap::energy_since(*before, uj, z.range);
                let joules = used.unwrap_or(0) as f64 / 1e6;
                if z.package && used.is_some() {
                    watts += joules / secs;
                    rated = true;
                }
                let figures = if used.is_some() {
                    vec![(&r::JOULES, joules, Shown::Total), (&r::WATTS, joules, Shown::PerSecond)]
                } else {
                    Vec::new()
                };
                out.devices.push(reading(&r::RAPL, &z.key, secs, used.is_none(), figures));
            }
            seen.insert(z.key.clone(), (now, uj));
        }
        self.previous = seen;
        if rated {
            out.push(&CPU_PACKAGE_POWER, Dims::new().with(NODE_NAME, node), watts);
        }
        true
    }
}
