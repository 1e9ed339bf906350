//! Device write I/O by writeback source: bytes and bios of every write bio, counted where
//! `block_bio_queue` sees it, by (device, source, flusher sync mode, flusher reason).
//!
//! The source is read from the submitting context, with what other families already keep per
//! thread and the task's `flags`: a user task is inside a sync call (`inflight`: fsync,
//! fdatasync, sync_file_range, syncfs, sync, msync), is an io-wq worker (`PF_IO_WORKER`), or
//! writes on its own (`direct`); a kernel thread is executing flusher work
//! (`writeback::open_item_of`, which carries the item's sync mode and reason), is another
//! workqueue worker (`PF_WQ_WORKER`: `kworker`, or `throttled` for a bio blk-throttle held
//! back), a jbd2 thread (`journal`, told by its name) or something else (`other`).
//!
//! `block_bio_queue` fires in `submit_bio_noacct_nocheck()`, after blk-throttle: a bio that a
//! throttle rule (cgroup `io.max`, v1 `blkio.throttle.*`) holds back is traced when the throttle
//! worker dispatches it; it counts as `throttled` (`BIO_BPS_THROTTLED`), its submitter unknown
//! (see docs/kernel-hooks.md).
//!
//! The attribution is part of the block family's bio key (`probe_common::block::BioKey`), so a
//! bio updates one per-CPU counter for both families; this module only says whom the bio is for.
//!
//! Cost per bio: a load of `current->flags` (the task's first cache line; the name, read only
//! for kernel threads that are neither the flusher nor workqueue workers, is far into the task
//! and cost a cache miss on most bios when every bio read it), and then at most one per-thread
//! lookup: task storage (else a hash) for a user task; the flusher register
//! (`writeback::register`, two loads of a line that changes a few times a second) for a
//! workqueue worker, its task storage only where the register cannot tell. No shared cache line
//! is written. The benchmark measures the total against the same runs with the family disabled.

use probe_common::device_writes::{
    DevWriteLayout, NO_WORK, PF_IO_WORKER, PF_KTHREAD, PF_WQ_WORKER, WriteSource, counts_as_written,
};

use crate::{
    kernel::{btf_load::load, current_task, globals::load_time, inflight, task_storage},
    writeback::{self, register::Registered},
};

/// Resolved by the daemon from BTF; a plain static read member by member (`load_time!`), since a
/// bio needs only a few of its ten members. `#[used]`: never merged with a promoted constant (see
/// `kernel::globals`).
#[unsafe(no_mangle)]
#[used]
static DEV_WRITE_LAYOUT: DevWriteLayout = DevWriteLayout::ZERO;

/// One member of [`DEV_WRITE_LAYOUT`] (see `kernel::globals::load_time`).
macro_rules! layout {
    ($member:ident) => {
        load_time!(DEV_WRITE_LAYOUT.$member)
    };
}

/// Little-endian head of a jbd2 thread's name (`jbd2/<dev>-8`): the one source told by name,
/// read only for kernel threads that are neither the flusher nor workqueue workers.
const JBD2_PREFIX: u64 = u32::from_le_bytes(*b"jbd2") as u64 | (b'/' as u64) << 32;

/// Whom a bio of `req_op` value `op` was submitted for, for the ops `/sys/block/*/stat` counts
/// as written sectors (else `None`, as while the family is off: its layout stays unresolved).
#[derive(Clone, Copy)]
pub struct Attribution {
    /// A raw [`WriteSource`].
    pub source: u8,
    /// The flusher item's raw sync mode and reason ([`NO_WORK`] unless the source is the
    /// flusher).
    pub sync_mode: u8,
    pub reason: u8,
    /// `bio->bi_iter.bi_size`.
    pub bytes: u32,
}

/// Called by `block_bio_queue` for every bio.
#[inline(always)]
pub fn attribute(bio: u64, op: u32) -> Option<Attribution> {
    if layout!(resolved) == 0
        || !counts_as_written(op, layout!(op_discard), layout!(op_secure_erase))
    {
        return None;
    }
    let mut who = Attribution {
        source: WriteSource::Other as u8,
        sync_mode: NO_WORK,
        reason: NO_WORK,
        bytes: load(bio, layout!(bio_bi_size)),
    };
    // One helper call for the task; every member after it is a load.
    let task = current_task::Current::get();
    // An unreadable task counts as a kernel thread.
    let flags = task
        .and_then(|t| t.member::<u32>(layout!(task_flags)))
        .unwrap_or(PF_KTHREAD);
    let typed = task.map_or(0, |t| t.typed_ptr());
    who.source = if flags & PF_KTHREAD == 0 {
        if let Some(call) = may_have_storage(task)
            .then(|| inflight::of(typed, task_storage::hash_tid()))
            .flatten()
        {
            // SAFETY: a map or task storage value pointer, valid for this program run.
            let raw = unsafe { (*call).start.syscall };
            WriteSource::for_raw_syscall(raw)
        } else if flags & PF_IO_WORKER != 0 {
            WriteSource::IoUring
        } else {
            WriteSource::Direct
        }
    } else if flags & PF_WQ_WORKER != 0 {
        // The flusher runs its work items in a workqueue (`bdi_wq`); the register answers for
        // most workers from the task's address, the worker's own item for the rest.
        if let Some((sync_mode, reason)) = flusher_item(task, typed) {
            who.sync_mode = sync_mode.min(NO_WORK as u32 - 1) as u8;
            who.reason = reason.min(NO_WORK as u32 - 1) as u8;
            WriteSource::Flusher
        } else if throttled(bio) {
            WriteSource::Throttled
        } else {
            WriteSource::Kworker
        }
    } else if flags & PF_IO_WORKER != 0 {
        // io-wq workers were kernel threads before 5.12.
        WriteSource::IoUring
    } else {
        // The first 8 bytes of the thread's name, little-endian: one load.
        let head = task
            .and_then(|t| t.member::<u64>(layout!(task_comm)))
            .unwrap_or(0);
        if head & 0xff_ffff_ffff == JBD2_PREFIX {
            WriteSource::Journal
        } else {
            WriteSource::Other
        }
    } as u8;
    Some(who)
}

/// The `(sync_mode, reason)` of the flusher work item the current workqueue worker executes, if
/// any: from the flusher register (`writeback::register`) where it knows, else from the
/// worker's own item, and then only if the worker has per-thread storage at all.
#[inline(always)]
fn flusher_item(task: Option<current_task::Current>, typed: u64) -> Option<(u32, u32)> {
    match writeback::register::lookup_current() {
        Registered::Item(sync_mode, reason) => Some((sync_mode, reason)),
        Registered::NoItem => None,
        Registered::Unknown => {
            let item = may_have_storage(task)
                .then(|| writeback::open_item_of_task(typed, task_storage::hash_tid()))
                .flatten()?;
            // SAFETY: a map or task storage value pointer, valid for this program run.
            let item = unsafe { &*item };
            Some((item.key.sync_mode, item.key.reason))
        }
    }
}

/// False when the current task has no BPF task storage at all (`task_struct.bpf_storage` is
/// null): one load instead of a task storage get that would find nothing. Always true where
/// per-thread state lives in hashes (5.10) or the member is not known.
#[inline(always)]
fn may_have_storage(task: Option<current_task::Current>) -> bool {
    let offset = layout!(task_bpf_storage);
    !task_storage::available()
        || offset == 0
        || task.and_then(|t| t.member::<u64>(offset)) != Some(0)
}

/// Whether blk-throttle held `bio` back and its worker dispatched it (`BIO_BPS_THROTTLED`).
#[inline(always)]
fn throttled(bio: u64) -> bool {
    let bit = layout!(bps_throttled_bit);
    if bit >= 16 {
        return false;
    }
    let flags: u16 = load(bio, layout!(bio_bi_flags));
    flags & (1 << bit) != 0
}
