//! Writeback submissions (writepages passes) by device, sync mode and caller: ids, label names,
//! map keys and values, and the layout globals of their probes.

use crate::{sync_calls::SyncSyscall, user_pod};

/// Who a writepages pass ran for. Discriminants are part of the map ABI: never reuse one.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WbCaller {
    Flusher = 1,
    Fsync = 2,
    Fdatasync = 3,
    SyncFileRange = 4,
    Syncfs = 5,
    Sync = 6,
    Msync = 7,
    IoUring = 8,
    Other = 9,
}

impl WbCaller {
    /// Every variant, in label order.
    pub const ALL: [WbCaller; 9] = [
        WbCaller::Flusher,
        WbCaller::Fsync,
        WbCaller::Fdatasync,
        WbCaller::SyncFileRange,
        WbCaller::Syncfs,
        WbCaller::Sync,
        WbCaller::Msync,
        WbCaller::IoUring,
        WbCaller::Other,
    ];

    /// The `caller` label value (docs/metrics.md).
    pub const fn label(self) -> &'static str {
        match self {
            WbCaller::Flusher => "flusher",
            WbCaller::Fsync => "fsync",
            WbCaller::Fdatasync => "fdatasync",
            WbCaller::SyncFileRange => "sync_file_range",
            WbCaller::Syncfs => "syncfs",
            WbCaller::Sync => "sync",
            WbCaller::Msync => "msync",
            WbCaller::IoUring => "io_uring",
            WbCaller::Other => "other",
        }
    }

    /// The caller for a pass made while the task is inside `syscall`.
    pub const fn for_syscall(syscall: SyncSyscall) -> WbCaller {
        match syscall {
            SyncSyscall::Fsync => WbCaller::Fsync,
            SyncSyscall::Fdatasync => WbCaller::Fdatasync,
            SyncSyscall::SyncFileRange => WbCaller::SyncFileRange,
            SyncSyscall::Syncfs => WbCaller::Syncfs,
            SyncSyscall::Sync => WbCaller::Sync,
            SyncSyscall::Msync => WbCaller::Msync,
            SyncSyscall::IoUringFsync
            | SyncSyscall::IoUringFdatasync
            | SyncSyscall::IoUringSyncFileRange => WbCaller::IoUring,
        }
    }

    /// The caller for a pass made inside the sync call with raw id `raw` (a `SyncSyscall`
    /// discriminant); `Other` for an unknown id. A plain match, so the eBPF side can use it.
    pub const fn for_raw_syscall(raw: u32) -> WbCaller {
        match raw {
            1 => WbCaller::for_syscall(SyncSyscall::Fsync),
            2 => WbCaller::for_syscall(SyncSyscall::Fdatasync),
            3 => WbCaller::for_syscall(SyncSyscall::SyncFileRange),
            4 => WbCaller::for_syscall(SyncSyscall::Syncfs),
            5 => WbCaller::for_syscall(SyncSyscall::Sync),
            6 => WbCaller::for_syscall(SyncSyscall::Msync),
            7..=9 => WbCaller::IoUring,
            _ => WbCaller::Other,
        }
    }

    /// The variant for a raw map value, if known.
    pub fn from_raw(raw: u32) -> Option<WbCaller> {
        WbCaller::ALL.iter().copied().find(|c| *c as u32 == raw)
    }
}

/// Aggregation key: the inode's filesystem device (kernel `dev_t`), the pass's raw
/// `enum writeback_sync_modes` value and the [`WbCaller`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SubmitKey {
    pub dev: u32,
    /// `enum writeback_sync_modes` (0 or 1).
    pub sync_mode: u16,
    pub caller: u16,
}
// 8 bytes: the key of a slot array (`slots`).
const _: () = assert!(core::mem::size_of::<SubmitKey>() == 8);

/// Per-CPU aggregate for one [`SubmitKey`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubmitStats {
    /// writepages passes that submitted at least one folio.
    pub passes: u64,
    /// Pages they submitted.
    pub pages: u64,
}
const _: () = assert!(core::mem::size_of::<SubmitStats>() == 16);

impl SubmitStats {
    pub const ZERO: SubmitStats = SubmitStats {
        passes: 0,
        pages: 0,
    };

    /// Adds another CPU's copy into this one.
    pub fn merge(&mut self, other: &SubmitStats) {
        self.passes = self.passes.wrapping_add(other.passes);
        self.pages = self.pages.wrapping_add(other.pages);
    }
}

/// The per-folio pass a task is in (kernel side only; `writeback:wbc_writepage`), per thread id.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PassState {
    /// `struct writeback_control *` and the folio's `struct address_space *`, as numbers: the
    /// pass's identity.
    pub wbc: u64,
    pub mapping: u64,
    /// `wbc->nr_to_write` at the latest folio of the pass.
    pub last_nr_to_write: i64,
    pub key: SubmitKey,
}
const _: () = assert!(core::mem::size_of::<PassState>() == 32);

/// Where `tp_btf/ext4_writepages_result(struct inode *inode, struct writeback_control *wbc,
/// int ret, int pages_written)` finds what the classic record holds: the inode's device (the
/// classic record's `inode->i_sb->s_dev`, through the shared inode → device layout,
/// `kernel::InodeDevLayout`) and `wbc->sync_mode` (a BTF member offset); `pages_written` is the
/// fourth argument (the daemon checks the prototype). Zero `resolved` means "not resolved".
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ext4WritepagesResultFormat {
    pub wbc_sync_mode: u32,
    pub resolved: u32,
}
const _: () = assert!(core::mem::size_of::<Ext4WritepagesResultFormat>() == 8);

/// BTF offsets for the `tp_btf/wbc_writepage` probe and the caller classification.
///
/// The folio being written is the last one taken from `wbc->fbatch` (mm/page-writeback.c
/// `writeback_get_folio()` fires the event right after `folio_batch_next()`), i.e.
/// `wbc->fbatch.folios[wbc->fbatch.i - 1]`; its `mapping` names the pass and `mapping->host` the
/// device. (`wbc->inode` would be simpler but stays NULL unless cgroup writeback is active.)
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WbcLayout {
    /// `writeback_control.nr_to_write` (long) and `.sync_mode` (enum, 4 bytes).
    pub nr_to_write: u32,
    pub sync_mode: u32,
    /// `writeback_control.fbatch` (since 6.10), `folio_batch.i` (u8) and `.folios` (pointers).
    pub fbatch: u32,
    pub fbatch_i: u32,
    pub fbatch_folios: u32,
    /// Number of entries in `folio_batch.folios`.
    pub fbatch_len: u32,
    /// `folio.mapping` and `address_space.host`.
    pub folio_mapping: u32,
    pub mapping_host: u32,
    /// `task_struct.mm`: NULL for kernel threads.
    pub task_mm: u32,
    /// A folio's size in pages, as `folio_nr_pages()` computes it: 1 unless the `PG_head` bit
    /// (`enum pageflags`) is set in `folio.flags`, else `folio._nr_pages`. `folio_nr_pages` is 0
    /// on kernels without `_nr_pages`: sizes then come from `nr_to_write` deltas.
    pub folio_flags: u32,
    pub folio_nr_pages: u32,
    pub pg_head: u32,
    /// Non-zero once resolved.
    pub resolved: u32,
}
const _: () = assert!(core::mem::size_of::<WbcLayout>() == 52);

user_pod!(
    SubmitKey,
    SubmitStats,
    PassState,
    Ext4WritepagesResultFormat,
    WbcLayout,
    crate::slots::Slot<SubmitStats>
);

/// Names of this family's load-time globals in the eBPF object (`#[no_mangle]` statics that the
/// daemon sets before load).
pub mod globals {
    pub const EXT4_WP_RESULT_FMT: &str = "EXT4_WP_RESULT_FMT";
    pub const WBC_LAYOUT: &str = "WBC_LAYOUT";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_ids_round_trip_and_syscalls_map() {
        for c in WbCaller::ALL {
            assert_eq!(WbCaller::from_raw(c as u32), Some(c));
        }
        assert_eq!(WbCaller::from_raw(0), None);
        for s in SyncSyscall::ALL {
            assert_eq!(
                WbCaller::for_raw_syscall(s as u32),
                WbCaller::for_syscall(s)
            );
        }
        assert_eq!(WbCaller::for_raw_syscall(0), WbCaller::Other);
        assert_eq!(
            WbCaller::for_syscall(SyncSyscall::SyncFileRange).label(),
            "sync_file_range"
        );
        assert_eq!(
            WbCaller::for_syscall(SyncSyscall::IoUringFdatasync),
            WbCaller::IoUring
        );
    }
}

/// Names of this family's maps in the eBPF object (aya names a map after its `#[map]` static);
/// `object_names` lists them for the test that checks them against the object.
pub mod maps {
    pub const WB_SUBMISSIONS: &str = "WB_SUBMISSIONS";
    pub const WB_SUBMISSION_SLOTS: &str = "WB_SUBMISSION_SLOTS";
    pub const FLUSHER_INODE: &str = "FLUSHER_INODE";
    pub const PASSES: &str = "PASSES";
    /// Task storage (see `kernel::maps`).
    pub const FLUSHER_TASK: &str = "FLUSHER_TASK";
    /// Task storage (see `kernel::maps`).
    pub const PASS_TASK: &str = "PASS_TASK";
}
