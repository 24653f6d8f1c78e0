//! EFA and InfiniBand ports, from `/sys/class/infiniband/<device>/ports/<port>/`: an
//! InfiniBand port's PMA counters in `counters/` (`*_data` in 4-octet words), else an EFA
//! port's `hw_counters/` (older efa drivers keep them per device, in `<device>/hw_counters/`).

use super::{names, read_small, reading, seconds};
use crate::sample::{Batch, Dims, Shown};
use crate::sources::Errors;
use slurm_cw_catalog::dims::NODE_NAME;
use slurm_cw_catalog::metrics::{FABRIC_ERRORS, FABRIC_RX_BYTES, FABRIC_TX_BYTES};
use slurm_cw_catalog::records as r;
use slurm_cw_formats::infiniband::{self as ib, CounterSet, PortTotals};
use slurm_cw_formats::log_once::LogOnce;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// One port and where its counters are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    /// `<device>/<port>`
    pub key: String,
    pub dir: PathBuf,
    pub set: CounterSet,
}

/// The ports under `root` (`/sys/class/infiniband`), by device and port number.
pub fn ports(root: &Path) -> Vec<Port> {
    let mut out = Vec::new();
    for device in names(root) {
        let dev = root.join(&device);
        let mut numbers: Vec<(u32, String)> =
            names(&dev.join("ports")).into_iter().filter_map(|p| Some((p.parse().ok()?, p))).collect();
        numbers.sort();
        for (_, port) in numbers {
            let p = dev.join("ports").join(&port);
            let found = if p.join("counters/port_rcv_data").is_file() {
                Some((p.join("counters"), CounterSet::Infiniband))
            } else if p.join("hw_counters/rx_bytes").is_file() {
                Some((p.join("hw_counters"), CounterSet::Efa))
            } else if dev.join("hw_counters/rx_bytes").is_file() {
                Some((dev.join("hw_counters"), CounterSet::Efa))
            } else {
                None
            };
            if let Some((dir, set)) = found {
                out.push(Port { key: format!("{device}/{port}"), dir, set });
            }
        }
    }
    out
}

/// `--check`'s line: the ports and their kind.
pub fn survey(root: &Path) -> Option<String> {
    let ports = ports(root);
    if ports.is_empty() {
        return None;
    }
    let efa = ports.iter().filter(|p| p.set == CounterSet::Efa).count();
    let list: Vec<&str> = ports.iter().map(|p| p.key.as_str()).collect();
    Some(format!(
        "{} EFA and {} InfiniBand port(s) under {}: {}",
        efa,
        ports.len() - efa,
        root.display(),
        list.join(" ")
    ))
}

pub struct Fabric {
    root: PathBuf,
    previous: HashMap<String, (Instant, PortTotals)>,
    buf: String,
    log: LogOnce,
}

impl Fabric {
    pub fn new(root: PathBuf) -> Self {
        Fabric { root, previous: HashMap::new(), buf: String::new(), log: LogOnce::default() }
    }

    /// One port's counters now; None (logged once) when its traffic counters cannot be read.
    fn read(&mut self, port: &Port) -> Option<PortTotals> {
        let mut files: Vec<(&str, String)> = Vec::new();
        for name in ib::wanted(port.set) {
            if read_small(&port.dir.join(name), &mut self.buf).is_ok() {
                files.push((name, std::mem::take(&mut self.buf)));
            }
        }
        let pairs: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
        let totals = ib::port_totals(port.set, &pairs);
        if totals.is_none() {
            let key = port.dir.display().to_string();
            if self.log.first(&key) {
                tracing::warn!(
                    detail = key,
                    "cannot read this port's byte and packet counters; its figures are left out"
                );
            }
        }
        totals
    }

    /// Reads every port; returns whether there is any.
    pub fn collect(&mut self, now: Instant, node: &str, out: &mut Batch, errors: &mut Errors) -> bool {
        let ports = ports(&self.root);
        if ports.is_empty() {
            self.previous.clear();
            return false;
        }
        errors.ran("fabric");
        let (mut rx, mut tx, mut errs, mut rated) = (0.0, 0.0, 0.0, false);
        let mut seen = HashMap::with_capacity(ports.len());
        for port in &ports {
            let Some(now_totals) = self.read(port) else {
                errors.add("fabric", 1);
                continue;
            };
            if let Some((then, before)) = self.previous.get(&port.key)
                && let Some(secs) = seconds(*then, now)
            {
                let (d, reset) = ib::since(before, &now_totals);
                rx += d.rx_bytes as f64 / secs;
                tx += d.tx_bytes as f64 / secs;
                errs += d.errors as f64;
                rated = true;
                let mut figures = vec![
                    (&r::RX_BYTES_PER_SECOND, d.rx_bytes as f64, Shown::PerSecond),
                    (&r::TX_BYTES_PER_SECOND, d.tx_bytes as f64, Shown::PerSecond),
                    (&r::RX_PACKETS_PER_SECOND, d.rx_packets as f64, Shown::PerSecond),
                    (&r::TX_PACKETS_PER_SECOND, d.tx_packets as f64, Shown::PerSecond),
                ];
                let optional = [
                    (&r::RDMA_READ_BYTES_PER_SECOND, d.rdma_read_bytes, Shown::PerSecond),
                    (&r::RDMA_WRITE_BYTES_PER_SECOND, d.rdma_write_bytes, Shown::PerSecond),
                ];
                figures.extend(optional.into_iter().filter_map(|(f, v, s)| Some((f, v? as f64, s))));
                figures.push((&r::ERRORS, d.errors as f64, Shown::Total));
                if let Some(n) = d.retransmitted_packets {
                    figures.push((&r::RETRANSMITTED_PACKETS, n as f64, Shown::Total));
                }
                if reset {
                    tracing::info!(port = port.key, "fabric counters went back (reset): counted from zero");
                }
                out.devices.push(reading(&r::FABRIC, &port.key, secs, reset, figures));
            }
            seen.insert(port.key.clone(), (now, now_totals));
        }
        self.previous = seen;
        if rated {
            let host = Dims::new().with(NODE_NAME, node);
            out.push(&FABRIC_RX_BYTES, host.clone(), rx);
            out.push(&FABRIC_TX_BYTES, host.clone(), tx);
            out.push(&FABRIC_ERRORS, host, errs);
        }
        true
    }
}
