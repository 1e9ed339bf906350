//! The context a stall event carries (serialized in `trace --json`, `/stalls` and the log
//! records): plain data, apart from the code that fills it, so that the event type can hold it
//! without depending on the sampling and the verdict.

use serde::{Deserialize, Serialize};

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
    /// Who queued the writes still under way when the stall began (`bdi_writeback_start_bytes`
    /// of them): the most recent writes before the window, largest source first. A caller that
    /// sleeps on pages under writeback waits behind these. Empty when nothing was under
    /// writeback or no write was seen before the window.
    #[serde(default)]
    pub backlog: Vec<SourceShare>,
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
