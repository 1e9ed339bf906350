//! Stall events: operations over a threshold, written by the probes to a ring buffer with the
//! task, the device and a breakdown of where the time went.
//!
//! Fast operations never reach the ring buffer: the probes compare the duration with the
//! threshold in [`StallConfig`] (a one-element array map the daemon writes, so it can change at
//! run time) before reserving a record.

use crate::{user_pod, writeback::BDI_NAME_LEN};

/// Kinds of stall that are not sync calls. Sync calls use their `SyncSyscall` id (1–9) as kind;
/// these start at 32 so the two ranges never meet. Part of the ring-buffer ABI: never reuse one.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StallKind {
    DirtyThrottle = 32,
    WritebackWait = 33,
    BlockRequest = 34,
    JournalCommit = 35,
}

impl StallKind {
    /// Every non-sync-call kind.
    pub const ALL: [StallKind; 4] = [
        StallKind::DirtyThrottle,
        StallKind::WritebackWait,
        StallKind::BlockRequest,
        StallKind::JournalCommit,
    ];

    /// The `kind` label value of `wbscope_stalls_total` (docs/metrics.md).
    pub const fn label(self) -> &'static str {
        match self {
            StallKind::DirtyThrottle => "dirty_throttle",
            StallKind::WritebackWait => "writeback_wait",
            StallKind::BlockRequest => "block_request",
            StallKind::JournalCommit => "journal_commit",
        }
    }

    /// The variant for a raw kind, if it is one of these.
    pub fn from_raw(raw: u32) -> Option<StallKind> {
        StallKind::ALL.iter().copied().find(|k| *k as u32 == raw)
    }
}

/// One stall, as the probes write it to the `STALL_EVENTS` ring buffer.
///
/// Times are `bpf_ktime_get_ns()` (CLOCK_MONOTONIC). The breakdown fields are parts of
/// `duration_ns` measured independently, each clipped to it; they may overlap one another (a
/// journal commit often includes the flush).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StallEvent {
    pub start_ns: u64,
    pub duration_ns: u64,
    /// Time the task slept on pages under writeback during the call.
    pub wb_wait_ns: u64,
    /// Time the task was throttled in balance_dirty_pages during the call.
    pub throttle_ns: u64,
    /// Time a journal commit of the call's device was running during the call.
    pub journal_ns: u64,
    /// Time a flush request of the call's device was in flight during the call.
    pub flush_ns: u64,
    /// Cgroup v2 id of the task (`bpf_get_current_cgroup_id`).
    pub cgroup_id: u64,
    /// Inode number of the file, where the call names one; 0 otherwise.
    pub ino: u64,
    /// Thread id and process id of the task the event was recorded in.
    pub pid: u32,
    pub tgid: u32,
    /// A `SyncSyscall` id or a [`StallKind`].
    pub kind: u32,
    /// Kernel `dev_t`; 0 when unknown or when the device is named by `bdi` instead.
    pub dev: u32,
    pub comm: [u8; 16],
    /// Backing device name of dirty-throttle events (`MAJ:MIN` for block devices), NUL-padded.
    pub bdi: [u8; BDI_NAME_LEN],
    /// Kind-specific: the flags of sync_file_range/msync, the request op of block requests.
    pub detail: u32,
    pub _reserved: u32,
}
const _: () = assert!(core::mem::size_of::<StallEvent>() == 120);

/// The one element of the `STALL_CONFIG` array map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StallConfig {
    /// Operations at least this long are stall events.
    pub threshold_ns: u64,
    /// 0: no events at all (the map's initial state, before the daemon configures it).
    pub enabled: u32,
    pub _reserved: u32,
}
const _: () = assert!(core::mem::size_of::<StallConfig>() == 16);

/// Layout facts the stall probes need beyond the families' own, from BTF.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StallLayout {
    /// `REQ_OP_FLUSH` (enum req_op).
    pub op_flush: u32,
    /// `task_struct.comm` and `task_struct.tgid`: writeback waits end in sched_switch, where
    /// the waiter is the task being switched in, not the current one.
    pub task_comm: u32,
    pub task_tgid: u32,
    /// Non-zero once resolved.
    pub resolved: u32,
}
const _: () = assert!(core::mem::size_of::<StallLayout>() == 16);

/// A sync call in flight, as the stall probes track it per thread id: what the event needs
/// beyond `SyncStart`, and the per-call accumulators.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenCall {
    pub ino: u64,
    pub wb_wait_ns: u64,
    /// The device's journal and flush busy clocks (see [`DevBusy`]) at the call's start.
    pub journal_at_start: u64,
    /// Kept apart from `wb_wait_ns`: LLVM turns two adjacent zero-initialised words into a
    /// `memset` call, which on BPF is a byte loop of five instructions per byte, run at every
    /// sync call's enter.
    pub throttle_ns: u64,
    pub flush_at_start: u64,
}
const _: () = assert!(core::mem::size_of::<OpenCall>() == 40);

/// A sync system call in flight, per thread id: its start and its stall-breakdown accumulators in
/// one map entry, so that enter and exit each touch one map instead of two.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InflightSync {
    pub start: crate::sync_calls::SyncStart,
    pub open: OpenCall,
    /// Non-zero once a per-folio writeback pass (`wbc_writepage`) was opened inside this call:
    /// only then does the exit have a pass to forget.
    pub pass_open: u32,
    pub _reserved: u32,
}
const _: () = assert!(core::mem::size_of::<InflightSync>() == 72);

/// Per-device busy clocks: total time during which a journal commit (resp. a flush request) was
/// running, like iostat's io_ticks. The value at time `t` is `total + (t - since)` while busy, so
/// the difference between two readings is exactly the busy time between them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DevBusy {
    pub journal_total_ns: u64,
    /// Start of the running commit; 0 when none runs.
    pub journal_since_ns: u64,
    pub flush_total_ns: u64,
    /// Start of the current flush-busy period; meaningful while `flush_inflight > 0`.
    pub flush_since_ns: u64,
    pub flush_inflight: u64,
    /// The jbd2 transaction id of the running commit (valid while `journal_since_ns != 0`): a
    /// device's jbd2 commits run one at a time, so this entry is also the commit's start record.
    pub journal_tid: u64,
}
const _: () = assert!(core::mem::size_of::<DevBusy>() == 48);

impl DevBusy {
    /// The journal busy clock at `now`.
    pub fn journal_at(&self, now: u64) -> u64 {
        if self.journal_since_ns != 0 && now > self.journal_since_ns {
            self.journal_total_ns + (now - self.journal_since_ns)
        } else {
            self.journal_total_ns
        }
    }

    /// The flush busy clock at `now`.
    pub fn flush_at(&self, now: u64) -> u64 {
        if self.flush_inflight > 0 && now > self.flush_since_ns {
            self.flush_total_ns + (now - self.flush_since_ns)
        } else {
            self.flush_total_ns
        }
    }
}

/// log2 of the slots of `DEV_BUSY_SLOTS`.
pub const DEV_BUSY_SLOT_BITS: u32 = 6;
/// Slots of `DEV_BUSY_SLOTS`: the devices a host has at start, with room (two candidates each).
pub const DEV_BUSY_SLOT_COUNT: u32 = 1 << DEV_BUSY_SLOT_BITS;

/// One device's busy clocks in `DEV_BUSY_SLOTS`, the array in front of the `DEV_BUSY` hash: the
/// daemon writes `dev` before the probes are attached and never again, the probes only the
/// clocks. `dev == 0`: a free slot (0 is never a block device). One cache line a slot.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DevBusySlot {
    /// Kernel dev_t of the device whose clocks these are.
    pub dev: u32,
    pub _reserved: u32,
    pub busy: DevBusy,
    pub _pad: u64,
}
const _: () = assert!(core::mem::size_of::<DevBusySlot>() == 64);

/// The two candidate slots of `dev` (kernel dev_t): two fields of its Fibonacci hash, the second
/// made to differ from the first. The daemon places a device in the first free one; the probes
/// look in both before the hash.
#[inline(always)]
pub const fn dev_busy_slot_indexes(dev: u32) -> (u32, u32) {
    let product = (dev as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let first = (product >> (64 - DEV_BUSY_SLOT_BITS)) as u32;
    let second = (product >> (64 - 2 * DEV_BUSY_SLOT_BITS)) as u32 & (DEV_BUSY_SLOT_COUNT - 1);
    let second = if second == first { first ^ 1 } else { second };
    (first, second)
}

user_pod!(
    StallEvent,
    StallConfig,
    StallLayout,
    OpenCall,
    InflightSync,
    DevBusy,
    DevBusySlot
);

/// Names of this family's load-time globals in the eBPF object (`#[no_mangle]` statics that the
/// daemon sets before load).
pub mod globals {
    pub const STALL_LAYOUT: &str = "STALL_LAYOUT";
}

/// Names of this family's maps in the eBPF object (aya names a map after its `#[map]` static);
/// `object_names` lists them for the test that checks them against the object.
pub mod maps {
    pub const STALL_EVENTS: &str = "STALL_EVENTS";
    pub const STALL_CONFIG: &str = "STALL_CONFIG";
    pub const STALL_DROPS: &str = "STALL_DROPS";
    pub const DEV_BUSY: &str = "DEV_BUSY";
    pub const DEV_BUSY_SLOTS: &str = "DEV_BUSY_SLOTS";
}

/// Size of the `STALL_EVENTS` ring buffer (a power of two, a multiple of the page size): about
/// 2000 events before the reader must have caught up.
pub const STALL_RING_BYTES: u32 = 256 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hosts_devices_spread_over_the_busy_slots() {
        extern crate std;
        // sda..sdd with 4 partitions each, vda, vdb, and 8 loop devices.
        let mut devs: std::vec::Vec<u32> = (0..20).map(|m| (8 << 20) | m).collect();
        devs.extend([(253 << 20), (253 << 20) | 16]);
        devs.extend((0..8).map(|m| (7 << 20) | m));
        let mut taken = [0u32; DEV_BUSY_SLOT_COUNT as usize];
        let placed = devs
            .iter()
            .filter(|&&dev| {
                let (a, b) = dev_busy_slot_indexes(dev);
                assert!(a < DEV_BUSY_SLOT_COUNT && b < DEV_BUSY_SLOT_COUNT && a != b);
                [a, b].into_iter().any(|i| {
                    let slot = &mut taken[i as usize];
                    if *slot == 0 {
                        *slot = dev;
                    }
                    *slot == dev
                })
            })
            .count();
        assert!(
            placed >= devs.len() - 1,
            "{placed} of {} placed",
            devs.len()
        );
    }

    #[test]
    fn busy_clocks_count_only_busy_time() {
        let mut b = DevBusy::default();
        assert_eq!(b.journal_at(100), 0);
        b.journal_since_ns = 50;
        assert_eq!(b.journal_at(100), 50);
        b.journal_total_ns = 10;
        b.journal_since_ns = 0;
        assert_eq!(b.journal_at(1000), 10);
        b.flush_inflight = 2;
        b.flush_since_ns = 900;
        assert_eq!(b.flush_at(1000), 100);
    }

    #[test]
    fn kinds_round_trip_and_stay_clear_of_sync_ids() {
        for k in StallKind::ALL {
            assert_eq!(StallKind::from_raw(k as u32), Some(k));
            assert!(k as u32 >= 32);
        }
        assert_eq!(StallKind::from_raw(1), None);
    }
}
