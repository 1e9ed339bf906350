//! Dirty throttling (`balance_dirty_pages` pauses) and waits on pages under writeback: load-time
//! layouts, map keys and values.

use crate::{user_pod, writeback::BDI_NAME_LEN};

/// What the `writeback:balance_dirty_pages` probe needs, resolved by the daemon: two field
/// offsets from the event's format file and the unit of `pause`.
///
/// `include/trace/events/writeback.h`, `TRACE_EVENT(balance_dirty_pages, …)`:
/// `char bdi[32]; … long pause; …`. The sleep is `pause` jiffies, but the event records it as
/// `pause * 1000 / HZ`, i.e. in milliseconds (≤ 0 means the task does not sleep).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirtyThrottleFormat {
    pub bdi: u32,
    pub pause: u32,
    /// Nanoseconds per unit of the recorded `pause` (1 000 000: milliseconds); 0 = unknown.
    pub pause_unit_ns: u32,
    pub _reserved: u32,
}
const _: () = assert!(core::mem::size_of::<DirtyThrottleFormat>() == 16);

/// Aggregation key of throttling pauses: the bdi name as the tracepoint prints it (`MAJ:MIN`
/// for block devices), cut at its NUL and zero-padded.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BdiKey {
    pub bdi: [u8; BDI_NAME_LEN],
}
const _: () = assert!(core::mem::size_of::<BdiKey>() == BDI_NAME_LEN);

/// Struct member offsets (bytes, from BTF) and one flag value for timing waits on folios under
/// writeback from `tp_btf/folio_wait_writeback(folio, mapping)` to the waiter's next switch-in
/// in `tp_btf/sched_switch(preempt, prev, next, prev_state)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FolioWaitLayout {
    /// `address_space.host` (the inode).
    pub mapping_host: u32,
    pub inode_i_mode: u32,
    pub inode_i_rdev: u32,
    pub inode_i_sb: u32,
    pub sb_s_dev: u32,
    /// `task_struct.pid` (the thread id).
    pub task_pid: u32,
    /// `TASK_UNINTERRUPTIBLE` as the running kernel defines it (from the sched_switch format's
    /// `__print_flags` table, where it is printed as "D").
    pub task_uninterruptible: u32,
    /// Non-zero once the daemon has filled in the fields above.
    pub resolved: u32,
    /// `task_struct.bpf_storage` (5.11+), 0 if absent: sched_switch skips the task storage
    /// lookup of a task that has no BPF storage at all (most switches involve one).
    pub task_bpf_storage: u32,
    pub _reserved: u32,
}
const _: () = assert!(core::mem::size_of::<FolioWaitLayout>() == 40);

/// A wait on a folio under writeback, kept per thread id from the tracepoint until the thread
/// runs again.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingWait {
    /// `bpf_ktime_get_ns()` at the tracepoint.
    pub start_ns: u64,
    /// When the thread last got the CPU before sleeping: the tracepoint, or the switch-in after
    /// a preemption. The sleep must follow it closely to be this wait's.
    pub on_cpu_since_ns: u64,
    /// Kernel `dev_t` of the file's filesystem (the block device's own for bdev inodes); 0 if
    /// unknown.
    pub dev: u32,
    /// 1 once the thread was switched out in TASK_UNINTERRUPTIBLE after the tracepoint.
    pub sleeping: u32,
    /// The waiter's cgroup v2 id, taken at the tracepoint (the wait ends in sched_switch, in
    /// another task's context); 0 while per-cgroup totals are off.
    pub cgroup_id: u64,
}
const _: () = assert!(core::mem::size_of::<PendingWait>() == 32);

user_pod!(DirtyThrottleFormat, BdiKey, FolioWaitLayout, PendingWait);

/// Names of this module's load-time globals in the eBPF object.
pub mod globals {
    pub const DIRTY_THROTTLE_FMT: &str = "DIRTY_THROTTLE_FMT";
    pub const FOLIO_WAIT_LAYOUT: &str = "FOLIO_WAIT_LAYOUT";
}

/// Maps of the dirty-throttle and writeback-wait families: names shared by `#[map]` statics in `probe-ebpf` and the daemon's `take_map`;
/// `object_names` lists them for the test that checks them against the object.
pub mod maps {
    pub const DIRTY_THROTTLE_PAUSE: &str = "DIRTY_THROTTLE_PAUSE";
    pub const WRITEBACK_WAIT: &str = "WRITEBACK_WAIT";
    pub const FOLIO_WAITS: &str = "FOLIO_WAITS";
    pub const FOLIO_WAITS_PENDING: &str = "FOLIO_WAITS_PENDING";
    pub const FOLIO_WAIT_BUCKETS: &str = "FOLIO_WAIT_BUCKETS";
}
