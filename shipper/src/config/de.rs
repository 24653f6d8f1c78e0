//! How configuration values are read: strings that may come unquoted from the environment,
//! and human durations.

use serde::{Deserialize, Deserializer};
use std::time::Duration;

/// Accepts a string, or a number written without quotes (from an environment variable).
pub(crate) fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Lenient {
        S(String),
        I(i64),
        F(f64),
    }
    Ok(match Lenient::deserialize(d)? {
        Lenient::S(s) => s,
        Lenient::I(i) => i.to_string(),
        Lenient::F(f) => f.to_string(),
    })
}

pub(crate) fn opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    string(d).map(Some)
}

/// A human duration: "30s", "1m", "500ms", "1h 30m".
pub(crate) fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    humantime::parse_duration(&s)
        .map_err(|e| serde::de::Error::custom(format!("{s:?} is not a duration like 30s or 1m: {e}")))
}

/// `auto`, `on` or `off`, or a boolean where the key once was one (`true` is `on`).
pub(crate) fn toggle<'de, D: Deserializer<'de>>(d: D) -> Result<super::Toggle, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Lenient {
        B(bool),
        S(String),
    }
    use super::Toggle;
    match Lenient::deserialize(d)? {
        Lenient::B(true) => Ok(Toggle::On),
        Lenient::B(false) => Ok(Toggle::Off),
        Lenient::S(s) => match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Toggle::Auto),
            "on" | "true" => Ok(Toggle::On),
            "off" | "false" => Ok(Toggle::Off),
            _ => Err(serde::de::Error::custom(format!("{s:?} is not auto, on or off"))),
        },
    }
}
