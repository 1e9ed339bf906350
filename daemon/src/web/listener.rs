//! The accept loop and one task per connection: HTTP/1.1 (over TLS when configured) with the
//! deadlines and the cap of [`super::connections`]. A connection's deadline is enforced by
//! dropping it, so a silent, slow or half-open client costs at most its timeout.

use std::{
    convert::Infallible,
    net::SocketAddr,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::ConnectInfo,
};
use http_body::{Frame, SizeHint};
use hyper::{body::Incoming, server::conn::http1};
use hyper_util::rt::TokioIo;
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::{TcpListener, TcpStream},
};
use tokio_rustls::TlsAcceptor;
use tower_service::Service as _;

use super::{
    connections::{Admission, Conn, Connections, RequestGuard},
    http_metrics::{CloseReason, HttpMetrics},
    limits::HttpLimits,
};

/// How long the accept loop pauses after an error that is not the peer's (e.g. EMFILE), so a
/// persistent error does not spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// How long the accept loop waits for a connection it closed to free a descriptor to be gone;
/// an idle connection's task ends within microseconds unless the runtime is starved.
const EVICTED_CLOSE_WAIT: Duration = Duration::from_secs(1);

/// Serves `app` on `listener` until `shutdown` resolves, then closes idle connections at once
/// and lets busy ones finish their response.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    tls: Option<TlsAcceptor>,
    limits: HttpLimits,
    metrics: HttpMetrics,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let connections = Connections::new(limits);
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(conn) => conn,
            Err(err) => {
                if is_connection_error(&err) {
                    tracing::debug!("accept: {err}");
                    continue;
                }
                if !is_out_of_descriptors(&err) {
                    metrics.accept_failed(&err);
                } else if client_waiting(&listener) {
                    // Give the kernel a descriptor back for the waiting client: the longest
                    // idle connection goes, and the accept is retried once its socket is closed
                    // (a retry before would fail again and close a second one).
                    metrics.accept_failed(&err);
                    if let Some(evicted) = connections.close_longest_idle() {
                        let _ = tokio::time::timeout(EVICTED_CLOSE_WAIT, evicted.gone()).await;
                        continue;
                    }
                }
                // Else nobody was refused: accept(2) takes a descriptor before it looks at the
                // queue, so at the limit it fails with EMFILE also when no one is waiting (the
                // loop accepts again at once after each connection). Closing an idle connection
                // then would only leave a spare descriptor nobody asked for.
                tokio::time::sleep(ACCEPT_PAUSE).await;
                continue;
            }
        };
        let registered = match connections.admit(|| {}) {
            Admission::Admitted(registered) => registered,
            Admission::Refused => {
                metrics.refused(peer, limits.max_connections);
                continue;
            }
        };
        let (app, tls, metrics) = (app.clone(), tls.clone(), metrics.clone());
        tokio::spawn(async move {
            metrics.opened();
            let conn = std::sync::Arc::clone(&registered.conn);
            serve_connection(tcp, peer, &conn, app, tls, &limits, &metrics).await;
            drop(registered);
            metrics.gone();
        });
    }
    connections.close_all();
    connections.all_closed().await;
    Ok(())
}

/// One connection from accept to close.
async fn serve_connection(
    tcp: TcpStream,
    peer: SocketAddr,
    conn: &std::sync::Arc<Conn>,
    app: Router,
    tls: Option<TlsAcceptor>,
    limits: &HttpLimits,
    metrics: &HttpMetrics,
) {
    let _ = tcp.set_nodelay(true);
    match tls {
        None => serve_http(tcp, peer, conn, app, limits, metrics).await,
        Some(acceptor) => {
            // The handshake counts against the header timeout, like the headers after it.
            let handshake = tokio::select! {
                reason = conn.expired(limits) => Err(reason),
                stream = acceptor.accept(tcp) => Ok(stream),
            };
            match handshake {
                Ok(Ok(stream)) => serve_http(stream, peer, conn, app, limits, metrics).await,
                Ok(Err(err)) => {
                    metrics.auth_failed("tls", Some(peer), &format!("TLS handshake: {err}"));
                }
                Err(reason) => metrics.closed(reason, peer),
            }
        }
    }
}

/// HTTP/1.1 on an established stream, until the client closes or a deadline passes.
async fn serve_http(
    io: impl AsyncRead + AsyncWrite + Unpin + Send + 'static,
    peer: SocketAddr,
    conn: &std::sync::Arc<Conn>,
    app: Router,
    limits: &HttpLimits,
    metrics: &HttpMetrics,
) {
    let request_conn = std::sync::Arc::clone(conn);
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        let guard = request_conn.begin_request();
        request.extensions_mut().insert(ConnectInfo(peer));
        let mut app = app.clone();
        async move {
            let response = match app.call(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            Ok::<_, Infallible>(response.map(|body| {
                Body::new(Tracked {
                    inner: body,
                    _request: guard,
                })
            }))
        }
    });
    let http = http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), service);
    tokio::pin!(http);
    let mut graceful = false;
    loop {
        tokio::select! {
            served = http.as_mut() => {
                if let Err(err) = served {
                    tracing::debug!("HTTP connection with {peer}: {err}");
                }
                return;
            }
            reason = conn.expired(limits), if !graceful => match reason {
                // Idle ones close at once; a response in flight is finished first (the
                // daemon's stop bounds that).
                CloseReason::Shutdown => {
                    graceful = true;
                    http.as_mut().graceful_shutdown();
                }
                reason => {
                    metrics.closed(reason, peer);
                    return;
                }
            },
        }
    }
}

/// A response body that ends its request (see [`RequestGuard`]) when hyper drops it: after the
/// last byte is written, or when the connection goes.
struct Tracked {
    inner: Body,
    _request: RequestGuard,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

fn is_connection_error(err: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        err.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

fn is_out_of_descriptors(err: &std::io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Whether a connection waits in the listener's queue: poll(2) with no timeout, which needs no
/// descriptor of its own. An error counts as waiting, so a failure errs on serving the client.
fn client_waiting(listener: &TcpListener) -> bool {
    use std::os::fd::AsRawFd as _;
    let mut pollfd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid, exclusively borrowed pollfd for a descriptor the listener owns for
    // the whole call; a zero timeout never blocks the runtime thread.
    let ready = unsafe { libc::poll(&mut pollfd, 1, 0) };
    ready != 0 && (ready < 0 || pollfd.revents & libc::POLLIN != 0)
}
