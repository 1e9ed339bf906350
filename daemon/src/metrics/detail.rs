//! The histogram resolution of this process's exposition (`[metrics] detail`).
//!
//! Process-wide rather than threaded through every collector: it is fixed when the daemon
//! starts, before any collector runs, and one process serves one daemon at a time (`top`'s
//! in-process daemon takes the default).

use std::sync::atomic::{AtomicBool, Ordering};

use crate::config::Detail;

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
