//! `wbscope_stalls_total{kind,device}` and `wbscope_events_dropped_total{stream}`.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicU64, Ordering},
};

use aya::maps::{MapData, PerCpuArray};
use prometheus::{
    IntCounterVec, Opts,
    core::{Collector, Desc},
    proto::MetricFamily,
};

use super::{event::Stall, source::read_drops};
use crate::metrics::{MapErrors, describe, proto::MetricBuilder};

const DROPS: &[(&str, &str)] = &[(
    "wbscope_events_dropped_total",
    "Stall events lost, by stream: `stalls` (the kernel ring buffer was full), `recorder` \
     (pushed out of the flight recorder by its event bound before their time), `trace` (a local \
     trace client fell behind).",
)];

/// Counters shared by the stall service (which counts) and the collectors (which export).
#[derive(Clone)]
pub struct StallShared {
    pub stalls_total: IntCounterVec,
    pub recorder_evicted: Arc<AtomicU64>,
    pub trace_lagged: Arc<AtomicU64>,
}

impl Default for StallShared {
    fn default() -> Self {
        // The name and labels are constants: construction cannot fail.
        let stalls_total = IntCounterVec::new(
            Opts::new(
                "wbscope_stalls_total",
                "Operations over the configured stall threshold, by kind (a sync call, \
                 dirty_throttle, writeback_wait, block_request, journal_commit) and device.",
            ),
            &["kind", "device"],
        )
        .unwrap_or_else(|_| unreachable!("constant metric definition"));
        StallShared {
            stalls_total,
            recorder_evicted: Arc::default(),
            trace_lagged: Arc::default(),
        }
    }
}

impl StallShared {
    /// Counts one event.
    pub fn count(&self, stall: &Stall) {
        self.stalls_total
            .with_label_values(&[stall.kind.as_str(), stall.device.as_str()])
            .inc();
    }
}

/// Reads the kernel's per-CPU drop counter at scrape time.
pub struct DropsCollector {
    map: Mutex<Option<PerCpuArray<MapData, u64>>>,
    shared: StallShared,
    errors: MapErrors,
    descs: Vec<Desc>,
}

/// Map name of the drop counter (for `wbscope_map_read_errors_total`).
const DROPS_MAP: &str = probe_common::stall_events::maps::STALL_DROPS;

impl DropsCollector {
    pub fn new(
        map: Option<PerCpuArray<MapData, u64>>,
        shared: StallShared,
        errors: MapErrors,
    ) -> Self {
        errors.register(DROPS_MAP);
        DropsCollector {
            map: Mutex::new(map),
            shared,
            errors,
            descs: describe(DROPS),
        }
    }
}

impl Collector for DropsCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let kernel = match self.map.lock().as_deref() {
            Ok(Some(map)) => match read_drops(map) {
                Ok(n) => Some(n),
                Err(err) => {
                    self.errors.count(DROPS_MAP);
                    tracing::warn!("reading map {DROPS_MAP}: {err}");
                    None
                }
            },
            _ => {
                self.errors.count(DROPS_MAP);
                None
            }
        };
        let mut family = MetricBuilder::counter(DROPS[0].0, DROPS);
        if let Some(n) = kernel {
            family.add_counter(&[("stream", "stalls")], n as f64);
        }
        let evicted = self.shared.recorder_evicted.load(Ordering::Relaxed);
        family.add_counter(&[("stream", "recorder")], evicted as f64);
        let lagged = self.shared.trace_lagged.load(Ordering::Relaxed);
        family.add_counter(&[("stream", "trace")], lagged as f64);
        family.finish().into_iter().collect()
    }
}
