//! Test fixtures for wbscope: scratch filesystems on loop devices, kernel knobs that make
//! them slow, workloads that drive writeback, and a reader for the daemon's metrics.
//!
//! Every kernel change a fixture makes (loop device, mount, blkio or io.max throttle rule, I/O
//! scheduler, bdi dirty limits) is registered with the [`LoopFs`] that owns the device and
//! undone when it is dropped — on normal scope exit and during a panic's unwinding alike.
//! Whatever cannot be undone is reported on stderr. Most fixtures need root; tests call
//! [`require_root`] first and return early when it is false.

pub mod bpf_programs;
pub mod bpftrace;
pub mod cgroup2;
pub mod check_table;
mod error;
mod loopfs;
pub mod metrics;
pub mod mixed_load;
pub mod module_probes;
mod sys;
mod throttle;
mod undo;
pub mod workload;

#[cfg(test)]
mod root_tests;

pub use bpftrace::Bpftrace;
pub use error::{Error, Result};
pub use loopfs::{FsKind, LoopFs};
pub use metrics::{Scrape, scrape, wait_until};
pub use throttle::BLKIO_WRITE_BPS;

/// True when running as root (effective uid 0). Otherwise prints a skip line to stderr so
/// the test log shows why a fixture test passed without doing anything.
pub fn require_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        sys::warn(&format!("skipping: needs root (euid {euid})"));
    }
    euid == 0
}
