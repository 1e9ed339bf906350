//! The daemon's configuration: a strict TOML file, every key documented with its default, and
//! validated before anything touches the kernel.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    str::FromStr,
};

use serde::Deserialize;

/// Default port. Prometheus' default port allocation list has assigned every port of 9100–9999,
/// so wbscope uses one outside that range.
pub const DEFAULT_PORT: u16 = 19617;

/// Errors reading or validating a configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("config key `{key}`: {message}")]
    Invalid { key: &'static str, message: String },
}

/// Log verbosity, from the config's `log_level` or `--log-level`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Error,
    Warn,
    #[default]
    Info,
    Debug,
    Trace,
}

impl FromStr for LogLevel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "error" => Ok(LogLevel::Error),
            "warn" => Ok(LogLevel::Warn),
            "info" => Ok(LogLevel::Info),
            "debug" => Ok(LogLevel::Debug),
            "trace" => Ok(LogLevel::Trace),
            other => Err(format!(
                "unknown log level '{other}' (expected error, warn, info, debug or trace)"
            )),
        }
    }
}

impl LogLevel {
    /// The level as a `tracing` filter directive.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }
}

/// The configuration file as written. Unknown keys are rejected so that a typo never silently
/// falls back to a default.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    /// Address of the HTTP listener for `/metrics` and `/`. Default `0.0.0.0:19617`.
    listen: Option<String>,
    /// `error`, `warn`, `info` (default), `debug` or `trace`. `RUST_LOG` overrides it.
    log_level: Option<LogLevel>,
    /// Ignore sync calls made by the daemon itself (default `true`).
    ignore_own_io: Option<bool>,
    /// Probe selection.
    probes: Option<RawProbes>,
    /// Stall events: threshold, flight recorder, event stream.
    stalls: Option<crate::stalls::config::RawStalls>,
    /// Web config file (TLS, basic auth) in the format of Prometheus exporters; `""` = none.
    web_config_file: Option<String>,
    /// HTTP connection limits: timeouts and the connection cap.
    http: Option<crate::web::limits::RawHttp>,
}

/// The `[probes]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProbes {
    /// Probe names or family names (as listed by `wbscope check`) not to attach. Default: none.
    disable: Option<Vec<String>>,
}

/// A validated configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub listen: SocketAddr,
    pub log_level: LogLevel,
    pub ignore_own_io: bool,
    /// `probes.disable`: probe or family names not to attach.
    pub disabled_probes: Vec<String>,
    /// The `[stalls]` table.
    pub stalls: crate::stalls::StallsConfig,
    /// `web_config_file`: TLS and basic auth for every route (see [`crate::web`]).
    pub web_config_file: Option<PathBuf>,
    /// The `[http]` table.
    pub http: crate::web::limits::HttpLimits,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([0, 0, 0, 0], DEFAULT_PORT)),
            log_level: LogLevel::Info,
            ignore_own_io: true,
            disabled_probes: Vec::new(),
            stalls: crate::stalls::StallsConfig::default(),
            web_config_file: None,
            http: crate::web::limits::HttpLimits::default(),
        }
    }
}

impl Config {
    /// Reads and validates a TOML configuration file.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = crate::files::read_text(path, crate::files::CONFIG_LIMIT).map_err(|e| {
            ConfigError::Read {
                path: path.display().to_string(),
                source: e.into(),
            }
        })?;
        Config::from_toml(&text).map_err(|err| match err {
            ConfigError::Parse { message, .. } => ConfigError::Parse {
                path: path.display().to_string(),
                message,
            },
            other => other,
        })
    }

    /// Parses and validates TOML text.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: "<text>".into(),
            message: e.message().to_owned(),
        })?;
        let defaults = Config::default();
        Ok(Config {
            listen: match raw.listen {
                Some(s) => parse_listen(&s)?,
                None => defaults.listen,
            },
            log_level: raw.log_level.unwrap_or(defaults.log_level),
            ignore_own_io: raw.ignore_own_io.unwrap_or(defaults.ignore_own_io),
            disabled_probes: raw.probes.and_then(|p| p.disable).unwrap_or_default(),
            stalls: raw.stalls.unwrap_or_default().validate()?,
            web_config_file: raw
                .web_config_file
                .filter(|p| !p.is_empty())
                .map(PathBuf::from),
            http: raw.http.unwrap_or_default().validate()?,
        })
    }
}

/// Parses a listen address, naming the `listen` key in the error.
pub fn parse_listen(s: &str) -> Result<SocketAddr, ConfigError> {
    s.parse().map_err(|e| ConfigError::Invalid {
        key: "listen",
        message: format!("'{s}' is not a socket address like 0.0.0.0:19617 or [::1]:19617 ({e})"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_defaults() {
        let c = Config::from_toml("").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.listen.port(), 19617);
        assert!(c.ignore_own_io);
    }

    #[test]
    fn every_key_is_read() {
        let c = Config::from_toml(
            "listen = \"127.0.0.1:1234\"\nlog_level = \"debug\"\nignore_own_io = false\n[probes]\ndisable = [\"writeback_queue\"]\n",
        )
        .unwrap();
        assert_eq!(c.listen, "127.0.0.1:1234".parse().unwrap());
        assert_eq!(c.log_level, LogLevel::Debug);
        assert!(!c.ignore_own_io);
        assert_eq!(c.disabled_probes, vec!["writeback_queue".to_string()]);
    }

    #[test]
    fn unknown_key_is_rejected_by_name() {
        let err = Config::from_toml("listen_addr = \"1.2.3.4:5\"").unwrap_err();
        assert!(err.to_string().contains("listen_addr"), "{err}");
    }

    #[test]
    fn unknown_key_in_a_table_is_rejected_by_name() {
        let err = Config::from_toml("[probes]\ndisabled = []").unwrap_err();
        assert!(err.to_string().contains("disabled"), "{err}");
    }

    #[test]
    fn malformed_listen_names_the_key() {
        let err = Config::from_toml("listen = \"localhost\"").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("`listen`") && msg.contains("localhost"),
            "{msg}"
        );
    }

    #[test]
    fn bad_log_level_is_rejected() {
        assert!(Config::from_toml("log_level = \"loud\"").is_err());
        assert_eq!("WARN".parse::<LogLevel>(), Ok(LogLevel::Warn));
        assert!("loud".parse::<LogLevel>().is_err());
    }
}
