//! Device write I/O by writeback source: bytes and bios of every write bio, counted where
//! `block_bio_queue` sees it, by (device, source, flusher sync mode, flusher reason).
//!
//! The source is read from the submitting context, with what other families already keep per
//! thread: a user task is inside a sync call (`inflight`: fsync, fdatasync,
//! sync_file_range, syncfs, sync, msync), is an io-wq worker (`iou-wrk-`), or writes on its own
//! (`direct`); a kernel thread is executing flusher work (`writeback::open_item_of`, which
//! carries the item's sync mode and reason), is a jbd2 thread (`journal`), another workqueue
//! worker (`kworker`, or `throttled` for a bio blk-throttle held back), or something else
//! (`other`).
//!
//! `block_bio_queue` fires in `submit_bio_noacct_nocheck()`, after blk-throttle: a bio that a
//! throttle rule (cgroup `io.max`, v1 `blkio.throttle.*`) holds back is traced when the throttle
//! worker dispatches it; it counts as `throttled` (`BIO_BPS_THROTTLED`), its submitter unknown
//! (see docs/kernel-hooks.md).
//!
//! Cost per bio: loads of `current->mm` (and, when neither map knows the thread, of the first
//! word of `current->comm`), one per-thread lookup (task storage where the kernel has it, else
//! a hash) and one per-CPU array slot update (the hash on a slot collision, see
//! `probe_common::slots`): no shared cache line is written.

use aya_ebpf::{
    Global,
    helpers::bpf_get_current_pid_tgid,
    macros::map,
    maps::{PerCpuArray, PerCpuHashMap},
};
use probe_common::device_writes::{
    DevWriteKey, DevWriteLayout, DevWriteStats, NO_WORK, WriteSource, counts_as_written,
};
use probe_common::map_overflow;
use probe_common::slots::{SLOT_COUNT, Slot};

use crate::{
    hist::slot_or_insert,
    kernel::{btf_load::load, current_task, inflight},
    writeback,
};

// `#[used]`: never merged with a promoted constant (see `kernel::globals`).
#[unsafe(no_mangle)]
#[used]
static DEV_WRITE_LAYOUT: Global<DevWriteLayout> = Global::new(DevWriteLayout {
    bio_bi_size: 0,
    task_mm: 0,
    op_discard: 0,
    op_secure_erase: 0,
    task_comm: 0,
    bio_bi_flags: 0,
    bps_throttled_bit: 0,
    resolved: 0,
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

/// Little-endian heads of thread names: io-wq workers (`iou-wrk-<pid>`), jbd2 threads
/// (`jbd2/<dev>-8`) and workqueue workers (`kworker/…`).
const IO_WQ_PREFIX: u64 = u64::from_le_bytes(*b"iou-wrk-");
const JBD2_PREFIX: u64 = u32::from_le_bytes(*b"jbd2") as u64 | (b'/' as u64) << 32;
const KWORKER_PREFIX: u64 = u64::from_le_bytes(*b"kworker/");

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
    let tid = bpf_get_current_pid_tgid() as u32;
    let mut key = DevWriteKey {
        dev,
        source: WriteSource::Other as u8,
        sync_mode: NO_WORK,
        reason: NO_WORK,
        _reserved: 0,
    };
    // An unreadable task counts as a kernel thread.
    let kernel_thread = current_task::is_kernel_thread(l.task_mm).unwrap_or(true);
    if !kernel_thread {
        if let Some(call) = inflight::current(tid) {
            // SAFETY: a map or task storage value pointer, valid for this program run.
            let raw = unsafe { (*call).start.syscall };
            key.source = WriteSource::for_raw_syscall(raw) as u8;
            return key;
        }
    } else if let Some(item) = writeback::open_item_of(tid) {
        // SAFETY: a map or task storage value pointer, valid for this program run.
        let item = unsafe { &*item };
        key.source = WriteSource::Flusher as u8;
        key.sync_mode = item.key.sync_mode.min(NO_WORK as u32 - 1) as u8;
        key.reason = item.key.reason.min(NO_WORK as u32 - 1) as u8;
        return key;
    }
    // The first 8 bytes of the thread's name, little-endian: one load.
    let head = current_task::member::<u64>(l.task_comm).unwrap_or(0);
    key.source = if !kernel_thread {
        if head == IO_WQ_PREFIX {
            WriteSource::IoUring
        } else {
            WriteSource::Direct
        }
    } else if head & 0xff_ffff_ffff == JBD2_PREFIX {
        WriteSource::Journal
    } else if head == KWORKER_PREFIX {
        if throttled(bio, l) {
            WriteSource::Throttled
        } else {
            WriteSource::Kworker
        }
    } else {
        WriteSource::Other
    } as u8;
    key
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
