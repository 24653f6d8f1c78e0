//! The shipper's own figures: its CPU and memory each collection ([`ShipperCollector`]), so
//! that its cost on a node is itself a metric. What delivery did each flush is the sinks' to
//! say ([`crate::sinks::self_metrics`]).

use super::{Collector, Errors};
use crate::sample::{Batch, Dims};
use slurm_cw_catalog::dims::NODE_NAME;
use slurm_cw_catalog::metrics::{SHIPPER_CPU_USAGE, SHIPPER_MEMORY_RSS};
use std::time::{Duration, Instant};

/// The shipper's own figures, on every role ([`super::table`]).
pub fn build(shared: &super::Shared) -> Option<Box<dyn super::Collector>> {
    Some(Box::new(ShipperCollector::new(shared.node.clone())))
}

pub struct ShipperCollector {
    node: String,
    last: Option<(Instant, Duration)>,
    /// /proc/self/statm, held open and read from its start each collection.
    statm: Option<std::fs::File>,
    page_size: f64,
}

impl ShipperCollector {
    pub fn new(node: impl Into<String>) -> Self {
        ShipperCollector {
            node: node.into(),
            last: None,
            statm: std::fs::File::open("/proc/self/statm").ok(),
            page_size: procfs::page_size() as f64,
        }
    }

    /// Resident pages, from statm's second field.
    fn resident_pages(&mut self) -> Option<f64> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 128];
        let n = self.statm.as_ref()?.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        text.split_whitespace().nth(1)?.parse().ok()
    }
}

#[async_trait::async_trait(?Send)]
impl Collector for ShipperCollector {
    fn name(&self) -> &'static str {
        "shipper"
    }

    async fn collect(&mut self, out: &mut Batch, errors: &mut Errors) {
        errors.ran("shipper");
        let dims = Dims::new().with(NODE_NAME, self.node.as_str());
        match self.resident_pages() {
            Some(pages) => out.push(&SHIPPER_MEMORY_RSS, dims.clone(), pages * self.page_size),
            None => {
                tracing::debug!("cannot read /proc/self/statm");
                errors.add("shipper", 1);
            }
        }
        let cpu = crate::sys::limits::cpu_time();
        let now = Instant::now();
        if let Some((then, before)) = self.last {
            let wall = now.duration_since(then).as_secs_f64();
            if wall > 0.0 {
                let pct = (cpu.saturating_sub(before).as_secs_f64() / wall) * 100.0;
                out.push(&SHIPPER_CPU_USAGE, dims, pct);
            }
        }
        self.last = Some((now, cpu));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn its_memory_and_then_its_cpu_share() {
        let mut c = ShipperCollector::new("n1");
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let mut first = Batch::new(std::time::SystemTime::now());
        rt.block_on(c.collect(&mut first, &mut Errors::new()));
        let scalars = |b: &Batch, m: &'static slurm_cw_catalog::Metric| -> Vec<f64> {
            let of = |s: &crate::sample::Sample| match s.value {
                crate::sample::Observed::Scalar(v) => Some(v),
                crate::sample::Observed::Distribution(_) => None,
            };
            b.samples.iter().filter(|s| s.metric.name == m.name).filter_map(of).collect()
        };
        let rss = scalars(&first, &SHIPPER_MEMORY_RSS);
        assert!(rss.len() == 1 && rss[0] > 1e6, "{rss:?}");
        assert!(scalars(&first, &SHIPPER_CPU_USAGE).is_empty(), "no share before a second reading");
        // Some CPU between the two readings.
        let spin = Instant::now();
        while spin.elapsed() < Duration::from_millis(30) {
            std::hint::black_box(spin.elapsed());
        }
        let mut second = Batch::new(std::time::SystemTime::now());
        rt.block_on(c.collect(&mut second, &mut Errors::new()));
        let cpu = scalars(&second, &SHIPPER_CPU_USAGE);
        assert!(cpu.len() == 1 && cpu[0] > 10.0, "{cpu:?}");
    }
}
