//! A configuration error: the process exits with status 2 and says which file, variable or key.

/// What is wrong with the configuration, and where.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {origin}: {source}")]
    Read { origin: String, source: std::io::Error },
    /// The text is not TOML, or a key is unknown or of the wrong type (`origin` names the file,
    /// with its line, or the environment variables applied).
    #[error("{origin}: {why}")]
    Parse { origin: String, why: String },
    /// A value its type allows but the daemon cannot use.
    #[error("{key}: {why}")]
    Invalid { key: String, why: String },
}

impl ConfigError {
    /// A value of `key` the daemon cannot use, and why.
    pub fn invalid(key: impl Into<String>, why: impl std::fmt::Display) -> Self {
        ConfigError::Invalid { key: key.into(), why: why.to_string() }
    }

    /// The key at fault, where one is known.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { key, .. } => Some(key),
            _ => None,
        }
    }
}
