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
//! Cost per bio: a load of `current->flags` (the task's first cache line; the name, read only
//! for kernel threads that are neither the flusher nor workqueue workers, is far into the task
//! and cost a cache miss on most bios when every bio read it), one per-thread lookup (task
//! storage where the kernel has it, else a hash) and one per-CPU array slot update (the hash on
//! a slot collision, see `probe_common::slots`): no shared cache line is written. The
//! benchmark measures the total against the same runs with the family disabled.

use aya_ebpf::{
    Global,
    helpers::bpf_get_current_pid_tgid,
    macros::map,
    maps::{PerCpuArray, PerCpuHashMap},
};
use probe_common::device_writes::{
    DevWriteKey, DevWriteLayout, DevWriteStats, NO_WORK, PF_IO_WORKER, PF_KTHREAD, PF_WQ_WORKER,
    WriteSource, counts_as_written,
};
use probe_common::map_overflow;
use probe_common::slots::{SLOT_COUNT, Slot};

use crate::{
    hist::slot_or_insert,
    kernel::{btf_load::load, current_task, inflight, task_storage},
    writeback,
};

// `#[used]`: never merged with a promoted constant (see `kernel::globals`).
#[unsafe(no_mangle)]
#[used]
static DEV_WRITE_LAYOUT: Global<DevWriteLayout> = Global::new(DevWriteLayout {
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
});

/// Bytes and bios by [`DevWriteKey`]. Feeds `wbscope_device_write_bytes_total` and
/// `wbscope_device_write_bios_total`.
#[map]
static DEVICE_WRITES: PerCpuHashMap<DevWriteKey, DevWriteStats> =
    PerCpuHashMap::with_max_entries(2048, 0);

/// The slots in front of [`DEVICE_WRITES`] (`probe_common::slots`): a host's few busy keys are
/// counted without a hash lookup.
#[map]
static DEVICE_WRITE_SLOTS: PerCpuArray<Slot<DevWriteStats>> =
    PerCpuArray::with_max_entries(SLOT_COUNT, 0);

/// Little-endian head of a jbd2 thread's name (`jbd2/<dev>-8`): the one source told by name,
/// read only for kernel threads that are neither the flusher nor workqueue workers.
const JBD2_PREFIX: u64 = u32::from_le_bytes(*b"jbd2") as u64 | (b'/' as u64) << 32;

/// Called by `block_bio_queue` for every bio with its partition device and `req_op` value.
/// Counts the ops `/sys/block/*/stat` counts as written sectors.
#[inline(always)]
pub fn bio_queued(bio: u64, dev: u32, op: u32) {
    let l = DEV_WRITE_LAYOUT.load();
    if l.resolved == 0 || !counts_as_written(op, &l) {
        return;
    }
    let bytes: u32 = load(bio, l.bio_bi_size);
    let key = source_key(bio, dev, &l);
    if let Some(s) = slot_or_insert(
        &DEVICE_WRITE_SLOTS,
        &DEVICE_WRITES,
        &key,
        &DevWriteStats::ZERO,
        map_overflow::DEVICE_WRITES,
    ) {
        // SAFETY: this CPU's value in a per-CPU map, valid for the rest of this program run.
        let s = unsafe { &mut *s };
        s.bytes += bytes as u64;
        s.bios += 1;
    }
}

#[inline(always)]
fn source_key(bio: u64, dev: u32, l: &DevWriteLayout) -> DevWriteKey {
    let mut key = DevWriteKey {
        dev,
        source: WriteSource::Other as u8,
        sync_mode: NO_WORK,
        reason: NO_WORK,
        _reserved: 0,
    };
    // One helper call for the task; every member after it is a load.
    let task = current_task::Current::get();
    // An unreadable task counts as a kernel thread.
    let flags = task
        .and_then(|t| t.member::<u32>(l.task_flags))
        .unwrap_or(PF_KTHREAD);
    let typed = task.map_or(0, |t| t.typed_ptr());
    key.source = if flags & PF_KTHREAD == 0 {
        if let Some(call) = may_have_storage(task, l)
            .then(|| inflight::of(typed, hash_tid()))
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
        // The flusher runs its work items in a workqueue (`bdi_wq`), so only a workqueue
        // worker that has per-thread storage at all may be executing one.
        if let Some(item) = may_have_storage(task, l)
            .then(|| writeback::open_item_of_task(typed, hash_tid()))
            .flatten()
        {
            // SAFETY: a map or task storage value pointer, valid for this program run.
            let item = unsafe { &*item };
            key.sync_mode = item.key.sync_mode.min(NO_WORK as u32 - 1) as u8;
            key.reason = item.key.reason.min(NO_WORK as u32 - 1) as u8;
            WriteSource::Flusher
        } else if throttled(bio, l) {
            WriteSource::Throttled
        } else {
            WriteSource::Kworker
        }
    } else if flags & PF_IO_WORKER != 0 {
        // io-wq workers were kernel threads before 5.12.
        WriteSource::IoUring
    } else {
        // The first 8 bytes of the thread's name, little-endian: one load.
        let head = task.and_then(|t| t.member::<u64>(l.task_comm)).unwrap_or(0);
        if head & 0xff_ffff_ffff == JBD2_PREFIX {
            WriteSource::Journal
        } else {
            WriteSource::Other
        }
    } as u8;
    key
}

/// The thread id, only where per-thread state is keyed by it (5.10); task storage needs none,
/// and a helper call per bio is saved.
#[inline(always)]
fn hash_tid() -> u32 {
    if task_storage::available() {
        0
    } else {
        bpf_get_current_pid_tgid() as u32
    }
}

/// False when the current task has no BPF task storage at all (`task_struct.bpf_storage` is
/// null): one load instead of a task storage get that would find nothing. Always true where
/// per-thread state lives in hashes (5.10) or the member is not known.
#[inline(always)]
fn may_have_storage(task: Option<current_task::Current>, l: &DevWriteLayout) -> bool {
    !task_storage::available()
        || l.task_bpf_storage == 0
        || task.and_then(|t| t.member::<u64>(l.task_bpf_storage)) != Some(0)
}

/// Whether blk-throttle held `bio` back and its worker dispatched it (`BIO_BPS_THROTTLED`).
#[inline(always)]
fn throttled(bio: u64, l: &DevWriteLayout) -> bool {
    if l.bps_throttled_bit >= 16 {
        return false;
    }
    let flags: u16 = load(bio, l.bio_bi_flags);
    flags & (1 << l.bps_throttled_bit) != 0
}
