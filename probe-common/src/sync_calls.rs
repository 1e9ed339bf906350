//! Sync-family system calls: ids, label names, map keys and values.

pub mod layout;

use crate::user_pod;

/// The sync calls wbscope times. Discriminants are part of the map ABI: never reuse one.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncSyscall {
    Fsync = 1,
    Fdatasync = 2,
    SyncFileRange = 3,
    Syncfs = 4,
    Sync = 5,
    Msync = 6,
    IoUringFsync = 7,
    IoUringFdatasync = 8,
    IoUringSyncFileRange = 9,
}

impl SyncSyscall {
    /// Every variant, in label order.
    pub const ALL: [SyncSyscall; 9] = [
        SyncSyscall::Fsync,
        SyncSyscall::Fdatasync,
        SyncSyscall::SyncFileRange,
        SyncSyscall::Syncfs,
        SyncSyscall::Sync,
        SyncSyscall::Msync,
        SyncSyscall::IoUringFsync,
        SyncSyscall::IoUringFdatasync,
        SyncSyscall::IoUringSyncFileRange,
    ];

    /// The `syscall` label value (docs/metrics.md).
    pub const fn label(self) -> &'static str {
        match self {
            SyncSyscall::Fsync => "fsync",
            SyncSyscall::Fdatasync => "fdatasync",
            SyncSyscall::SyncFileRange => "sync_file_range",
            SyncSyscall::Syncfs => "syncfs",
            SyncSyscall::Sync => "sync",
            SyncSyscall::Msync => "msync",
            SyncSyscall::IoUringFsync => "io_uring_fsync",
            SyncSyscall::IoUringFdatasync => "io_uring_fdatasync",
            SyncSyscall::IoUringSyncFileRange => "io_uring_sync_file_range",
        }
    }

    /// The variant for a raw map value, if known.
    pub fn from_raw(raw: u32) -> Option<SyncSyscall> {
        SyncSyscall::ALL.iter().copied().find(|s| *s as u32 == raw)
    }
}

/// Aggregation key of sync-call latency: which call, on which device (kernel `dev_t`,
/// `MAJOR << 20 | MINOR`; 0 when unknown).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SyncKey {
    pub syscall: u32,
    pub dev: u32,
}
const _: () = assert!(core::mem::size_of::<SyncKey>() == 8);

/// A sync call in flight, kept per thread id between `sys_enter` and `sys_exit` (and per io_uring
/// request between submission and completion).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncStart {
    pub start_ns: u64,
    pub syscall: u32,
    /// Kernel `dev_t`; 0 until known (msync learns it from the filesystem's fsync event).
    pub dev: u32,
    /// The call's flags argument where it has one (sync_file_range, msync, io_uring fsync).
    pub flags: u32,
    pub _reserved: u32,
}
const _: () = assert!(core::mem::size_of::<SyncStart>() == 24);

/// Aggregation key of `wbscope_sync_file_range_calls_total`: device and the raw flags argument.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SfrKey {
    pub dev: u32,
    pub flags: u32,
}
const _: () = assert!(core::mem::size_of::<SfrKey>() == 8);

user_pod!(
    SyncKey,
    SyncStart,
    SfrKey,
    crate::slots::Slot<crate::hist::Log2Hist>
);

/// `SYNC_FILE_RANGE_*` flags (include/uapi/linux/fs.h, UAPI), in label order.
pub const SFR_FLAGS: [(u32, &str); 3] = [(1, "wait_before"), (2, "write"), (4, "wait_after")];

/// Canonical `flags` label of a sync_file_range call: the set flags joined with `+` in the order
/// `wait_before+write+wait_after`; `none` for 0 (a valid no-op call) and `invalid` when bits
/// outside the three flags are set (the kernel rejects those with EINVAL).
pub fn sfr_flags_label(flags: u32) -> &'static str {
    match flags {
        0 => "none",
        1 => "wait_before",
        2 => "write",
        3 => "wait_before+write",
        4 => "wait_after",
        5 => "wait_before+wait_after",
        6 => "write+wait_after",
        7 => "wait_before+write+wait_after",
        _ => "invalid",
    }
}

/// `MS_SYNC` (include/uapi/asm-generic/mman-common.h, UAPI): the only msync flag that writes back.
pub const MS_SYNC: u32 = 4;
/// `IORING_FSYNC_DATASYNC` (include/uapi/linux/io_uring.h, UAPI).
pub const IORING_FSYNC_DATASYNC: u32 = 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_ids_round_trip() {
        for s in SyncSyscall::ALL {
            assert_eq!(SyncSyscall::from_raw(s as u32), Some(s));
        }
        assert_eq!(SyncSyscall::from_raw(0), None);
        assert_eq!(SyncSyscall::from_raw(99), None);
    }

    #[test]
    fn sfr_labels_follow_flag_order() {
        // Built independently from the flag table, so the hand-written match cannot drift.
        for flags in 0..8u32 {
            let joined: [&str; 3] =
                SFR_FLAGS.map(|(bit, name)| if flags & bit != 0 { name } else { "" });
            let mut expected = [""; 3];
            let mut n = 0;
            for name in joined.iter().filter(|n| !n.is_empty()) {
                expected[n] = name;
                n += 1;
            }
            let label = sfr_flags_label(flags);
            if n == 0 {
                assert_eq!(label, "none");
            } else {
                let mut parts = label.split('+');
                for name in &expected[..n] {
                    assert_eq!(parts.next(), Some(*name), "flags {flags}");
                }
                assert_eq!(parts.next(), None);
            }
        }
        assert_eq!(sfr_flags_label(7), "wait_before+write+wait_after");
        assert_eq!(sfr_flags_label(8), "invalid");
    }
}

/// Names of this family's maps in the eBPF object (aya names a map after its `#[map]` static);
/// `object_names` lists them for the test that checks them against the object.
pub mod maps {
    pub const SYNC_CALL_LATENCY: &str = "SYNC_CALL_LATENCY";
    pub const SYNC_CALL_LATENCY_SLOTS: &str = "SYNC_CALL_LATENCY_SLOTS";
    pub const SYNC_CALL_LATENCY_ANON: &str = "SYNC_CALL_LATENCY_ANON";
    pub const SFR_CALLS: &str = "SFR_CALLS";
    pub const URING_INFLIGHT: &str = "URING_INFLIGHT";
    /// One element, set to 1 by the first msync(MS_SYNC) since load (`sync_calls::msync_dev`).
    pub const MSYNC_SEEN: &str = "MSYNC_SEEN";
}

/// Names of this family's load-time globals in the eBPF object (`#[no_mangle]` statics that the
/// daemon sets before load).
pub mod globals {
    pub const FSYNC_ENTER_FMT: &str = "FSYNC_ENTER_FMT";
    pub const FDATASYNC_ENTER_FMT: &str = "FDATASYNC_ENTER_FMT";
    pub const SFR_ENTER_FMT: &str = "SFR_ENTER_FMT";
    pub const SYNCFS_ENTER_FMT: &str = "SYNCFS_ENTER_FMT";
    pub const MSYNC_ENTER_FMT: &str = "MSYNC_ENTER_FMT";
    pub const EXT4_SYNC_FILE_FMT: &str = "EXT4_SYNC_FILE_FMT";
    pub const XFS_FILE_FSYNC_FMT: &str = "XFS_FILE_FSYNC_FMT";
    pub const IO_URING_LAYOUT: &str = "IO_URING_LAYOUT";
    pub const SYSCALL_ARG_REGS: &str = "SYSCALL_ARG_REGS";
}
