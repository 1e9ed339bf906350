//! Journal commits (jbd2) and XFS log writes: layout globals, map keys.

use crate::user_pod;

/// Field offsets of `jbd2:jbd2_start_commit` / `jbd2_end_commit` (`jbd2_commit` class:
/// `dev_t dev; char sync_commit; tid_t transaction;`) and of `xfs:xlog_iclog_sync` /
/// `xlog_iclog_sync_done` (`xlog_iclog_class`: `dev_t dev; …; unsigned long long lsn;`).
/// Zero means "not resolved".
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JournalFormat {
    pub jbd2_dev: u32,
    pub jbd2_tid: u32,
    pub xlog_dev: u32,
    pub xlog_lsn: u32,
}
const _: () = assert!(core::mem::size_of::<JournalFormat>() == 16);

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

/// Name of the load-time global holding [`JournalFormat`].
pub const JOURNAL_FMT: &str = "JOURNAL_FMT";
