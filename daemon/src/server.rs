//! The HTTP endpoint: `/metrics` (Prometheus text format) and a small landing page at `/`.

use std::{
    future::Future,
    net::{Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{
    Router,
    extract::State,
    http::{StatusCode, header},
    response::{Html, IntoResponse, Response},
    routing::get,
};
use prometheus::{Encoder, Registry, TextEncoder};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
};

/// Binding the listener failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr}")]
pub struct BindError {
    pub addr: SocketAddr,
    pub source: std::io::Error,
}

/// Binds the listen address (separately from serving, so a port in use fails before probes load).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, BindError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| BindError { addr, source })
}

/// Serves until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    registry: Arc<Registry>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/", get(landing))
        .with_state(registry);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn metrics(State(registry): State<Arc<Registry>>) -> Response {
    let started = Instant::now();
    let families = registry.gather();
    let encoder = TextEncoder::new();
    let mut body = Vec::with_capacity(16 * 1024);
    match encoder.encode(&families, &mut body) {
        Ok(()) => {
            tracing::debug!(
                "served /metrics: {} bytes in {:?}",
                body.len(),
                started.elapsed()
            );
            ([(header::CONTENT_TYPE, encoder.format_type())], body).into_response()
        }
        Err(err) => {
            tracing::error!("encoding metrics: {err}");
            (StatusCode::INTERNAL_SERVER_ERROR, err.to_string()).into_response()
        }
    }
}

async fn landing() -> Html<&'static str> {
    Html(concat!(
        "<!doctype html><html><head><title>wbscope</title></head><body>",
        "<h1>wbscope ",
        env!("CARGO_PKG_VERSION"),
        "</h1><p>Linux writeback observability: flusher work, sync-call latency and more, ",
        "measured with eBPF.</p><p><a href=\"/metrics\">/metrics</a></p></body></html>"
    ))
}

/// Why the server's own `/metrics` check failed.
#[derive(Debug, thiserror::Error)]
pub enum SelfCheckError {
    #[error("no answer from {addr} within {timeout:?}")]
    Timeout { addr: SocketAddr, timeout: Duration },
    #[error("cannot fetch http://{addr}/metrics")]
    Io {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("http://{addr}/metrics answered {status:?}")]
    Status { addr: SocketAddr, status: String },
}

/// Fetches `/metrics` from our own listener, so that readiness is reported only once a scrape
/// really answers (accept loop running, every collector gathering). An unspecified listen
/// address (`0.0.0.0`, `::`) is reached through loopback.
pub async fn self_check(listen: SocketAddr, timeout: Duration) -> Result<(), SelfCheckError> {
    let mut addr = listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
        });
    }
    let fetch = async {
        let mut stream = TcpStream::connect(addr).await?;
        // HTTP/1.0: the server closes the connection after the response, so reading to the end
        // is the whole answer.
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\nHost: wbscope\r\n\r\n")
            .await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(response)
    };
    let response = tokio::time::timeout(timeout, fetch)
        .await
        .map_err(|_| SelfCheckError::Timeout { addr, timeout })?
        .map_err(|source| SelfCheckError::Io { addr, source })?;
    let status_line = response
        .split(|&b| b == b'\n')
        .next()
        .map(|l| String::from_utf8_lossy(l).trim().to_owned())
        .unwrap_or_default();
    if status_line.split_whitespace().nth(1) == Some("200") {
        Ok(())
    } else {
        Err(SelfCheckError::Status {
            addr,
            status: status_line,
        })
    }
}
