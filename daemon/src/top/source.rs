//! Where `wbscope top` reads from: a daemon's HTTP endpoints (`/metrics`, `/top/processes`,
//! `/stalls`), either the one already running on the host or one started in this process on an
//! ephemeral loopback port when none answers.

use std::{net::SocketAddr, time::Instant};

use serde::Deserialize;

use super::expo::{self, Sample};
use crate::{
    Config, Daemon,
    client::{ClientError, Endpoint},
    families::stall_events::event::Stall,
    families::top_processes::{self as procs, ProcRow, ProcessesBody},
};

/// How far back the stall list reaches.
const STALLS_SINCE_SECS: u32 = 600;

/// Why a source cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("{url}/metrics: {source}")]
    Exposition {
        url: String,
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
    endpoint: Endpoint,
    /// What the header says about the source.
    pub label: String,
    _local: Option<LocalDaemon>,
}

impl Source {
    /// The daemon at `endpoint` if it answers, else (unless `remote_only`) a daemon started
    /// here. A daemon that answers but refuses (401, 403) is an error, not a reason to start
    /// probes of our own.
    pub fn open(endpoint: Endpoint, remote_only: bool) -> Result<Source, SourceError> {
        match endpoint.get("/metrics") {
            Ok(_) => Ok(Source {
                label: format!("daemon at {}", endpoint.url),
                endpoint,
                _local: None,
            }),
            Err(err @ ClientError::Status { .. }) => Err(err.into()),
            Err(err) if remote_only => Err(err.into()),
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
            endpoint: Endpoint::plain(addr),
            label: format!("own probes (no daemon answered), {addr}"),
            _local: Some(LocalDaemon {
                runtime,
                daemon: Some(daemon),
            }),
        })
    }

    /// Reads all three endpoints.
    pub fn fetch(&self) -> Result<Snapshot, SourceError> {
        let endpoint = &self.endpoint;
        let text = endpoint.get("/metrics")?;
        let at = Instant::now();
        let samples = expo::parse(&text).map_err(|source| SourceError::Exposition {
            url: endpoint.url.clone(),
            source,
        })?;
        let mut notes = Vec::new();
        let processes = match endpoint.get(procs::PATH) {
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
        let mut stalls = match endpoint.get(&stalls_path) {
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
