//! Per-cgroup totals (opt-in, `[cgroups] enabled`): count and time of sync calls, dirty
//! throttling pauses and writeback waits by cgroup v2 id, for "which pod's fsync stalls, whose
//! dirty pages throttle everyone".
//!
//! The probes of those families add to one per-CPU hash keyed by (cgroup id, kind, call) at the
//! point where they already know a duration, and only while the daemon has set
//! [`names::CGROUPS_ENABLED`]: when off, the hot paths pay one load of a frozen global and a
//! branch.

use crate::user_pod;

/// Names of the family's map and load-time global in the eBPF object.
pub mod names {
    /// `PerCpuHashMap<CgroupKey, CgroupTotals>`.
    pub const CGROUP_TOTALS: &str = "CGROUP_TOTALS";
    /// `u32`, non-zero: record per-cgroup totals. Frozen at load.
    pub const CGROUPS_ENABLED: &str = "CGROUPS_ENABLED";
}

/// Keys the map holds (cgroups × kinds × calls). A new key past this is lost and counted in
/// `wbscope_map_overflows_total{map="CGROUP_TOTALS"}`; the daemon removes the keys of cgroups
/// that no longer exist, so only live cgroups take room.
pub const CGROUP_TOTALS_MAX: u32 = 4096;

/// What was timed. Part of the map ABI: never reuse a value.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CgroupOp {
    /// A sync call or io_uring sync request ended; `call` is its `SyncSyscall` id.
    SyncCall = 1,
    /// A pause in balance_dirty_pages (`call` 0).
    DirtyThrottle = 2,
    /// A sleep on a folio under writeback (`call` 0).
    WritebackWait = 3,
}

impl CgroupOp {
    pub const ALL: [CgroupOp; 3] = [
        CgroupOp::SyncCall,
        CgroupOp::DirtyThrottle,
        CgroupOp::WritebackWait,
    ];

    /// The variant for a raw key value, if known.
    pub fn from_raw(raw: u32) -> Option<CgroupOp> {
        CgroupOp::ALL.iter().copied().find(|k| *k as u32 == raw)
    }
}

/// Aggregation key: the task's cgroup v2 id (`bpf_get_current_cgroup_id`, the cgroup
/// directory's inode number), what was timed and, for sync calls, which call.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CgroupKey {
    pub cgroup_id: u64,
    /// A [`CgroupOp`].
    pub kind: u32,
    /// The `SyncSyscall` id for [`CgroupOp::SyncCall`], else 0.
    pub call: u32,
}
const _: () = assert!(core::mem::size_of::<CgroupKey>() == 16);

/// Totals of one key on one CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CgroupTotals {
    pub count: u64,
    pub total_ns: u64,
}
const _: () = assert!(core::mem::size_of::<CgroupTotals>() == 16);

impl CgroupTotals {
    pub const ZERO: CgroupTotals = CgroupTotals {
        count: 0,
        total_ns: 0,
    };
}

user_pod!(CgroupKey, CgroupTotals);
