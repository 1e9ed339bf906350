//! The histogram resolution of this process's exposition (`[metrics] detail`).
//!
//! Process-wide rather than threaded through every collector: it is fixed when the daemon
//! starts, before any collector runs, and one process serves one daemon at a time (`top`'s
//! in-process daemon takes the default).

use std::{
    str::FromStr,
    sync::atomic::{AtomicBool, Ordering},
};

use serde::Deserialize;

/// How finely histograms are exported, from `[metrics] detail`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Detail {
    /// A fleet's default, under 200 series per busy device: histogram buckets every factor of 8
    /// (32.8 µs, 262 µs, … 8.6 s); block request and queue latency and flusher work duration
    /// histograms by device only, block bytes by op, block flag counters summed over ops at the
    /// request level, device writes by source in bytes only. The
    /// request and work counters, and the summed request and work time (mean latency per op
    /// and sync, per sync mode and reason), keep every label.
    #[default]
    Basic,
    /// Every factor of 2 (1 µs, 2 µs, 4 µs, … 68.7 s) and every label: finer quantiles and the
    /// per-op, sync and work-kind latency splits for one host's investigation.
    Full,
}

impl FromStr for Detail {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "basic" => Ok(Detail::Basic),
            "full" => Ok(Detail::Full),
            other => Err(format!(
                "unknown detail level '{other}' (expected basic or full)"
            )),
        }
    }
}

/// `true` for [`Detail::Full`].
static FULL: AtomicBool = AtomicBool::new(false);

/// Sets the resolution for every histogram exported from now on.
pub fn set(detail: Detail) {
    FULL.store(detail == Detail::Full, Ordering::Relaxed);
}

/// The resolution histograms are exported with.
pub fn get() -> Detail {
    if FULL.load(Ordering::Relaxed) {
        Detail::Full
    } else {
        Detail::Basic
    }
}
