//! Sync-family system calls: ids, label names, map keys and values.

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

    /// The `syscall` label value (METRICS.md).
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

/// A sync call in flight, kept per thread id between `sys_enter` and `sys_exit`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncStart {
    pub start_ns: u64,
    pub syscall: u32,
    pub dev: u32,
}
const _: () = assert!(core::mem::size_of::<SyncStart>() == 16);

user_pod!(SyncKey, SyncStart);

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
}
