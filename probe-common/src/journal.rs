//! Journal commits (jbd2) and XFS log writes: layout globals, map keys.

use crate::user_pod;

/// Where the probes find a commit's device and id.
///
/// jbd2 (`tp_btf/jbd2_start_commit` / `jbd2_end_commit`, `(journal_t *, transaction_t *)`,
/// a prototype the daemon checks in BTF): member offsets from BTF for
/// `journal->j_fs_dev->bd_dev` and `transaction->t_tid` (what the classic `jbd2_commit` records
/// hold). XFS: field offsets of `xfs:xlog_iclog_sync` / `xlog_iclog_sync_done`
/// (`xlog_iclog_class`: `dev_t dev; …; unsigned long long lsn;`). Zero offsets of a pair mean
/// "not resolved"; `jbd2_resolved` is non-zero once the jbd2 part is.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JournalFormat {
    /// `journal_t.j_fs_dev`, `block_device.bd_dev`, `transaction_t.t_tid`.
    pub journal_j_fs_dev: u32,
    pub bdev_bd_dev: u32,
    pub transaction_t_tid: u32,
    pub jbd2_resolved: u32,
    pub xlog_dev: u32,
    pub xlog_lsn: u32,
}
const _: () = assert!(core::mem::size_of::<JournalFormat>() == 24);

/// Which journal a commit belongs to. Discriminants are part of the map ABI.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JournalKind {
    Jbd2 = 1,
    XfsLog = 2,
}

impl JournalKind {
    pub fn from_raw(raw: u32) -> Option<JournalKind> {
        match raw {
            1 => Some(JournalKind::Jbd2),
            2 => Some(JournalKind::XfsLog),
            _ => None,
        }
    }
}

/// A commit in flight: which journal, device, and its id (jbd2 tid or XFS log sequence number).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CommitKey {
    pub kind: u32,
    pub dev: u32,
    pub id: u64,
}
const _: () = assert!(core::mem::size_of::<CommitKey>() == 16);

/// Aggregation key of commit durations.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct JournalKey {
    pub kind: u32,
    pub dev: u32,
}
const _: () = assert!(core::mem::size_of::<JournalKey>() == 8);

user_pod!(JournalFormat, CommitKey, JournalKey);

/// Names of this family's load-time globals in the eBPF object (`#[no_mangle]` statics that the
/// daemon sets before load).
pub mod globals {
    /// Holds [`super::JournalFormat`].
    pub const JOURNAL_FMT: &str = "JOURNAL_FMT";
}

/// Names of this family's maps in the eBPF object (aya names a map after its `#[map]` static);
/// `object_names` lists them for the test that checks them against the object.
pub mod maps {
    pub const COMMITS_INFLIGHT: &str = "COMMITS_INFLIGHT";
    pub const JOURNAL_COMMIT_LATENCY: &str = "JOURNAL_COMMIT_LATENCY";
}
