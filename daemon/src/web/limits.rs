//! The `[http]` table: how long a connection may take for each step and how many may be open.
//! Every connection is bounded in time and number, so silent, slow or idle clients (also ones
//! that never authenticate) cannot hold the daemon's file descriptors.

use std::time::Duration;

use serde::Deserialize;

use crate::{families::stall_events::duration::parse_duration_ns, invalid_value::InvalidValue};

/// Default time from accept (or TLS handshake start) to the end of the first request's headers.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time a kept-alive connection may wait for its next request. Longer than the usual
/// scrape interval (15–60 s), so a scraper keeps its connection.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Default time from a request's headers to the end of its response (a slow reader included).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Default cap on open connections: well below the usual soft limit of 1024 descriptors, so
/// the probes, /proc readers and a scrape always find descriptors.
pub const DEFAULT_MAX_CONNECTIONS: usize = 128;

/// The `[http]` table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHttp {
    /// Time to receive a request's headers after accept (default `"10s"`; TLS handshake
    /// included).
    header_timeout: Option<String>,
    /// Time a kept-alive connection may wait for its next request (default `"90s"`).
    idle_timeout: Option<String>,
    /// Time from request headers to the end of the response (default `"60s"`).
    request_timeout: Option<String>,
    /// Open connections at most; at the cap the connection idle the longest is closed for a
    /// new one, or the new one is refused if none is idle (default 128).
    max_connections: Option<usize>,
}

/// Validated HTTP limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub request_timeout: Duration,
    pub max_connections: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

impl RawHttp {
    /// Validates the table, filling in defaults.
    pub fn validate(self) -> Result<HttpLimits, InvalidValue> {
        let d = HttpLimits::default();
        let duration = |key: &'static str, v: Option<String>, default: Duration| match v {
            None => Ok(default),
            Some(s) => match parse_duration_ns(&s) {
                Ok(0) => Err(InvalidValue {
                    key,
                    message: format!("'{s}' is zero; a timeout must be positive"),
                }),
                Ok(ns) => Ok(Duration::from_nanos(ns)),
                Err(e) => Err(InvalidValue {
                    key,
                    message: e.to_string(),
                }),
            },
        };
        let max_connections = match self.max_connections {
            None => d.max_connections,
            Some(0) => {
                return Err(InvalidValue {
                    key: "http.max_connections",
                    message: "0 would refuse every scrape; at least 1".into(),
                });
            }
            Some(n) => n,
        };
        Ok(HttpLimits {
            header_timeout: duration("http.header_timeout", self.header_timeout, d.header_timeout)?,
            idle_timeout: duration("http.idle_timeout", self.idle_timeout, d.idle_timeout)?,
            request_timeout: duration(
                "http.request_timeout",
                self.request_timeout,
                d.request_timeout,
            )?,
            max_connections,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_values() {
        assert_eq!(
            RawHttp::default().validate().unwrap(),
            HttpLimits::default()
        );
        let raw = RawHttp {
            header_timeout: Some("2s".into()),
            max_connections: Some(7),
            ..RawHttp::default()
        };
        let limits = raw.validate().unwrap();
        assert_eq!(limits.header_timeout, Duration::from_secs(2));
        assert_eq!(limits.max_connections, 7);
    }

    #[test]
    fn zero_is_refused_by_key() {
        let raw = RawHttp {
            idle_timeout: Some("0s".into()),
            ..RawHttp::default()
        };
        let msg = raw.validate().unwrap_err().to_string();
        assert!(
            msg.contains("http.idle_timeout") && msg.contains("zero"),
            "{msg}"
        );
        let raw = RawHttp {
            max_connections: Some(0),
            ..RawHttp::default()
        };
        assert!(
            raw.validate()
                .unwrap_err()
                .to_string()
                .contains("max_connections")
        );
    }
}
