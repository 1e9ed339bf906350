//! The running stall pipeline: ring-buffer drain, flight recorder, event stream.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicU64, Ordering},
};

use aya::Ebpf;
use tokio::{sync::broadcast, task::JoinHandle};

use super::{
    StallError, StallShared, StallsConfig, context,
    context::history::History,
    event::unix_now_ns,
    http,
    http::StallState,
    log_record,
    recorder::Recorder,
    source::{ThresholdMap, drain, take_ring},
    stream,
    stream::SocketFile,
};

/// Events buffered per trace client before it counts as lagging.
const STREAM_BUFFER: usize = 4096;

/// The running stall pipeline: ring-buffer drain, flight recorder, event stream.
pub struct StallService {
    state: Arc<StallState>,
    threshold: Mutex<ThresholdMap>,
    tasks: Vec<JoinHandle<()>>,
    _socket: Option<SocketFile>,
}

impl StallService {
    /// Takes the stall maps out of `ebpf`, sets the threshold and starts draining.
    pub async fn start(
        ebpf: &mut Ebpf,
        config: &StallsConfig,
        shared: StallShared,
        history: Arc<History>,
    ) -> Result<StallService, StallError> {
        let mut threshold = ThresholdMap::take(ebpf)?;
        let ring = take_ring(ebpf)?;
        let work_ring = context::history::take_work_ring(ebpf);
        history.take_running(ebpf);
        // The stream is a convenience for `wbscope trace`: a socket that cannot be bound (e.g.
        // another daemon on the host serves it) costs the stream, not the daemon.
        let listener = match &config.socket {
            Some(path) => match stream::bind(path).await {
                Ok(listener) => Some((listener, SocketFile(path.clone()))),
                Err(err) => {
                    tracing::warn!(
                        "no local stall stream for wbscope trace: {}",
                        crate::error_chain::error_chain(&err)
                    );
                    None
                }
            },
            None => None,
        };
        threshold.set(config.threshold_ns)?;
        let state = Arc::new(StallState {
            recorder: Mutex::new(Recorder::new(config.window_ns, config.max_events)),
            threshold_ns: AtomicU64::new(config.threshold_ns),
        });
        let (tx, _) = broadcast::channel(STREAM_BUFFER);
        let mut tasks = Vec::new();
        let socket = listener.map(|(listener, file)| {
            tasks.push(tokio::spawn(stream::serve(
                listener,
                tx.clone(),
                shared.trace_lagged.clone(),
            )));
            file
        });
        if let Some(work_ring) = work_ring {
            let history = history.clone();
            tasks.push(tokio::spawn(async move {
                let err = context::history::drain_works(work_ring, history).await;
                tracing::warn!(
                    "flusher work records stopped (no work items in stall context): {err}"
                );
            }));
        }
        context::history::spawn_sampler(&history);
        let log_events = config.log_events;
        let recorder_state = state.clone();
        tasks.push(tokio::spawn(async move {
            let err = drain(ring, |mut stall| {
                context::fill(&mut stall, &history);
                if log_events {
                    log_record::emit(&stall);
                }
                shared.count(&stall);
                let stall = Arc::new(stall);
                if let Ok(mut r) = recorder_state.recorder.lock() {
                    let before = r.evicted();
                    r.push(stall.clone(), unix_now_ns());
                    shared
                        .recorder_evicted
                        .fetch_add(r.evicted() - before, Ordering::Relaxed);
                }
                // No receiver (no trace client) is not an error.
                let _ = tx.send(stall);
            })
            .await;
            tracing::error!("stall events stopped: {err}");
        }));
        Ok(StallService {
            state,
            threshold: Mutex::new(threshold),
            tasks,
            _socket: socket,
        })
    }

    /// The `/stalls` route.
    pub fn router(&self) -> axum::Router {
        http::router(self.state.clone())
    }

    /// Changes the threshold at run time (for configuration reloads).
    pub fn set_threshold(&self, threshold_ns: u64) -> Result<(), StallError> {
        if let Ok(mut map) = self.threshold.lock() {
            map.set(threshold_ns)?;
            self.state
                .threshold_ns
                .store(threshold_ns, Ordering::Relaxed);
        }
        Ok(())
    }
}

impl Drop for StallService {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
