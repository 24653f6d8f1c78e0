//! What every destination shares: `[delivery]` (how flushes leave the node) and `[spool]` (the
//! disk copy of every flush). Each destination's own section is in its folder.

use crate::config::ConfigError;
use serde::Deserialize;
use std::path::PathBuf;

/// `[delivery]`: how flushes leave the node, for every destination.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeliveryConfig {
    /// Start flushing at a random offset within the flush interval, so a fleet of nodes
    /// does not call the API in the same second.
    pub flush_jitter: bool,
    /// Undelivered items kept in memory per destination when the spool cannot take them (disk
    /// full, no spool).
    pub max_backlog: usize,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        DeliveryConfig { flush_jitter: true, max_backlog: 50_000 }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SpoolConfig {
    /// Write every flush to disk before sending it, and keep it there until CloudWatch took it.
    pub enabled: bool,
    pub dir: PathBuf,
    /// The spool's size limit; beyond it the oldest flushes are dropped (and counted).
    pub max_bytes: u64,
    /// Requests per second when sending a backlog, so a fleet catching up after an outage does
    /// not throttle itself.
    pub replay_rate: f64,
}

impl Default for SpoolConfig {
    fn default() -> Self {
        SpoolConfig {
            enabled: true,
            dir: PathBuf::from("/var/lib/slurm-cw-shipper/spool"),
            max_bytes: 256 << 20,
            replay_rate: 2.0,
        }
    }
}

impl SpoolConfig {
    /// The `[spool]` keys' values.
    pub fn check(&self) -> Result<(), ConfigError> {
        if !(self.replay_rate > 0.0 && self.replay_rate <= 100.0) {
            return Err(ConfigError::invalid(
                "spool.replay_rate",
                "must be above 0 and at most 100 requests per second",
            ));
        }
        if self.max_bytes < 1 << 20 {
            return Err(ConfigError::invalid("spool.max_bytes", "must be at least 1 MiB"));
        }
        Ok(())
    }
}
