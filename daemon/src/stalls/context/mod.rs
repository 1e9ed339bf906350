//! Context of a stall event, filled when the event reaches the daemon: what the device wrote
//! meanwhile by source, the bdi's dirty and writeback bytes at the start and the end, the
//! flusher work items that ran on it, and a one-line verdict naming the dominant cause.
//!
//! Everything comes from data the daemon keeps anyway (`history`): user-space samples of the
//! per-source device-write counters (`wbscope_device_write_bytes_total`) and of debugfs
//! `bdi/*/stats` every [`SAMPLE_INTERVAL`], plus one more sample when an event of at least
//! [`FRESH_MIN_NS`] arrives, and the flusher's work records. Accuracy: the window starts at the
//! last sample at or before the stall's start (up to one interval early) and ends at the event's
//! arrival (milliseconds after its end); bios count when queued, not when completed.

pub mod history;
pub mod verdict;

use serde::{Deserialize, Serialize};

/// How often the history samples the counters.
pub const SAMPLE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// Events at least this long get a context, with a fresh sample for their end; shorter ones get
/// none (a storm of tiny events must not read the maps once each), except throttling pauses,
/// which get the bdi's state from the latest sample.
pub const FRESH_MIN_NS: u64 = 50_000_000;

/// What was going on on the stall's device while it lasted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StallContext {
    /// The sampled window (Unix ns): starts at or before the stall, ends at or after it.
    pub window_start_unix_ns: u64,
    pub window_end_unix_ns: u64,
    /// Bytes the device was asked to write in the window, all sources together.
    pub device_written_bytes: u64,
    /// By source, largest first.
    pub sources: Vec<SourceShare>,
    /// The bdi's dirty (`BdiReclaimable`) and writeback bytes at the window's start and end,
    /// and its dirty limit (`BdiDirtyThresh`) at the end; absent without debugfs.
    pub bdi_dirty_start_bytes: Option<u64>,
    pub bdi_dirty_end_bytes: Option<u64>,
    pub bdi_writeback_start_bytes: Option<u64>,
    pub bdi_writeback_end_bytes: Option<u64>,
    pub bdi_dirty_limit_bytes: Option<u64>,
    /// Flusher work items on the device's bdi that overlapped the window.
    pub flusher_work: Vec<WorkItem>,
}

/// One source's part of the device's writes during the stall.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceShare {
    /// A `source` label value (`flusher`, `fsync`, …).
    pub source: String,
    /// For flusher work: `none` / `all` and the kernel's reason; empty otherwise.
    pub sync_mode: String,
    pub reason: String,
    pub bytes: u64,
    /// Of `device_written_bytes`, 0..=1.
    pub share: f64,
}

/// A flusher work item that ran on the device during the stall.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkItem {
    pub sync_mode: String,
    pub reason: String,
    /// Who queued it (or entered sync(2) for sync's start-all pass); 0 and empty when no task
    /// did (periodic, background work).
    pub queued_by_pid: u32,
    pub queued_by_comm: String,
    pub start_unix_ns: u64,
    /// 0 while the item is still running when the stall ends.
    pub end_unix_ns: u64,
    /// Bytes it wrote back (all of it, also outside the window; so far, if running).
    pub bytes: u64,
}

impl SourceShare {
    /// `flusher work none:sync`, `fsync`, …
    pub fn describe(&self) -> String {
        if self.source == "flusher" {
            format!("flusher work {}:{}", self.sync_mode, self.reason)
        } else {
            self.source.clone()
        }
    }
}

/// Fills `stall`'s cause, context and verdict. Events shorter than [`FRESH_MIN_NS`] get the
/// cause and verdict only: a storm of tiny events must not scan the history once each.
pub fn fill(stall: &mut crate::stalls::event::Stall, history: &history::History) {
    if stall.duration_ns >= FRESH_MIN_NS {
        let start = crate::stalls::event::unix_to_monotonic(stall.start_unix_ns);
        stall.context = history.context(&stall.device, start, start + stall.duration_ns, true);
    } else if stall.kind == "dirty_throttle" {
        // Pauses are short and many: the bdi's state from the latest sample only.
        stall.context = history.bdi_context(&stall.device);
    }
    stall.cause = verdict::cause(stall).0.label().to_owned();
    stall.verdict = verdict::verdict(stall, stall.context.as_ref());
}
