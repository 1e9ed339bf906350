//! The local event stream: a Unix socket on which every stall event is written as one JSON
//! line, for `wbscope trace` (so a second set of probes is not needed while the daemon runs).

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use tokio::{
    io::AsyncWriteExt,
    net::{UnixListener, UnixStream},
    sync::broadcast,
};

use super::{event::Stall, source::StallError};

/// Binds the socket at `path`: creates its directory, replaces a stale socket of a previous run
/// (one nobody answers on), refuses to take over a live one, and makes it root-only (events name
/// processes and files).
pub async fn bind(path: &Path) -> Result<UnixListener, StallError> {
    let err = |source| StallError::Socket {
        path: path.display().to_string(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    if path.exists() {
        if UnixStream::connect(path).await.is_ok() {
            return Err(err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                "another wbscope daemon serves this socket",
            )));
        }
        std::fs::remove_file(path).map_err(err)?;
    }
    let listener = UnixListener::bind(path).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    Ok(listener)
}

/// Serves every client the events sent on `events` from the moment it connects.
pub async fn serve(
    listener: UnixListener,
    events: broadcast::Sender<Arc<Stall>>,
    lagged: Arc<AtomicU64>,
) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(c) => c,
            Err(err) => {
                tracing::warn!("event stream accept: {err}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let rx = events.subscribe();
        tokio::spawn(client(stream, rx, lagged.clone()));
    }
}

async fn client(
    mut stream: UnixStream,
    mut rx: broadcast::Receiver<Arc<Stall>>,
    lagged: Arc<AtomicU64>,
) {
    loop {
        let stall = match rx.recv().await {
            Ok(s) => s,
            Err(broadcast::error::RecvError::Lagged(n)) => {
                lagged.fetch_add(n, Ordering::Relaxed);
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let Ok(mut line) = serde_json::to_vec(&*stall) else {
            continue;
        };
        line.push(b'\n');
        if stream.write_all(&line).await.is_err() {
            return; // the client went away
        }
    }
}

/// Removes the socket file when the daemon stops.
pub struct SocketFile(pub PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
