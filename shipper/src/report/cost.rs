//! What a job cost, read from its records: per node the summary's (else the latest sample's)
//! `CostUsd` with the price, share and basis behind it and the waste by the rule; the job's
//! total adds the nodes up.

use super::model::{num, text};
use serde::Serialize;
use serde_json::Value;
use slurm_cw_catalog::records as r;
use std::fmt::Write;

#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct NodeCost {
    pub usd: f64,
    pub hourly_price: Option<f64>,
    pub share: Option<f64>,
    pub basis: Option<String>,
    pub waste_usd: Option<f64>,
    pub waste_resource: Option<String>,
    pub unused_percent: Option<f64>,
    /// Seconds Slurm held it suspended here, billed for its memory and GPUs alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspended_seconds: Option<f64>,
}

/// The cost a record states, if any.
pub fn of(v: &Value) -> Option<NodeCost> {
    Some(NodeCost {
        usd: num(v, r::COST_USD.name)?,
        hourly_price: num(v, r::HOURLY_PRICE.name),
        share: num(v, r::SHARE.name),
        basis: text(v, r::COST_BASIS.name),
        waste_usd: num(v, r::WASTE_USD.name),
        waste_resource: text(v, r::WASTE_RESOURCE.name),
        unused_percent: num(v, r::UNUSED_PERCENT.name),
        suspended_seconds: num(v, r::SUSPENDED_SECONDS.name),
    })
}

/// The latest cost among a node's samples (a running job's cost so far).
pub fn of_samples(samples: &[&Value]) -> Option<NodeCost> {
    samples.iter().filter_map(|s| of(s)).max_by(|a, b| a.usd.total_cmp(&b.usd))
}

/// The job's total and its waste: sums over the nodes that have them.
pub fn total<'a>(nodes: impl Iterator<Item = &'a Option<NodeCost>> + Clone) -> (Option<f64>, Option<f64>) {
    let sum = |vals: Vec<f64>| (!vals.is_empty()).then(|| vals.iter().sum());
    let usd = sum(nodes.clone().flatten().map(|c| c.usd).collect());
    let waste = sum(nodes.flatten().filter_map(|c| c.waste_usd).collect());
    (usd, waste)
}

/// `$1,234.57`
pub fn dollars(v: f64) -> String {
    let cents = (v * 100.0).round() as i64;
    let (whole, frac) = (cents.abs() / 100, cents.abs() % 100);
    let digits = whole.to_string();
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("{}${grouped}.{frac:02}", if cents < 0 { "-" } else { "" })
}

/// A node's cost line: `$8.00  0.25 of the node at $32.00/h (configured); waste $4.00 (gpu 50% unused)`.
pub fn line(c: &NodeCost) -> String {
    let mut o = dollars(c.usd);
    if let (Some(share), Some(price)) = (c.share, c.hourly_price) {
        let _ = write!(o, "  {share:.3} of the node at {}/h", dollars(price));
    }
    if let Some(b) = &c.basis {
        let _ = write!(o, " ({b})");
    }
    if let Some(w) = c.waste_usd {
        let _ = write!(o, "; waste {}", dollars(w));
        if let (Some(res), Some(unused)) = (&c.waste_resource, c.unused_percent) {
            let _ = write!(o, " ({res} {unused:.0}% unused)");
        }
    }
    if let Some(s) = c.suspended_seconds {
        let _ = write!(o, "; suspended {:.0} min (its CPUs not billed then)", s / 60.0);
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dollars_read_as_dollars() {
        assert_eq!(dollars(1234.567), "$1,234.57");
        assert_eq!(dollars(0.004), "$0.00");
        assert_eq!(dollars(31.4), "$31.40");
        assert_eq!(dollars(1_000_000.0), "$1,000,000.00");
    }

    #[test]
    fn a_nodes_cost_line_says_price_share_basis_and_waste() {
        let c = of(&json!({"CostUsd": 8.0, "HourlyPrice": 32.0, "Share": 0.25, "CostBasis": "spot",
                           "WasteUsd": 4.0, "WasteResource": "gpu", "UnusedPercent": 50.0}))
        .unwrap();
        assert_eq!(line(&c), "$8.00  0.250 of the node at $32.00/h (spot); waste $4.00 (gpu 50% unused)");
        assert_eq!(of(&json!({"HourlyPrice": 1.0})), None, "no CostUsd, no cost");
        let suspended =
            of(&json!({"CostUsd": 2.5, "HourlyPrice": 10.0, "Share": 0.25, "SuspendedSeconds": 3600.0}));
        assert_eq!(
            suspended.map(|c| line(&c)).as_deref(),
            Some("$2.50  0.250 of the node at $10.00/h; suspended 60 min (its CPUs not billed then)")
        );
        let nodes = [Some(c.clone()), None, Some(NodeCost { usd: 2.0, ..NodeCost::default() })];
        assert_eq!(total(nodes.iter()), (Some(10.0), Some(4.0)));
        assert_eq!(total([None, None].iter()), (None, None));
    }
}
