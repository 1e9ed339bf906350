//! The HTTP server's own counters: open connections, why connections were closed or refused,
//! failed accepts and failed authentication. Each counted event is also logged, rate-limited.

use std::sync::Arc;

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};

use super::rate_log::RateLog;

/// The names of the families registered here (for `wbscope check --metrics`).
pub const NAMES: [&str; 5] = [
    "wbscope_http_connections_open",
    "wbscope_http_connections_closed_total",
    "wbscope_http_connections_refused_total",
    "wbscope_http_accept_errors_total",
    "wbscope_http_auth_failures_total",
];

/// Why the server closed a connection itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// No complete request headers (or TLS handshake) within `http.header_timeout`.
    HeaderTimeout,
    /// A kept-alive connection sent no request within `http.idle_timeout`.
    IdleTimeout,
    /// A response was not delivered within `http.request_timeout`.
    RequestTimeout,
    /// Closed for a new connection at `http.max_connections` (the one idle the longest).
    Evicted,
    /// Closed because the daemon stops.
    Shutdown,
}

impl CloseReason {
    pub fn label(self) -> &'static str {
        match self {
            CloseReason::HeaderTimeout => "header_timeout",
            CloseReason::IdleTimeout => "idle_timeout",
            CloseReason::RequestTimeout => "request_timeout",
            CloseReason::Evicted => "evicted",
            CloseReason::Shutdown => "shutdown",
        }
    }
}

struct Inner {
    open: IntGauge,
    closed: IntCounterVec,
    refused: IntCounter,
    accept_errors: IntCounter,
    auth_failures: IntCounterVec,
    refused_log: RateLog,
    accept_log: RateLog,
    auth_log: RateLog,
    evict_log: RateLog,
}

/// Shared handle to the HTTP counters.
#[derive(Clone)]
pub struct HttpMetrics(Arc<Inner>);

impl HttpMetrics {
    fn build() -> prometheus::Result<HttpMetrics> {
        let closed = IntCounterVec::new(
            Opts::new(
                "wbscope_http_connections_closed_total",
                "HTTP connections the server closed itself, by reason (header_timeout, \
                 idle_timeout, request_timeout, evicted, shutdown).",
            ),
            &["reason"],
        )?;
        for reason in [
            CloseReason::HeaderTimeout,
            CloseReason::IdleTimeout,
            CloseReason::RequestTimeout,
            CloseReason::Evicted,
        ] {
            closed.with_label_values(&[reason.label()]);
        }
        let auth_failures = IntCounterVec::new(
            Opts::new(
                "wbscope_http_auth_failures_total",
                "Requests or connections refused for missing or wrong credentials, by method \
                 (basic_auth, tls: failed handshakes, client certificates included).",
            ),
            &["method"],
        )?;
        for method in ["basic_auth", "tls"] {
            auth_failures.with_label_values(&[method]);
        }
        Ok(HttpMetrics(Arc::new(Inner {
            open: IntGauge::new(
                "wbscope_http_connections_open",
                "HTTP connections open now (at most http.max_connections).",
            )?,
            closed,
            refused: IntCounter::new(
                "wbscope_http_connections_refused_total",
                "Connections closed at once: http.max_connections open and none of them idle.",
            )?,
            accept_errors: IntCounter::new(
                "wbscope_http_accept_errors_total",
                "Connections waiting on the listener that could not be accepted (e.g. EMFILE: out of file descriptors).",
            )?,
            auth_failures,
            refused_log: RateLog::default(),
            accept_log: RateLog::default(),
            auth_log: RateLog::default(),
            evict_log: RateLog::default(),
        })))
    }

    /// Counters registered in `registry`.
    pub fn register(registry: &Registry) -> prometheus::Result<HttpMetrics> {
        let metrics = HttpMetrics::build()?;
        let m = &metrics.0;
        registry.register(Box::new(m.open.clone()))?;
        registry.register(Box::new(m.closed.clone()))?;
        registry.register(Box::new(m.refused.clone()))?;
        registry.register(Box::new(m.accept_errors.clone()))?;
        registry.register(Box::new(m.auth_failures.clone()))?;
        Ok(metrics)
    }

    pub fn opened(&self) {
        self.0.open.inc();
    }

    pub fn gone(&self) {
        self.0.open.dec();
    }

    pub fn closed(&self, reason: CloseReason, peer: std::net::SocketAddr) {
        self.0.closed.with_label_values(&[reason.label()]).inc();
        match reason {
            CloseReason::Shutdown => {}
            CloseReason::Evicted => self.0.evict_log.warn(|| {
                format!("HTTP: at the connection cap; closed the longest idle connection ({peer})")
            }),
            other => tracing::debug!("HTTP: closed {peer}: {}", other.label()),
        }
    }

    pub fn refused(&self, peer: std::net::SocketAddr, cap: usize) {
        self.0.refused.inc();
        self.0.refused_log.warn(|| {
            format!(
                "HTTP: refused {peer}: {cap} connections open (http.max_connections), none idle"
            )
        });
    }

    pub fn accept_failed(&self, err: &std::io::Error) {
        self.0.accept_errors.inc();
        self.0
            .accept_log
            .warn(|| format!("HTTP: accept failed: {err}"));
    }

    pub fn auth_failed(&self, method: &'static str, peer: Option<std::net::SocketAddr>, why: &str) {
        self.0.auth_failures.with_label_values(&[method]).inc();
        let peer = peer.map_or_else(|| "a client".to_owned(), |p| p.to_string());
        self.0
            .auth_log
            .warn(|| format!("HTTP: authentication failed ({method}) for {peer}: {why}"));
    }
}
