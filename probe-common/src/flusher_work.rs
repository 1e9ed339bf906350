//! Flusher work items with who queued them: one ring-buffer record per executed item, for the
//! stall context (`daemon/src/families/stall_events/context`). Kernel side: `probe-ebpf/src/flusher_work.rs`.

use crate::{user_pod, writeback::WbKey};

/// What identifies a work item between `writeback_queue` (in the queuing task) and
/// `writeback_exec` (in the flusher): the record's fields, as the writeback family compares
/// items (`same_work`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WorkId {
    pub key: WbKey,
    pub sb_dev: u32,
    pub kind_bits: u32,
}
const _: () = assert!(core::mem::size_of::<WorkId>() == 32);

/// The task that queued a work item (or entered `sync(2)`, whose WB_SYNC_NONE pass the
/// flusher runs as on-stack "start all" work without a `writeback_queue` event).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Queuer {
    /// Thread and process id; 0 when no task is known (periodic, background work).
    pub tid: u32,
    pub tgid: u32,
    pub comm: [u8; 16],
    /// `bpf_ktime_get_ns()` when it queued the item.
    pub t_ns: u64,
}
const _: () = assert!(core::mem::size_of::<Queuer>() == 32);

/// One executed work item: written to `WORK_RECORDS` when the flusher finishes it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkRecord {
    pub id: WorkId,
    pub queuer: Queuer,
    /// Flusher thread id.
    pub flusher_tid: u32,
    pub _reserved: u32,
    /// `bpf_ktime_get_ns()` at `writeback_exec` (or the first `writeback_start` of on-stack
    /// work) and at the item's end.
    pub start_ns: u64,
    pub end_ns: u64,
    /// Pages written: the sum of the item's `nr_pages` deltas (as `written_pages`).
    pub pages: u64,
}
const _: () = assert!(core::mem::size_of::<WorkRecord>() == 32 + 32 + 8 + 24);

/// Load-time facts: the raw `enum wb_reason` value of `WB_REASON_SYNC` (from the tracepoint's
/// table or BTF), for matching sync(2)'s start-all work with the task that entered sync(2).
/// Zero `resolved` means "not resolved".
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkQueuerLayout {
    pub reason_sync: u32,
    pub resolved: u32,
}
const _: () = assert!(core::mem::size_of::<WorkQueuerLayout>() == 8);

/// Bytes of the `WORK_RECORDS` ring buffer: work items are few (one per periodic, background
/// or sync pass of a bdi); about 2500 records fit.
pub const WORK_RING_BYTES: u32 = 256 * 1024;

/// How long a sync(2) caller stays the presumed queuer of start-all work with reason `sync`.
pub const SYNC_QUEUER_NS: u64 = 10_000_000_000;

user_pod!(WorkId, Queuer, WorkRecord, WorkQueuerLayout);

/// Names of this family's load-time globals in the eBPF object (`#[no_mangle]` statics that the
/// daemon sets before load).
pub mod globals {
    pub const WORK_QUEUER_LAYOUT: &str = "WORK_QUEUER_LAYOUT";
}

/// Names of this family's maps in the eBPF object (aya names a map after its `#[map]` static);
/// `object_names` lists them for the test that checks them against the object.
pub mod maps {
    pub const WORK_RECORDS: &str = "WORK_RECORDS";
    pub const RUNNING_WORK: &str = "RUNNING_WORK";
    /// Probe-side only: work items queued and not yet run, and the last sync(2) caller.
    pub const QUEUED_WORK: &str = "QUEUED_WORK";
    pub const LAST_SYNC: &str = "LAST_SYNC";
}
