//! Waits on pages under writeback: the load-time layouts, the pending-wait value and the names.

use crate::user_pod;

/// Struct member offsets (bytes, from BTF) and flag values for timing waits on folios under
/// writeback from `tp_btf/folio_wait_writeback(folio, mapping)` to the return of the
/// `folio_wait_bit()` it calls (fexit), or where fexit is unavailable to the waiter's next
/// switch-in in `tp_btf/sched_switch(preempt, prev, next, prev_state)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FolioWaitLayout {
    /// `address_space.host` (the inode; its device comes from the shared inode → device layout,
    /// `kernel::InodeDevLayout`).
    pub mapping_host: u32,
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
    /// `task_struct.nvcsw`, the task's count of voluntary context switches.
    pub task_nvcsw: u32,
    /// The byte of `task_struct` that holds the one-bit `in_iowait` (set by `io_schedule()`,
    /// which `folio_wait_bit()` sleeps in, until the task runs on after the sleep), and the
    /// bit's mask in that byte.
    pub task_in_iowait: u32,
    pub in_iowait_mask: u32,
    /// `PG_writeback` (`enum pageflags`), the bit the fexit end (`folio_wait_bit()` and its
    /// killable variant) matches; 0 while unresolved, and then the fexit end is not used.
    pub pg_writeback: u32,
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
    /// The thread's `nvcsw` at the tracepoint (task storage kernels): the wait's sleep is the
    /// first voluntary switch after it.
    pub nvcsw: u64,
    /// The folio (before 5.16: the page) waited on, the tracepoint's argument #0: the fexit end
    /// takes only the `folio_wait_bit(folio, PG_writeback)` return of this very wait.
    pub folio: u64,
}
const _: () = assert!(core::mem::size_of::<PendingWait>() == 48);

/// Where `tp_btf/sched_switch` finds the state the previous task was switched out in.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrevStateSource {
    /// 1: the `prev_state` argument (#3, since 5.18). 0: the task's own state member, read from
    /// `prev` (`preempt`, argument #0, stands for state 0: the task stays runnable).
    pub from_arg: u32,
    /// Offset of `task_struct.__state` (5.14+) or `task_struct.state` (before).
    pub task_state: u32,
    /// Its size: 4 (`unsigned int __state`) or 8 (`long state`).
    pub task_state_size: u32,
    /// Non-zero once the daemon has filled in the fields above.
    pub resolved: u32,
}
const _: () = assert!(core::mem::size_of::<PrevStateSource>() == 16);

user_pod!(FolioWaitLayout, PendingWait, PrevStateSource);

/// Names of this family's load-time globals in the eBPF object (`#[no_mangle]` statics that the
/// daemon sets before load).
pub mod globals {
    pub const FOLIO_WAIT_LAYOUT: &str = "FOLIO_WAIT_LAYOUT";
    pub const PREV_STATE_SOURCE: &str = "PREV_STATE_SOURCE";
}

/// Names of this family's maps in the eBPF object (aya names a map after its `#[map]` static);
/// `object_names` lists them for the test that checks them against the object.
pub mod maps {
    pub const WRITEBACK_WAIT: &str = "WRITEBACK_WAIT";
    pub const FOLIO_WAITS: &str = "FOLIO_WAITS";
    pub const FOLIO_WAITS_PENDING: &str = "FOLIO_WAITS_PENDING";
    pub const FOLIO_WAIT_BUCKETS: &str = "FOLIO_WAIT_BUCKETS";
    /// Task storage (see `kernel::maps`).
    pub const FOLIO_WAIT_TASK: &str = "FOLIO_WAIT_TASK";
}
