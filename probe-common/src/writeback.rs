//! Flusher writeback work: map keys and values.

use crate::{hist::Log2Hist, user_pod};

/// Length of the bdi name kept in keys. Block bdis are named `MAJ:MIN` (at most 11 bytes);
/// longer names (non-block bdis) are truncated.
pub const BDI_NAME_LEN: usize = 16;

/// `enum writeback_sync_modes` (include/linux/writeback.h). UAPI-stable since 2.6: WB_SYNC_NONE = 0,
/// WB_SYNC_ALL = 1; the tracepoints print it as a plain int.
pub const WB_SYNC_ALL: u32 = 1;

/// Aggregation key of flusher work: backing device, sync mode, and the raw `enum wb_reason` value
/// (decoded to a name in user space from the running kernel's own table).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WbKey {
    /// The bdi name as in the tracepoint's `name` field, NUL-padded.
    pub bdi: [u8; BDI_NAME_LEN],
    pub sync_mode: u32,
    pub reason: u32,
}
const _: () = assert!(core::mem::size_of::<WbKey>() == 24);

/// Per-CPU aggregate for one [`WbKey`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WbStats {
    /// Work items queued for the flusher (`writeback_queue`).
    pub queued: u64,
    /// Work items executed to the end.
    pub works: u64,
    /// Pages written back: sum of per-iteration `nr_pages` deltas.
    pub written_pages: u64,
    /// Work item duration, first `writeback_start` to last `writeback_written`.
    pub duration: Log2Hist,
}
const _: () = assert!(core::mem::size_of::<WbStats>() == 24 + core::mem::size_of::<Log2Hist>());

impl WbStats {
    pub const ZERO: WbStats = WbStats {
        queued: 0,
        works: 0,
        written_pages: 0,
        duration: Log2Hist::ZERO,
    };

    /// Adds another CPU's copy into this one.
    pub fn merge(&mut self, other: &WbStats) {
        self.queued = self.queued.wrapping_add(other.queued);
        self.works = self.works.wrapping_add(other.works);
        self.written_pages = self.written_pages.wrapping_add(other.written_pages);
        self.duration.merge(&other.duration);
    }
}

/// The work item a flusher thread is executing, kept per flusher tid (kernel side only, but
/// defined here so its layout is asserted like every other map value).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlusherItem {
    pub key: WbKey,
    pub sb_dev: u32,
    /// for_kupdate | for_background << 1 | range_cyclic << 2: with the key and sb_dev this tells
    /// apart on-stack work items that may share a stack address.
    pub kind_bits: u32,
    /// 1 once a `writeback_start` was seen for this item.
    pub started: u32,
    /// 1 while an iteration is open (between `writeback_start` and `writeback_written`).
    pub in_iteration: u32,
    pub t_first_start: u64,
    pub t_last_written: u64,
    /// `nr_pages` (remaining budget) at the open iteration's start.
    pub iteration_nr_pages: i64,
    /// 1 while the item is open: a thread's task storage value outlives its items.
    pub open: u32,
    /// The item's claim on its thread's flusher register slot: [`NO_CLAIM`], [`SLOT_SHARED`]
    /// or [`SLOT_OWNED`].
    pub register: u32,
}
const _: () = assert!(core::mem::size_of::<FlusherItem>() == 24 + 16 + 24 + 8);

/// [`FlusherItem::register`]: the item has no claim on a register slot (none was free to count
/// it, or the item opened before the probes).
pub const NO_CLAIM: u32 = 0;
/// The item counts in its slot's `claims`, which another thread owns.
pub const SLOT_SHARED: u32 = 1;
/// The item's thread owns the slot.
pub const SLOT_OWNED: u32 = 2;

/// Field offsets in the records of the `writeback:writeback_work_class` tracepoints
/// (`writeback_queue`, `writeback_exec`, `writeback_start`, `writeback_written`).
///
/// `include/trace/events/writeback.h`, `DECLARE_EVENT_CLASS(writeback_work_class, …)`:
/// `char name[32]; long nr_pages; dev_t sb_dev; int sync_mode; int for_kupdate;
/// int range_cyclic; int for_background; int reason; ino_t cgroup_ino;`
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WbWorkFormat {
    pub name: u32,
    pub nr_pages: u32,
    pub sb_dev: u32,
    pub sync_mode: u32,
    pub for_kupdate: u32,
    pub range_cyclic: u32,
    pub for_background: u32,
    pub reason: u32,
}
const _: () = assert!(core::mem::size_of::<WbWorkFormat>() == 32);

/// One slot of the flusher register (`probe-ebpf`'s `writeback::register`): which task, if any,
/// is executing a flusher work item, found from the task's address without touching its task
/// storage, for the per-bio attribution of device writes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlusherSlot {
    /// The owning task's address; 0 while no task owns the slot.
    pub task: u64,
    /// Threads with an open item whose address maps to this slot (owner included), changed
    /// only with atomic adds: 0 means none of them has an item open.
    pub claims: u64,
    /// The owner's item's `sync_mode` and `reason`.
    pub sync_mode: u32,
    pub reason: u32,
}
const _: () = assert!(core::mem::size_of::<FlusherSlot>() == 24);

/// log2 of the flusher register's slots.
pub const FLUSHER_SLOT_BITS: u32 = 6;
/// Slots in the flusher register: a host runs a few flusher threads at a time, so a thread that
/// is not one finds its slot free almost always.
pub const FLUSHER_SLOTS: u32 = 1 << FLUSHER_SLOT_BITS;

/// The register slot of the task at kernel address `task`: the top bits of its Fibonacci hash
/// (task structs are slab objects, so their low bits say little).
#[inline(always)]
pub const fn flusher_slot(task: u64) -> u32 {
    (task.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - FLUSHER_SLOT_BITS)) as u32
}

user_pod!(WbKey, WbStats, FlusherItem, WbWorkFormat, FlusherSlot);

/// Names of this family's load-time globals in the eBPF object (`#[no_mangle]` statics that the
/// daemon sets before load).
pub mod globals {
    pub const WB_WORK_FMT: &str = "WB_WORK_FMT";
}

/// Names of this family's maps in the eBPF object (aya names a map after its `#[map]` static);
/// `object_names` lists them for the test that checks them against the object.
pub mod maps {
    pub const WB_WORK_STATS: &str = "WB_WORK_STATS";
    pub const FLUSHER_ITEMS: &str = "FLUSHER_ITEMS";
    /// Task storage (see `kernel::maps`).
    pub const FLUSHER_ITEM_TASK: &str = "FLUSHER_ITEM_TASK";
    pub const FLUSHER_REGISTER: &str = "FLUSHER_REGISTER";
    pub const FLUSHER_CLAIMS: &str = "FLUSHER_CLAIMS";
}
