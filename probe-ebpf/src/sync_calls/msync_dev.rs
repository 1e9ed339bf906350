//! The device of an msync(MS_SYNC) call, learned from the filesystem's own fsync event.
//!
//! msync's arguments are an address range: the file behind it is found through the task's VMAs,
//! which a tracepoint program cannot walk cheaply (`bpf_find_vma` needs a callback subprogram and
//! a trusted task pointer; walking `mm->mm_mt` is a maple-tree descent). But MS_SYNC ends in
//! `vfs_fsync_range()` for each shared file mapping in the range, which runs the filesystem's
//! fsync in the calling task, and those emit events with the device:
//! `ext4:ext4_sync_file_enter` (`dev_t dev`, include/trace/events/ext4.h) and
//! `xfs:xfs_file_fsync` (`dev_t dev`, fs/xfs/xfs_trace.h, `DEFINE_INODE_EVENT`). While the task's
//! in-flight sync call is an msync with no device yet, the first such event names it. Other
//! filesystems leave msync's device `unknown`.
//!
//! These events fire for every fsync too, and most hosts never call msync(MS_SYNC): until the
//! first one since load ([`MSYNC_SEEN`], set once and never cleared, so no per-call write to a
//! shared cache line), the programs return after one array load instead of looking up the
//! thread's call in flight.

use aya_ebpf::{
    Global,
    macros::{map, tracepoint},
    maps::Array,
    programs::TracePointContext,
};
use probe_common::{sync_calls::SyncSyscall, sync_calls::layout::FieldFormat};

// `#[used]`: never merged with a promoted constant (see `kernel::globals`).
#[unsafe(no_mangle)]
#[used]
static EXT4_SYNC_FILE_FMT: Global<FieldFormat> = Global::new(FieldFormat {
    offset: 0,
    _reserved: 0,
});

// `#[used]`: never merged with a promoted constant (see `kernel::globals`).
#[unsafe(no_mangle)]
#[used]
static XFS_FILE_FSYNC_FMT: Global<FieldFormat> = Global::new(FieldFormat {
    offset: 0,
    _reserved: 0,
});

/// 1 once an msync(MS_SYNC) has started since load.
#[map]
static MSYNC_SEEN: Array<u32> = Array::with_max_entries(1, 0);

/// An msync(MS_SYNC) starts: from now on the filesystems' fsync events are looked at.
#[inline(always)]
pub(crate) fn msync_started() {
    if let Some(seen) = MSYNC_SEEN.get_ptr_mut(0) {
        // SAFETY: the array's one element, valid for this program run. Read first: after the
        // first msync the line is only ever read, so it stays shared in every CPU's cache.
        unsafe {
            if *seen == 0 {
                *seen = 1;
            }
        }
    }
}

#[inline(always)]
fn msync_seen() -> bool {
    // SAFETY: the array's one element, valid for this program run.
    MSYNC_SEEN
        .get_ptr(0)
        .is_some_and(|seen| unsafe { *seen } != 0)
}

#[tracepoint]
pub fn ext4_sync_file_enter(ctx: TracePointContext) -> u32 {
    fill_msync_dev(&ctx, EXT4_SYNC_FILE_FMT.load().offset);
    0
}

#[tracepoint]
pub fn xfs_file_fsync(ctx: TracePointContext) -> u32 {
    fill_msync_dev(&ctx, XFS_FILE_FSYNC_FMT.load().offset);
    0
}

#[inline(always)]
fn fill_msync_dev(ctx: &TracePointContext, dev_offset: u32) {
    if dev_offset == 0 || !msync_seen() {
        return;
    }
    let tid = crate::kernel::task_storage::hash_tid();
    let Some(start) = crate::kernel::inflight::current(tid) else {
        return;
    };
    // SAFETY: a value pointer of this map, valid for this program run; only this thread writes
    // its own entry.
    let start = unsafe { &mut (*start).start };
    if start.syscall != SyncSyscall::Msync as u32 || start.dev != 0 {
        return;
    }
    // SAFETY: the offset comes from this event's format file (`dev_t`, 4 bytes); read_at copies
    // through bpf_probe_read, which fails instead of faulting.
    if let Ok(dev) = unsafe { ctx.read_at::<u32>(dev_offset as usize) } {
        start.dev = dev;
    }
}
