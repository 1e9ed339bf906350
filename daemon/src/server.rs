//! The HTTP endpoint: `/metrics` (Prometheus text format) and a small landing page at `/`, over
//! HTTP or HTTPS, with or without basic auth (see [`crate::web`]).

use std::{
    future::Future,
    net::{Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::Arc,
    time::Duration,
};

use axum::{Router, extract::State, http::HeaderMap, response::Response, routing::get};
use prometheus::Registry;
use tokio::{
    io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
};

use crate::{
    metrics::ScrapeErrors,
    web::{ClientAuth, Web, http_metrics::HttpMetrics, limits::HttpLimits, listener},
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

/// What `/metrics` answers from: the registry and the scrape errors appended to each answer.
#[derive(Clone)]
pub struct Scrape {
    pub registry: Arc<Registry>,
    pub errors: ScrapeErrors,
}

/// Serves until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    registry: Arc<Registry>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let scrape = Scrape {
        registry,
        errors: ScrapeErrors::default(),
    };
    let landing = crate::server_landing::router(crate::server_landing::Landing {
        endpoints: vec![crate::server_landing::METRICS],
        ..Default::default()
    });
    serve_with(
        listener,
        scrape,
        landing,
        Web::default(),
        HttpLimits::default(),
        shutdown,
    )
    .await
}

/// Serves `/metrics` and the routes of `extra` (the landing page `/` among them), with `web`'s
/// TLS and authentication and `limits` on every connection, until `shutdown` resolves.
pub async fn serve_with(
    listener: TcpListener,
    scrape: Scrape,
    extra: Router,
    web: Web,
    limits: HttpLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let metrics = HttpMetrics::register(&scrape.registry).map_err(std::io::Error::other)?;
    let app = Router::new()
        .route("/metrics", get(serve_metrics))
        .with_state(scrape)
        .merge(extra);
    let app = web.protect(app, &metrics);
    let tls = web.tls.map(|tls| tls.acceptor);
    listener::serve(listener, app, tls, limits, metrics, shutdown).await
}

async fn serve_metrics(State(scrape): State<Scrape>, headers: HeaderMap) -> Response {
    // Collectors count what they cannot read during the gather; the counts go out in the same
    // answer, after it.
    let mut families = scrape.registry.gather();
    families.extend(scrape.errors.family());
    crate::server_encoding::metrics_response(&families, &headers)
}

/// Why the server's own `/metrics` check failed.
#[derive(Debug, thiserror::Error)]
pub enum SelfCheckError {
    #[error("no answer from {addr} within {timeout:?}")]
    Timeout { addr: SocketAddr, timeout: Duration },
    #[error("cannot fetch {addr}/metrics")]
    Io {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{addr}/metrics answered {status:?}")]
    Status { addr: SocketAddr, status: String },
}

/// Fetches `/metrics` from our own listener, so that readiness is reported only once a scrape
/// really answers (accept loop running, every collector gathering). An unspecified listen
/// address (`0.0.0.0`, `::`) is reached through loopback.
///
/// With TLS the fetch goes over TLS, trusting exactly our own certificate. When requests need
/// credentials the daemon does not hold (bcrypt hashes cannot be turned back into passwords;
/// it has no client certificate), the answer that proves the server runs is the refusal: a
/// `401` from the authentication layer, or the TLS layer's alert asking for a certificate.
pub async fn self_check(
    listen: SocketAddr,
    web: &Web,
    timeout: Duration,
) -> Result<(), SelfCheckError> {
    let mut addr = listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
        });
    }
    let fetch = async {
        match &web.tls {
            None => fetch_metrics(TcpStream::connect(addr).await?).await,
            Some(tls) => {
                let connector = tls.self_check_connector().map_err(std::io::Error::other)?;
                fetch_metrics(crate::web::tls::connect(&connector, addr).await?).await
            }
        }
    };
    let fetched = tokio::time::timeout(timeout, fetch)
        .await
        .map_err(|_| SelfCheckError::Timeout { addr, timeout })?;
    let response = match fetched {
        Ok(response) => response,
        Err(err) if asked_for_certificate(web, &err) => {
            tracing::debug!("own /metrics: the TLS layer asked for a client certificate ({err})");
            return Ok(());
        }
        Err(source) => return Err(SelfCheckError::Io { addr, source }),
    };
    let status_line = response
        .split(|&b| b == b'\n')
        .next()
        .map(|l| String::from_utf8_lossy(l).trim().to_owned())
        .unwrap_or_default();
    let status = status_line.split_whitespace().nth(1);
    if status == Some("200") || (status == Some("401") && web.requires_credentials()) {
        tracing::debug!("own /metrics answered {status_line:?}");
        Ok(())
    } else {
        Err(SelfCheckError::Status {
            addr,
            status: status_line,
        })
    }
}

/// `GET /metrics` over HTTP/1.0: the server closes the connection after the response, so
/// reading to the end is the whole answer.
async fn fetch_metrics(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
) -> std::io::Result<Vec<u8>> {
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: wbscope\r\n\r\n")
        .await?;
    let mut response = Vec::new();
    match stream.read_to_end(&mut response).await {
        Ok(_) => Ok(response),
        // A TLS peer that closes without close_notify: the response is complete all the same.
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof && !response.is_empty() => {
            Ok(response)
        }
        Err(err) => Err(err),
    }
}

/// Whether `err` is our TLS server refusing a client without a certificate, when it requires
/// one: the listener and its TLS layer answered.
fn asked_for_certificate(web: &Web, err: &std::io::Error) -> bool {
    use rustls::AlertDescription as A;
    let required = web
        .tls
        .as_ref()
        .is_some_and(|t| t.client_auth == ClientAuth::Require);
    let alert = err
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
        .and_then(|e| match e {
            rustls::Error::AlertReceived(alert) => Some(*alert),
            _ => None,
        });
    required
        && matches!(
            alert,
            Some(A::CertificateRequired | A::HandshakeFailure | A::BadCertificate)
        )
}
