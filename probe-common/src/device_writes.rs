//! Device write I/O by writeback source: every write bio at `block_bio_queue`, attributed to
//! the flusher work item or the task call it was submitted for. Ids, label names, map key and
//! value, and the layout global of the probe side (`probe-ebpf/src/device_writes.rs`).

use crate::{submissions::WbCaller, user_pod};

/// Whom a write bio was submitted for. Discriminants are part of the map ABI: never reuse one.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WriteSource {
    /// A flusher thread executing a work item; the key carries its sync mode and reason.
    Flusher = 1,
    Fsync = 2,
    Fdatasync = 3,
    SyncFileRange = 4,
    Syncfs = 5,
    Sync = 6,
    Msync = 7,
    /// An io-wq worker (io_uring fsync, sync_file_range, and its buffered writes).
    IoUring = 8,
    /// A user task outside any sync call: O_DIRECT, O_SYNC/O_DSYNC writes, raw block devices.
    Direct = 9,
    /// A jbd2 journal thread (ext4 commits).
    Journal = 10,
    /// A workqueue worker other than the flusher: blk-throttle dispatching bios it held back
    /// (their submitter is no longer current), xfs log and metadata workers, dm/md workers.
    Kworker = 11,
    /// Any other kernel thread.
    Other = 12,
    /// A bio a blk-throttle rule held back, traced when the throttle worker dispatched it
    /// (`BIO_BPS_THROTTLED`): the submitter is no longer known.
    Throttled = 13,
}

impl WriteSource {
    /// Every variant, in label order.
    pub const ALL: [WriteSource; 13] = [
        WriteSource::Flusher,
        WriteSource::Fsync,
        WriteSource::Fdatasync,
        WriteSource::SyncFileRange,
        WriteSource::Syncfs,
        WriteSource::Sync,
        WriteSource::Msync,
        WriteSource::IoUring,
        WriteSource::Direct,
        WriteSource::Journal,
        WriteSource::Kworker,
        WriteSource::Other,
        WriteSource::Throttled,
    ];

    /// The `source` label value (docs/metrics.md).
    pub const fn label(self) -> &'static str {
        match self {
            WriteSource::Flusher => "flusher",
            WriteSource::Fsync => "fsync",
            WriteSource::Fdatasync => "fdatasync",
            WriteSource::SyncFileRange => "sync_file_range",
            WriteSource::Syncfs => "syncfs",
            WriteSource::Sync => "sync",
            WriteSource::Msync => "msync",
            WriteSource::IoUring => "io_uring",
            WriteSource::Direct => "direct",
            WriteSource::Journal => "journal",
            WriteSource::Kworker => "kworker",
            WriteSource::Other => "other",
            WriteSource::Throttled => "throttled",
        }
    }

    /// The source of a bio submitted inside the sync call with raw id `raw` (a `SyncSyscall`
    /// discriminant). A plain match, so the eBPF side can use it.
    pub const fn for_raw_syscall(raw: u32) -> WriteSource {
        match WbCaller::for_raw_syscall(raw) {
            WbCaller::Fsync => WriteSource::Fsync,
            WbCaller::Fdatasync => WriteSource::Fdatasync,
            WbCaller::SyncFileRange => WriteSource::SyncFileRange,
            WbCaller::Syncfs => WriteSource::Syncfs,
            WbCaller::Sync => WriteSource::Sync,
            WbCaller::Msync => WriteSource::Msync,
            WbCaller::IoUring => WriteSource::IoUring,
            WbCaller::Flusher | WbCaller::Other => WriteSource::Direct,
        }
    }

    /// The variant for a raw map value, if known.
    pub fn from_raw(raw: u8) -> Option<WriteSource> {
        WriteSource::ALL.iter().copied().find(|s| *s as u8 == raw)
    }
}

/// `sync_mode` / `reason` value of a key whose source is not flusher work.
pub const NO_WORK: u8 = u8::MAX;

/// Aggregation key: the bio's partition device (kernel `dev_t`, `bi_bdev->bd_dev`), the
/// [`WriteSource`], and for flusher work its raw `enum writeback_sync_modes` and
/// `enum wb_reason` values ([`NO_WORK`] otherwise; both enums are far below 255).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DevWriteKey {
    pub dev: u32,
    pub source: u8,
    pub sync_mode: u8,
    pub reason: u8,
    pub _reserved: u8,
}
const _: () = assert!(core::mem::size_of::<DevWriteKey>() == 8);

/// Per-CPU aggregate for one [`DevWriteKey`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DevWriteStats {
    /// `bio->bi_iter.bi_size` summed over the write bios.
    pub bytes: u64,
    pub bios: u64,
}
const _: () = assert!(core::mem::size_of::<DevWriteStats>() == 16);

impl DevWriteStats {
    pub const ZERO: DevWriteStats = DevWriteStats { bytes: 0, bios: 0 };

    /// Adds another CPU's copy into this one.
    pub fn merge(&mut self, other: &DevWriteStats) {
        self.bytes = self.bytes.wrapping_add(other.bytes);
        self.bios = self.bios.wrapping_add(other.bios);
    }
}

/// What the attribution needs from BTF: `bio.bi_iter` + `bvec_iter.bi_size` (one offset),
/// `bio.bi_flags` and `BIO_BPS_THROTTLED`,
/// `task_struct.mm` (NULL for kernel threads), `task_struct.comm` (its first 8 bytes are read
/// with one plain load: `bpf_get_current_comm()` costs several times more), and the `enum req_op` values of the write-direction
/// ops that `/sys/block/*/stat` does not count as written sectors (`REQ_OP_DISCARD`,
/// `REQ_OP_SECURE_ERASE`; [`NO_OP`] where the kernel has none). Zero `resolved` means "not
/// resolved": the probe then counts nothing.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DevWriteLayout {
    pub bio_bi_size: u32,
    /// `task_struct.flags`: [`PF_KTHREAD`], [`PF_WQ_WORKER`] and [`PF_IO_WORKER`] classify
    /// the submitter from the task's first cache line, where its name (`comm`, far into the
    /// struct and rarely touched) costs a cache miss on most bios.
    pub task_flags: u32,
    pub op_discard: u32,
    pub op_secure_erase: u32,
    pub task_comm: u32,
    /// `bio.bi_flags` (2 bytes) and the bit of `BIO_BPS_THROTTLED` in it ([`NO_OP`] where the
    /// kernel has no such flag: throttled bios then count as `kworker`).
    pub bio_bi_flags: u32,
    pub bps_throttled_bit: u32,
    pub resolved: u32,
    /// `task_struct.bpf_storage` (0 if unknown): a workqueue worker without any BPF storage
    /// is not in a flusher work item, known without a task storage get.
    pub task_bpf_storage: u32,
    pub _reserved: u32,
}
const _: () = assert!(core::mem::size_of::<DevWriteLayout>() == 40);

impl DevWriteLayout {
    /// Unresolved: the probe counts nothing.
    pub const ZERO: DevWriteLayout = DevWriteLayout {
        bio_bi_size: 0,
        task_flags: 0,
        op_discard: 0,
        op_secure_erase: 0,
        task_comm: 0,
        bio_bi_flags: 0,
        bps_throttled_bit: 0,
        resolved: 0,
        task_bpf_storage: 0,
        _reserved: 0,
    };
}

/// `task_struct.flags` bits (include/linux/sched.h; preprocessor constants, so not in BTF, and
/// unchanged since each was introduced: 2.6.27, 2.6.36 and 5.5).
/// A kernel thread.
pub const PF_KTHREAD: u32 = 0x0020_0000;
/// A workqueue worker (kworker, and a workqueue's rescuer).
pub const PF_WQ_WORKER: u32 = 0x0000_0020;
/// An io_uring io-wq worker (a user thread since 5.12, a kernel thread before).
pub const PF_IO_WORKER: u32 = 0x0000_0010;

/// An op value no bio carries (ops are 8 bits).
pub const NO_OP: u32 = u32::MAX;

/// Whether a bio of op `op` adds to the device's written sectors in `/sys/block/*/stat`:
/// `op_is_write()` (the low bit, include/linux/blk_types.h) and not a discard
/// (`op_stat_group()`, block/blk-mq.c): writes, write-zeroes, zone appends.
/// `op_discard` and `op_secure_erase` are [`DevWriteLayout`]'s.
pub const fn counts_as_written(op: u32, op_discard: u32, op_secure_erase: u32) -> bool {
    op & 1 == 1 && op != op_discard && op != op_secure_erase
}

user_pod!(DevWriteKey, DevWriteStats, DevWriteLayout);

/// Names of this family's load-time globals in the eBPF object (`#[no_mangle]` statics that the
/// daemon sets before load).
pub mod globals {
    pub const DEV_WRITE_LAYOUT: &str = "DEV_WRITE_LAYOUT";
}

// No map of its own: the counters are the block family's bio counters, whose key carries the
// attribution (`crate::block::BioKey`), so that a bio updates one counter for both families.

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync_calls::SyncSyscall;

    #[test]
    fn raw_ids_round_trip_and_syscalls_map() {
        for s in WriteSource::ALL {
            assert_eq!(WriteSource::from_raw(s as u8), Some(s));
        }
        assert_eq!(WriteSource::from_raw(0), None);
        assert_eq!(
            WriteSource::for_raw_syscall(SyncSyscall::SyncFileRange as u32).label(),
            "sync_file_range"
        );
        assert_eq!(
            WriteSource::for_raw_syscall(SyncSyscall::IoUringFsync as u32),
            WriteSource::IoUring
        );
        assert_eq!(WriteSource::for_raw_syscall(0), WriteSource::Direct);
    }

    #[test]
    fn written_ops_are_writes_but_not_discards() {
        // The values of 6.x's enum req_op.
        let (op_discard, op_secure_erase) = (3, 5);
        let written: [u32; 8] = [0, 1, 2, 3, 5, 9, 13, 34]
            .map(|op| counts_as_written(op, op_discard, op_secure_erase) as u32);
        assert_eq!(written, [0, 1, 0, 0, 0, 1, 1, 0]);
    }
}
