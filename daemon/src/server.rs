//! The HTTP endpoint: `/metrics` (Prometheus text format) and a small landing page at `/`.

use std::{future::Future, net::SocketAddr, sync::Arc};

use axum::{
    Router,
    extract::State,
    http::{StatusCode, header},
    response::{Html, IntoResponse, Response},
    routing::get,
};
use prometheus::{Encoder, Registry, TextEncoder};
use tokio::net::TcpListener;

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
    serve_with(listener, registry, Router::new(), shutdown).await
}

/// Serves `/metrics`, `/` and the routes of `extra` until `shutdown` resolves.
pub async fn serve_with(
    listener: TcpListener,
    registry: Arc<Registry>,
    extra: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/", get(landing))
        .with_state(registry)
        .merge(extra);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn metrics(State(registry): State<Arc<Registry>>) -> Response {
    let families = registry.gather();
    let encoder = TextEncoder::new();
    let mut body = Vec::with_capacity(16 * 1024);
    match encoder.encode(&families, &mut body) {
        Ok(()) => ([(header::CONTENT_TYPE, encoder.format_type())], body).into_response(),
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
