//! The shipper's own figures: its CPU and memory each collection ([`ShipperCollector`]), so
//! that its cost on a node is itself a metric. What delivery did each flush is the sinks' to
//! say ([`crate::sinks::self_metrics`]).

use super::{Collector, Errors};
use crate::sample::{Batch, Dims};
use slurm_cw_catalog::dims::NODE_NAME;
use slurm_cw_catalog::metrics::{SHIPPER_CPU_USAGE, SHIPPER_MEMORY_RSS};
use std::time::Instant;

/// The shipper's own figures, on every host, in [`super::COLLECTORS`].
/// The shipper's own figures, on every role ([`super::table`]).
pub fn build(shared: &super::Shared) -> Option<Box<dyn super::Collector>> {
    Some(Box::new(ShipperCollector::new(shared.node.clone())))
}

pub struct ShipperCollector {
    node: String,
    last: Option<(Instant, f64)>,
    ticks_per_second: f64,
    page_size: f64,
}

impl ShipperCollector {
    pub fn new(node: impl Into<String>) -> Self {
        ShipperCollector {
            node: node.into(),
            last: None,
            ticks_per_second: procfs::ticks_per_second() as f64,
            page_size: procfs::page_size() as f64,
        }
    }
}

#[async_trait::async_trait(?Send)]
impl Collector for ShipperCollector {
    fn name(&self) -> &'static str {
        "shipper"
    }

    async fn collect(&mut self, out: &mut Batch, errors: &mut Errors) {
        errors.ran("shipper");
        let me = match procfs::process::Process::myself().and_then(|p| Ok((p.stat()?, p.statm()?))) {
            Ok(v) => v,
            Err(e) => {
                tracing::debug!(error = %e, "cannot read /proc/self");
                errors.add("shipper", 1);
                return;
            }
        };
        let (stat, statm) = me;
        let dims = Dims::new().with(NODE_NAME, self.node.as_str());
        out.push(&SHIPPER_MEMORY_RSS, dims.clone(), statm.resident as f64 * self.page_size);
        let cpu_seconds = (stat.utime + stat.stime) as f64 / self.ticks_per_second;
        let now = Instant::now();
        if let Some((then, before)) = self.last {
            let wall = now.duration_since(then).as_secs_f64();
            if wall > 0.0 {
                let pct = ((cpu_seconds - before).max(0.0) / wall) * 100.0;
                out.push(&SHIPPER_CPU_USAGE, dims, pct);
            }
        }
        self.last = Some((now, cpu_seconds));
    }
}
