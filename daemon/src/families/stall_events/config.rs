//! The `[stalls]` table of the configuration file.

use std::path::PathBuf;

use serde::Deserialize;

use super::duration::parse_duration_ns;
use crate::invalid_value::InvalidValue;

/// Default stall threshold: 100 ms.
pub const DEFAULT_THRESHOLD_NS: u64 = 100_000_000;
/// Default flight-recorder window: 10 minutes.
pub const DEFAULT_WINDOW_NS: u64 = 600_000_000_000;
/// Default flight-recorder bound: 10 000 events (about 4 MB).
pub const DEFAULT_MAX_EVENTS: usize = 10_000;
/// Default local event stream for `wbscope trace` (systemd's `RuntimeDirectory=wbscope`).
pub const DEFAULT_SOCKET: &str = "/run/wbscope/stalls.sock";

/// The `[stalls]` table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStalls {
    /// Operations at least this long are stall events (default `"100ms"`).
    threshold: Option<String>,
    /// How far back the flight recorder keeps events (default `"10m"`).
    window: Option<String>,
    /// At most this many events are kept; the oldest go first (default 10000).
    max_events: Option<usize>,
    /// Unix socket of the local event stream (default `/run/wbscope/stalls.sock`; `""` = none).
    socket: Option<String>,
    /// Also write every stall event, verdict included, as one record to the daemon's log
    /// (default false; schema in docs/stall-records.md).
    log_events: Option<bool>,
}

/// Validated stall settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StallsConfig {
    pub threshold_ns: u64,
    pub window_ns: u64,
    pub max_events: usize,
    pub socket: Option<PathBuf>,
    pub log_events: bool,
}

impl Default for StallsConfig {
    fn default() -> Self {
        StallsConfig {
            threshold_ns: DEFAULT_THRESHOLD_NS,
            window_ns: DEFAULT_WINDOW_NS,
            max_events: DEFAULT_MAX_EVENTS,
            socket: Some(PathBuf::from(DEFAULT_SOCKET)),
            log_events: false,
        }
    }
}

impl RawStalls {
    /// Validates the table, filling in defaults.
    pub fn validate(self) -> Result<StallsConfig, InvalidValue> {
        let d = StallsConfig::default();
        let duration = |key: &'static str, v: Option<String>, default: u64| match v {
            None => Ok(default),
            Some(s) => parse_duration_ns(&s).map_err(|e| InvalidValue {
                key,
                message: e.to_string(),
            }),
        };
        Ok(StallsConfig {
            threshold_ns: duration("stalls.threshold", self.threshold, d.threshold_ns)?,
            window_ns: duration("stalls.window", self.window, d.window_ns)?,
            max_events: self.max_events.unwrap_or(d.max_events),
            socket: match self.socket {
                None => d.socket,
                Some(s) if s.is_empty() => None,
                Some(s) => Some(PathBuf::from(s)),
            },
            log_events: self.log_events.unwrap_or(d.log_events),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        assert_eq!(
            RawStalls::default().validate().unwrap(),
            StallsConfig::default()
        );
        let raw: RawStalls =
            toml::from_str("threshold = \"250ms\"\nwindow = \"1m\"\nmax_events = 5\nsocket = \"\"\nlog_events = true")
                .unwrap();
        let c = raw.validate().unwrap();
        assert_eq!(c.threshold_ns, 250_000_000);
        assert_eq!(c.window_ns, 60_000_000_000);
        assert_eq!(c.max_events, 5);
        assert_eq!(c.socket, None);
        assert!(c.log_events);
    }

    #[test]
    fn bad_threshold_names_the_key() {
        let raw: RawStalls = toml::from_str("threshold = \"100\"").unwrap();
        let err = raw.validate().unwrap_err().to_string();
        assert!(err.contains("stalls.threshold"), "{err}");
    }
}
