//! The configuration kit every component's section is made with: the typed error, the
//! `auto`/`on`/`off` switch, the role, and the readers of lenient values. It imports no
//! component; the settings the daemon runs with are assembled from the sections in
//! [`crate::settings`].

pub(crate) mod de;
pub mod docs;
mod error;
mod role;

pub(crate) use de::{duration, opt_string, string};
pub use error::ConfigError;
pub use role::Role;
pub(crate) use role::setting as role_setting;
use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Toggle {
    Auto,
    On,
    Off,
}
