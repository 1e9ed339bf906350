//! Per-process totals for `wbscope top`: time in sync calls and in dirty throttling, by process.
//!
//! Deliberately not a metric (no pid labels in /metrics): the daemon serves the table at
//! `GET /top/processes` for `wbscope top` only.

use crate::user_pod;

/// Names of this family's maps in the eBPF object (aya names a map after its `#[map]` static);
/// `object_names` lists them for the test that checks them against the object.
pub mod maps {
    /// `LruHashMap<u32 (tgid), ProcStats>`.
    pub const TOP_PROCESSES: &str = "TOP_PROCESSES";
    /// `PerCpuArray<RecentProcess>`, one element: each CPU's most recent process.
    pub const TOP_PROCESS_RECENT: &str = "TOP_PROCESS_RECENT";
}

/// Processes the table holds; the least recently updated one is dropped first.
pub const TOP_PROCESSES_MAX: u32 = 4096;

/// Cumulative totals of one process (thread group), since it was first seen.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcStats {
    /// Nanoseconds its threads spent in sync-family system calls.
    pub sync_call_ns: u64,
    /// Nanoseconds its threads were paused in balance_dirty_pages.
    pub throttle_ns: u64,
    /// Sync-family calls completed.
    pub sync_calls: u64,
    /// The command name of the thread that last updated the entry, NUL-padded.
    pub comm: [u8; 16],
}
const _: () = assert!(core::mem::size_of::<ProcStats>() == 40);

/// The process that last made a timed operation on a CPU, and its totals there since it became
/// that CPU's most recent process (not yet in `TOP_PROCESSES`): a process's totals are its
/// `TOP_PROCESSES` values plus the `RecentProcess` values of the CPUs where it is the most
/// recent. `tgid == 0`: none yet.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecentProcess {
    pub tgid: u32,
    pub _reserved: u32,
    pub stats: ProcStats,
}
const _: () = assert!(core::mem::size_of::<RecentProcess>() == 48);

user_pod!(ProcStats, RecentProcess);
