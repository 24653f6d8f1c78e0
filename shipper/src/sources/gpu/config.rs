//! `[gpu]`: whether the GPU collector runs and how finely it ships.

use crate::config::Toggle;
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GpuConfig {
    /// auto: on when the NVIDIA driver is present.
    pub enabled: Toggle,
    /// Add per-GPU detail (NodeName + Gpu index) to per-job GPU metrics.
    pub per_gpu_dimensions: bool,
    /// Use the GPU UUID rather than its index in per-GPU detail.
    pub uuid_dimension: bool,
}

impl Default for GpuConfig {
    fn default() -> Self {
        GpuConfig { enabled: Toggle::Auto, per_gpu_dimensions: false, uuid_dimension: false }
    }
}
