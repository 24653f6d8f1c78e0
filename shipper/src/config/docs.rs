//! A section's lines of the configuration table (docs/configuration.md), written beside the
//! section; [`crate::settings::docs`] puts them together.

/// A key's default as the table shows it.
#[derive(Debug, Clone, Copy)]
pub enum Shown {
    /// A TOML value, checked against `Settings::default()`.
    Value(&'static str),
    /// Not set: what the shipper does instead.
    Unset(&'static str),
}

/// One line of the table.
#[derive(Debug)]
pub struct Key {
    pub key: &'static str,
    pub default: Shown,
    pub meaning: &'static str,
}

pub const fn key(key: &'static str, default: Shown, meaning: &'static str) -> Key {
    Key { key, default, meaning }
}
