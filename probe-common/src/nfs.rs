//! NFS client WRITE and COMMIT RPCs: layout global, map keys and values.

use crate::{hist::Log2Hist, user_pod};

/// Where the NFS probes find their fields: offsets in the records of the `nfs` tracepoints
/// (fs/nfs/nfstrace.h, read from the running kernel's format files) and of
/// `writeback_control.sync_mode` (BTF). Zero offsets of a part mean "not resolved"; the
/// `*_resolved` words are non-zero once a part is.
///
/// - `nfs_initiate_write`: `dev_t dev; …; u64 fileid; loff_t offset; u32 count;
///   unsigned long stable` (the stability the client asks for, `hdr->args.stable`).
/// - `nfs_writeback_done`: `dev_t dev; …; u64 fileid; loff_t offset; …; int error` (the RPC's
///   `tk_status`).
/// - `nfs_initiate_commit`: `dev_t dev; …; u64 fileid; loff_t offset`.
/// - `nfs_commit_done`: `dev_t dev; …; u64 fileid; loff_t offset; int error`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NfsFormat {
    pub write_dev: u32,
    pub write_fileid: u32,
    pub write_offset: u32,
    pub write_count: u32,
    pub write_stable: u32,
    pub write_done_dev: u32,
    pub write_done_fileid: u32,
    pub write_done_offset: u32,
    pub write_done_error: u32,
    pub writes_resolved: u32,
    pub commit_dev: u32,
    pub commit_fileid: u32,
    pub commit_offset: u32,
    pub commit_done_dev: u32,
    pub commit_done_fileid: u32,
    pub commit_done_offset: u32,
    pub commit_done_error: u32,
    pub commits_resolved: u32,
    /// `writeback_control.sync_mode`, read through the BTF-typed `wbc_writepage` argument.
    pub wbc_sync_mode: u32,
    pub wbc_resolved: u32,
}
const _: () = assert!(core::mem::size_of::<NfsFormat>() == 80);

/// `stable_how` values (include/linux/nfs_xdr.h `NFS_UNSTABLE`, `NFS_DATA_SYNC`, `NFS_FILE_SYNC`;
/// the NFS protocol's own numbers, RFC 1813 / RFC 8881).
pub const NFS_UNSTABLE: u32 = 0;
pub const NFS_DATA_SYNC: u32 = 1;
pub const NFS_FILE_SYNC: u32 = 2;

/// The `sync_mode` of a WRITE issued by a thread that was not in a writepages pass.
pub const SYNC_MODE_UNKNOWN: u32 = u32::MAX;

/// WRITE aggregation key: device (the superblock's `dev_t`), requested stability, and the
/// `writeback_control.sync_mode` of the writepages pass that issued it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NfsWriteKey {
    pub dev: u32,
    pub stable: u32,
    pub sync_mode: u32,
    pub _reserved: u32,
}
const _: () = assert!(core::mem::size_of::<NfsWriteKey>() == 16);

/// WRITE requests, the bytes they carried, failed completions and completion latency.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NfsWriteStats {
    pub requests: u64,
    pub bytes: u64,
    pub errors: u64,
    pub _reserved: u64,
    pub latency: Log2Hist,
}
const _: () =
    assert!(core::mem::size_of::<NfsWriteStats>() == 32 + core::mem::size_of::<Log2Hist>());

impl NfsWriteStats {
    pub const ZERO: NfsWriteStats = NfsWriteStats {
        requests: 0,
        bytes: 0,
        errors: 0,
        _reserved: 0,
        latency: Log2Hist::ZERO,
    };

    /// Adds another CPU's copy.
    pub fn merge(&mut self, other: &NfsWriteStats) {
        self.requests = self.requests.wrapping_add(other.requests);
        self.bytes = self.bytes.wrapping_add(other.bytes);
        self.errors = self.errors.wrapping_add(other.errors);
        self.latency.merge(&other.latency);
    }
}

/// COMMIT aggregation key: the device.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NfsCommitKey {
    pub dev: u32,
    pub _reserved: u32,
}
const _: () = assert!(core::mem::size_of::<NfsCommitKey>() == 8);

/// COMMIT requests, failed completions and completion latency.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NfsCommitStats {
    pub commits: u64,
    pub errors: u64,
    pub latency: Log2Hist,
}
const _: () =
    assert!(core::mem::size_of::<NfsCommitStats>() == 16 + core::mem::size_of::<Log2Hist>());

impl NfsCommitStats {
    pub const ZERO: NfsCommitStats = NfsCommitStats {
        commits: 0,
        errors: 0,
        latency: Log2Hist::ZERO,
    };

    /// Adds another CPU's copy.
    pub fn merge(&mut self, other: &NfsCommitStats) {
        self.commits = self.commits.wrapping_add(other.commits);
        self.errors = self.errors.wrapping_add(other.errors);
        self.latency.merge(&other.latency);
    }
}

/// An RPC in flight, matched between its initiate and done events: the file and the request's
/// starting offset (`hdr->args.offset` / `data->args.offset`, the same in both records).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NfsRpcId {
    pub dev: u32,
    pub _reserved: u32,
    pub fileid: u64,
    pub offset: u64,
}
const _: () = assert!(core::mem::size_of::<NfsRpcId>() == 24);

/// What the done event needs from the initiate event.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NfsRpcStart {
    pub start_ns: u64,
    pub stable: u32,
    pub sync_mode: u32,
}
const _: () = assert!(core::mem::size_of::<NfsRpcStart>() == 16);

/// The writepages pass a thread is in: its `writeback_control` and that one's sync mode.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NfsWbcMode {
    pub wbc: u64,
    pub sync_mode: u32,
    pub _reserved: u32,
}
const _: () = assert!(core::mem::size_of::<NfsWbcMode>() == 16);

user_pod!(
    NfsFormat,
    NfsWriteKey,
    NfsWriteStats,
    NfsCommitKey,
    NfsCommitStats,
    NfsRpcId,
    NfsRpcStart,
    NfsWbcMode
);

/// Names of this family's load-time globals in the eBPF object (`#[no_mangle]` statics that the
/// daemon sets before load).
pub mod globals {
    /// Holds [`super::NfsFormat`].
    pub const NFS_FMT: &str = "NFS_FMT";
}

/// Names of this family's maps in the eBPF object (aya names a map after its `#[map]` static);
/// `object_names` lists them for the test that checks them against the object.
pub mod maps {
    /// Per-CPU `NfsWriteKey → NfsWriteStats`.
    pub const NFS_WRITES: &str = "NFS_WRITES";
    /// Per-CPU `NfsCommitKey → NfsCommitStats`.
    pub const NFS_COMMITS: &str = "NFS_COMMITS";
    pub const NFS_WRITES_INFLIGHT: &str = "NFS_WRITES_INFLIGHT";
    pub const NFS_COMMITS_INFLIGHT: &str = "NFS_COMMITS_INFLIGHT";
    pub const NFS_PASS_MODE: &str = "NFS_PASS_MODE";
}
