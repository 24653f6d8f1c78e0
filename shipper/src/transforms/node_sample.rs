//! The node's `node_sample` record: what its EFA/InfiniBand ports, Lustre mounts and RAPL
//! zones did over one flush, each by name, beside the job records in the job log group. The
//! metrics add these up across the cluster; this keeps each node's and each device's own
//! figures, billed by the byte rather than per metric.

use super::records::{finish, round};
use crate::sample::{Batch, Shown};
use serde_json::{Map, Value, json};
use slurm_cw_catalog::records::{self as r, Field, kinds};
use slurm_cw_formats::datum::format_timestamp;
use slurm_cw_formats::record::Record;
use std::collections::BTreeMap;
use std::time::SystemTime;

/// One item's counts over the flush.
#[derive(Debug, Default)]
struct Item {
    seconds: f64,
    /// field -> (counts added up, how shown), in the order first seen.
    figures: Vec<(&'static Field, f64, Shown)>,
}

#[derive(Debug)]
pub struct NodeSamples {
    node: String,
    /// (source field name, item) -> counts
    items: BTreeMap<(&'static str, String), Item>,
    resets: u64,
    samples: u32,
    /// Records cut to fit one log event.
    pub trimmed: u64,
}

impl NodeSamples {
    pub fn new(node: String) -> Self {
        NodeSamples { node, items: BTreeMap::new(), resets: 0, samples: 0, trimmed: 0 }
    }

    /// Takes one collection's device readings.
    pub fn observe(&mut self, batch: &Batch) {
        if batch.devices.is_empty() {
            return;
        }
        self.samples += 1;
        for d in &batch.devices {
            self.resets += u64::from(d.reset);
            let item = self.items.entry((d.source.name, d.item.clone())).or_default();
            if d.figures.is_empty() {
                continue;
            }
            item.seconds += d.seconds;
            for (field, count, shown) in &d.figures {
                match item.figures.iter_mut().find(|(f, _, s)| std::ptr::eq(*f, *field) && s == shown) {
                    Some((_, sum, _)) => *sum += count,
                    None => item.figures.push((field, *count, *shown)),
                }
            }
        }
    }

    /// The record of what was observed since the last flush; None when nothing was.
    pub fn flush(&mut self, at: SystemTime) -> Option<Record> {
        if self.samples == 0 {
            return None;
        }
        let mut m = Map::new();
        let millis = at.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis());
        m.insert(r::TYPE.name.into(), json!(kinds::NODE_SAMPLE));
        m.insert(r::RECORD_ID.name.into(), json!(format!("{}:node:{millis}", self.node)));
        m.insert(r::TIME.name.into(), json!(format_timestamp(at)));
        m.insert(r::NODE_NAME.name.into(), json!(self.node));
        m.insert(r::SAMPLES.name.into(), json!(self.samples));
        for ((source, key), item) in std::mem::take(&mut self.items) {
            let mut o = Map::new();
            o.insert(r::SECONDS.name.into(), json!(round(item.seconds)));
            for (field, count, shown) in item.figures {
                let v = match shown {
                    Shown::Total => count,
                    Shown::PerSecond if item.seconds > 0.0 => count / item.seconds,
                    Shown::PerSecond => continue,
                };
                o.insert(field.name.into(), json!(round(v)));
            }
            let group = m.entry(source.to_owned()).or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(g) = group {
                g.insert(key, Value::Object(o));
            }
        }
        if self.resets > 0 {
            m.insert(r::COUNTER_RESETS.name.into(), json!(std::mem::take(&mut self.resets)));
        }
        self.samples = 0;
        let (rec, cut) = finish(m, at);
        self.trimmed += u64::from(cut);
        Some(rec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::DeviceReading;
    use std::time::Duration;

    fn reading(item: &str, secs: f64, rx: f64, errors: f64, reset: bool) -> DeviceReading {
        DeviceReading {
            source: &r::FABRIC,
            item: item.into(),
            seconds: secs,
            figures: vec![
                (&r::RX_BYTES_PER_SECOND, rx, Shown::PerSecond),
                (&r::ERRORS, errors, Shown::Total),
            ],
            reset,
        }
    }

    #[test]
    fn rates_over_the_flush_counts_added_and_nothing_without_readings() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut n = NodeSamples::new("n1".into());
        n.observe(&Batch::new(at));
        assert!(n.flush(at).is_none(), "no device, no record");
        let mut b = Batch::new(at);
        b.devices.push(reading("efa0/1", 30.0, 3000.0, 1.0, false));
        n.observe(&b);
        let mut b = Batch::new(at);
        b.devices.push(reading("efa0/1", 30.0, 9000.0, 2.0, true));
        n.observe(&b);
        let rec = n.flush(at).unwrap();
        let v: Value = serde_json::from_str(&rec.message).unwrap();
        assert_eq!(v["Type"], "node_sample");
        assert_eq!(v["RecordId"], "n1:node:1800000000000");
        assert_eq!(v["Samples"], 2);
        assert_eq!(v["Fabric"]["efa0/1"], json!({"Seconds": 60.0, "RxBytesPerSecond": 200.0, "Errors": 3.0}));
        assert_eq!(v["CounterResets"], 1);
        assert!(n.flush(at).is_none(), "a flush takes everything");
    }
}
