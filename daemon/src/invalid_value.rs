//! A configuration value of the right type that is not allowed: its key path and why. The tables
//! validated next to the code they configure (`[stalls]`, `[http]`) return it, and `config`
//! turns it into a `ConfigError` (with the value's line and column where it can find them), so
//! those modules need nothing from `config`.

/// A value that is not allowed.
#[derive(Debug, thiserror::Error)]
#[error("config key `{key}`: {message}")]
pub struct InvalidValue {
    /// The key path, e.g. `stalls.threshold`.
    pub key: &'static str,
    pub message: String,
}
