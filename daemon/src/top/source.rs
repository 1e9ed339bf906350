//! Where `wbscope top` reads from: a daemon's HTTP endpoints (`/metrics`, `/top/processes`,
//! `/stalls`), either the one already running on the host or one started in this process on an
//! ephemeral loopback port when none answers.

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream, ToSocketAddrs as _},
    time::{Duration, Instant},
};

use serde::Deserialize;

use super::{
    expo::{self, Sample},
    procs::{self, ProcRow, ProcessesBody},
};
use crate::{Config, Daemon, stalls::event::Stall};

/// Upper bound of one request (connect, send, read).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// How far back the stall list reaches.
const STALLS_SINCE_SECS: u32 = 600;

/// Why a source cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{0}: not a host:port or http://host:port address")]
    Url(String),
    #[error("GET http://{addr}{path}")]
    Io {
        addr: SocketAddr,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("GET http://{addr}{path} answered {status:?}")]
    Status {
        addr: SocketAddr,
        path: String,
        status: String,
    },
    #[error("http://{addr}/metrics: {source}")]
    Exposition {
        addr: SocketAddr,
        #[source]
        source: expo::ParseError,
    },
    #[error("starting a daemon in this process")]
    Local(#[source] crate::DaemonError),
    #[error("starting the async runtime")]
    Runtime(#[source] std::io::Error),
}

/// Everything one refresh shows.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub at: Instant,
    pub samples: Vec<Sample>,
    pub processes: Vec<ProcRow>,
    /// Newest first.
    pub stalls: Vec<Stall>,
    /// What could not be read this time (the view shows it; `/metrics` failing is an error).
    pub notes: Vec<String>,
}

#[derive(Deserialize)]
struct StallsReply {
    events: Vec<Stall>,
}

/// `GET path` with HTTP/1.0 (the server closes after the response); returns the body.
pub fn http_get(addr: SocketAddr, path: &str) -> Result<String, SourceError> {
    let io = |source| SourceError::Io {
        addr,
        path: path.to_owned(),
        source,
    };
    let mut stream = TcpStream::connect_timeout(&addr, REQUEST_TIMEOUT).map_err(io)?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT)).map_err(io)?;
    stream
        .set_write_timeout(Some(REQUEST_TIMEOUT))
        .map_err(io)?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: wbscope\r\n\r\n").map_err(io)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).map_err(io)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(SourceError::Status {
            addr,
            path: path.to_owned(),
            status: status.to_owned(),
        });
    }
    Ok(body.to_owned())
}

/// `host:port` or `http://host:port[/]` to a socket address.
pub fn parse_url(url: &str) -> Result<SocketAddr, SourceError> {
    let hostport = url
        .strip_prefix("http://")
        .unwrap_or(url)
        .trim_end_matches('/');
    hostport
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| SourceError::Url(url.to_owned()))
}

/// A daemon running inside `wbscope top`, stopped (probes detached) on drop.
struct LocalDaemon {
    runtime: tokio::runtime::Runtime,
    daemon: Option<Daemon>,
}

impl Drop for LocalDaemon {
    fn drop(&mut self) {
        if let Some(daemon) = self.daemon.take()
            && let Err(err) = self.runtime.block_on(daemon.stop())
        {
            eprintln!("wbscope top: stopping the in-process daemon: {err}");
        }
    }
}

/// A daemon to read from.
pub struct Source {
    addr: SocketAddr,
    /// What the header says about the source.
    pub label: String,
    _local: Option<LocalDaemon>,
}

impl Source {
    /// The daemon at `url` if it answers, else (unless `remote_only`) a daemon started here.
    pub fn open(url: &str, remote_only: bool) -> Result<Source, SourceError> {
        let addr = parse_url(url)?;
        match http_get(addr, "/metrics") {
            Ok(_) => Ok(Source {
                addr,
                label: format!("daemon at {addr}"),
                _local: None,
            }),
            Err(err) if remote_only => Err(err),
            Err(_) => Source::local(),
        }
    }

    /// Starts a daemon on an ephemeral loopback port: no stall stream socket (a daemon started
    /// later owns that), its own I/O ignored, its logs silent (they would tear the screen).
    fn local() -> Result<Source, SourceError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(SourceError::Runtime)?;
        let mut config = Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            ignore_own_io: true,
            ..Config::default()
        };
        config.stalls.socket = None;
        let daemon = runtime
            .block_on(Daemon::start(&config))
            .map_err(SourceError::Local)?;
        let addr = daemon.local_addr();
        Ok(Source {
            addr,
            label: format!("own probes (no daemon answered), {addr}"),
            _local: Some(LocalDaemon {
                runtime,
                daemon: Some(daemon),
            }),
        })
    }

    /// Reads all three endpoints.
    pub fn fetch(&self) -> Result<Snapshot, SourceError> {
        let addr = self.addr;
        let text = http_get(addr, "/metrics")?;
        let at = Instant::now();
        let samples =
            expo::parse(&text).map_err(|source| SourceError::Exposition { addr, source })?;
        let mut notes = Vec::new();
        let processes = match http_get(addr, procs::PATH) {
            Ok(body) => serde_json::from_str::<ProcessesBody>(&body)
                .map(|b| b.processes)
                .unwrap_or_else(|e| {
                    notes.push(format!("{}: {e}", procs::PATH));
                    Vec::new()
                }),
            Err(e) => {
                notes.push(format!("no processes: {e}"));
                Vec::new()
            }
        };
        let stalls_path = format!("/stalls?since={STALLS_SINCE_SECS}");
        let mut stalls = match http_get(addr, &stalls_path) {
            Ok(body) => serde_json::from_str::<StallsReply>(&body)
                .map(|r| r.events)
                .unwrap_or_else(|e| {
                    notes.push(format!("/stalls: {e}"));
                    Vec::new()
                }),
            Err(e) => {
                notes.push(format!("no stalls: {e}"));
                Vec::new()
            }
        };
        stalls.sort_by_key(|s| std::cmp::Reverse(s.start_unix_ns));
        Ok(Snapshot {
            at,
            samples,
            processes,
            stalls,
            notes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_with_or_without_scheme() {
        let want: SocketAddr = "127.0.0.1:19617".parse().unwrap();
        assert_eq!(parse_url("http://127.0.0.1:19617").unwrap(), want);
        assert_eq!(parse_url("127.0.0.1:19617/").unwrap(), want);
        assert!(parse_url("http://").is_err());
    }
}
