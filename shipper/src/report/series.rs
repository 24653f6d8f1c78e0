//! A job's figures over time, from its `job_sample` records: per node its CPU use and memory,
//! and per GPU (or the job's GPUs together, where the records keep their mean) utilisation
//! and memory. `report` draws each as a sparkline; `--json` keeps the points.

use super::model::{by_gpu, num, seconds, text};
use serde::Serialize;
use serde_json::Value;
use slurm_cw_catalog::metrics::{CPU_USAGE, GPU_MEMORY_USED, GPU_UTILIZATION, MEMORY_RSS, MEMORY_USAGE};
use slurm_cw_catalog::records::{self as r, kinds};
use std::collections::BTreeMap;

/// What a series counts.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    Cores,
    Bytes,
    Percent,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Series {
    pub node: String,
    /// `cpu`, `memory`, `gpu 0 util`, `gpu 0 memory` (`gpu all` where the records keep the
    /// job's mean over its GPUs).
    pub figure: String,
    pub unit: Unit,
    /// (seconds since the epoch, value), in time order.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    pub fn peak(&self) -> Option<f64> {
        self.points.iter().map(|p| p.1).reduce(f64::max)
    }

    pub fn mean(&self) -> Option<f64> {
        (!self.points.is_empty())
            .then(|| self.points.iter().map(|p| p.1).sum::<f64>() / self.points.len() as f64)
    }
}

/// Every series of `records` (a job's, any order), by node, then figure.
pub fn of(records: &[Value]) -> Vec<Series> {
    // (node, order: cpu, memory, GPUs; the GPU; util before memory) -> the series.
    type Key = (String, u8, String, u8);
    type Points = Vec<(f64, f64)>;
    let mut by: BTreeMap<Key, (String, Unit, Points)> = BTreeMap::new();
    for rec in records.iter().filter(|v| text(v, r::TYPE.name).as_deref() == Some(kinds::JOB_SAMPLE)) {
        let (Some(node), Some(at)) = (text(rec, r::NODE_NAME.name), seconds(rec)) else { continue };
        let mut put = |key: (u8, &str, u8), figure: String, unit: Unit, v: Option<f64>| {
            if let Some(v) = v {
                let e = by.entry((node.clone(), key.0, key.1.to_owned(), key.2)).or_insert((
                    figure,
                    unit,
                    Vec::new(),
                ));
                e.2.push((at, v));
            }
        };
        put((0, "", 0), "cpu".into(), Unit::Cores, num(rec, CPU_USAGE.name));
        let memory = num(rec, MEMORY_USAGE.name).or_else(|| num(rec, MEMORY_RSS.name));
        put((1, "", 0), "memory".into(), Unit::Bytes, memory);
        for (i, key, what, unit) in [
            (0, GPU_UTILIZATION.name, "util", Unit::Percent),
            (1, GPU_MEMORY_USED.name, "memory", Unit::Bytes),
        ] {
            for (gpu, v) in by_gpu(rec, key) {
                put((2, &gpu, i), format!("gpu {gpu} {what}"), unit, Some(v));
            }
        }
    }
    by.into_iter()
        .map(|((node, ..), (figure, unit, mut points))| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series { node, figure, unit, points }
        })
        .collect()
}
