//! `[cost]`: where a node's price comes from. The admin's own figure first (Savings Plans,
//! Reserved Instances and negotiated rates are known only to them), then AWS's: the Spot price
//! of a Spot instance, else the On-Demand price of its instance type.

use crate::config::ConfigError;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostConfig {
    /// Job costs at all (records, report, the cost metrics).
    pub enabled: bool,
    /// This node's price in dollars an hour, whatever its instance type.
    pub hourly_price: Option<f64>,
    /// Dollars an hour by instance type (`"c5.xlarge" = 0.11`).
    pub prices: BTreeMap<String, f64>,
    /// Ask AWS when no price is configured: `ec2:DescribeSpotPriceHistory` on a Spot instance,
    /// else `pricing:GetProducts`.
    pub lookup: bool,
    /// Where the On-Demand price is kept for a day, so a fleet's restart does not ask the Price
    /// List API once per node.
    pub cache_file: PathBuf,
}

impl Default for CostConfig {
    fn default() -> Self {
        CostConfig {
            enabled: true,
            hourly_price: None,
            prices: BTreeMap::new(),
            lookup: true,
            cache_file: PathBuf::from("/var/lib/slurm-cw-shipper/prices.json"),
        }
    }
}

/// A price is a finite number of dollars, zero or more.
fn dollars(key: &str, v: f64) -> Result<(), ConfigError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(ConfigError::invalid(key, format!("{v} is not a price: a number of dollars an hour, 0 or more")))
    }
}

impl CostConfig {
    /// The `[cost]` keys' values.
    pub fn check(&self) -> Result<(), ConfigError> {
        if let Some(p) = self.hourly_price {
            dollars("cost.hourly_price", p)?;
        }
        for (kind, p) in &self.prices {
            dollars(&format!("cost.prices.{kind}"), *p)?;
        }
        Ok(())
    }
}
