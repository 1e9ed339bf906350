//! The process table of a frame: per-process deltas of the kernel's totals, ranked by the
//! chosen key.

use std::collections::HashMap;

use super::source::Snapshot;
use crate::families::top_processes::ProcRow;

/// How the process table is ordered (`s` cycles).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortKey {
    #[default]
    SyncTime,
    ThrottleTime,
    SyncCalls,
}

impl SortKey {
    /// The next order.
    pub fn next(self) -> SortKey {
        match self {
            SortKey::SyncTime => SortKey::ThrottleTime,
            SortKey::ThrottleTime => SortKey::SyncCalls,
            SortKey::SyncCalls => SortKey::SyncTime,
        }
    }

    /// For the header.
    pub fn label(self) -> &'static str {
        match self {
            SortKey::SyncTime => "time in sync calls",
            SortKey::ThrottleTime => "throttle time",
            SortKey::SyncCalls => "sync calls",
        }
    }
}

/// One process over the interval, with its totals.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessRow {
    pub tgid: u32,
    pub comm: String,
    /// Milliseconds per second spent in sync calls. A call counts when it ends, so a long one
    /// (or several threads) can make this exceed 1000.
    pub sync_ms_per_s: f64,
    pub throttle_ms_per_s: f64,
    pub sync_calls_per_s: f64,
    pub sync_total_s: f64,
    pub throttle_total_s: f64,
    /// Its cgroup v2 path when the daemon read the table (empty once it exited).
    pub cgroup: String,
}

/// The processes of `cur`, with rates since `prev` (`secs` apart), best first by `sort`.
pub fn processes(
    prev: Option<&Snapshot>,
    cur: &Snapshot,
    secs: f64,
    sort: SortKey,
) -> Vec<ProcessRow> {
    let before: HashMap<u32, &ProcRow> = prev
        .map(|p| p.processes.iter().map(|r| (r.tgid, r)).collect())
        .unwrap_or_default();
    let per_s = |now: u64, then: u64, scale: f64| {
        if secs > 0.0 {
            now.saturating_sub(then) as f64 / scale / secs
        } else {
            0.0
        }
    };
    let mut rows: Vec<ProcessRow> = cur
        .processes
        .iter()
        .map(|r| {
            let old = before.get(&r.tgid).copied().cloned().unwrap_or_default();
            ProcessRow {
                tgid: r.tgid,
                comm: r.comm.clone(),
                sync_ms_per_s: per_s(r.sync_call_ns, old.sync_call_ns, 1e6),
                throttle_ms_per_s: per_s(r.throttle_ns, old.throttle_ns, 1e6),
                sync_calls_per_s: per_s(r.sync_calls, old.sync_calls, 1.0),
                sync_total_s: r.sync_call_ns as f64 / 1e9,
                throttle_total_s: r.throttle_ns as f64 / 1e9,
                cgroup: r.cgroup.clone(),
            }
        })
        .collect();
    let order = |r: &ProcessRow| match sort {
        SortKey::SyncTime => (r.sync_ms_per_s, r.sync_total_s),
        SortKey::ThrottleTime => (r.throttle_ms_per_s, r.throttle_total_s),
        SortKey::SyncCalls => (r.sync_calls_per_s, r.sync_total_s),
    };
    rows.sort_by(|a, b| {
        let (a1, a2) = order(a);
        let (b1, b2) = order(b);
        b1.total_cmp(&a1)
            .then(b2.total_cmp(&a2))
            .then(a.tgid.cmp(&b.tgid))
    });
    rows
}
