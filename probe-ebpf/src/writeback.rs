//! Flusher writeback work: queued items, executed items with their duration, pages written.
//!
//! Classic tracepoints of `writeback_work_class` (include/trace/events/writeback.h):
//! `writeback_queue`, `writeback_exec`, `writeback_start`, `writeback_written`, plus
//! `writeback_pages_written(long pages)` at the end of each `wb_do_writeback` pass.
//!
//! A work item's life, tracked per flusher thread (a flusher runs one item at a time; in task
//! storage where the kernel allows it, else by thread id):
//! `exec` (queued items only) → `start`/`written` per `wb_writeback` iteration → next item or
//! `pages_written`. On-stack items (periodic, background, sync's start-all) have no `exec`, and
//! consecutive ones may even share a stack address, so an item also ends when `start` shows
//! different work fields (sync mode, reason, kupdate/background/cyclic bits, sb).
//!
//! `nr_pages` in these records is the item's *remaining budget*, so pages written by one
//! iteration are `nr_pages@start − nr_pages@written`; summing `nr_pages` would be wrong.

use aya_ebpf::{
    Global,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{map, tracepoint},
    maps::{LruHashMap, PerCpuHashMap},
    programs::TracePointContext,
};
use probe_common::map_overflow;
use probe_common::writeback::{BDI_NAME_LEN, FlusherItem, NO_CLAIM, WbKey, WbStats, WbWorkFormat};

use crate::{
    hist::{record, value_or_insert},
    kernel::task_storage::{self, task_storage},
};

pub(crate) mod register;

// `#[used]`: never merged with a promoted constant (see `kernel::globals`).
#[unsafe(no_mangle)]
#[used]
static WB_WORK_FMT: Global<WbWorkFormat> = Global::new(WbWorkFormat {
    name: 0,
    nr_pages: 0,
    sb_dev: 0,
    sync_mode: 0,
    for_kupdate: 0,
    range_cyclic: 0,
    for_background: 0,
    reason: 0,
});

/// Aggregates by (bdi, sync mode, reason). Feeds the `wbscope_writeback_*` work metrics.
#[map]
static WB_WORK_STATS: PerCpuHashMap<WbKey, WbStats> = PerCpuHashMap::with_max_entries(1024, 0);

/// The item each flusher thread is executing, where task storage is not. LRU: flusher threads
/// come and go with devices.
#[map]
static FLUSHER_ITEMS: LruHashMap<u32, FlusherItem> = LruHashMap::with_max_entries(4096, 0);

task_storage! {
    /// The item each flusher thread is executing, in its task storage where the kernel allows
    /// it (`open == 0`: none); no insert or delete per item.
    static FLUSHER_ITEM_TASK: FlusherItemTaskDef<FlusherItem>;
}

/// The open item of flusher thread `tid` (the current thread); also read by the device-write
/// attribution of the flusher's bios.
#[inline(always)]
pub(crate) fn open_item_of(tid: u32) -> Option<*mut FlusherItem> {
    open_item_of_task(0, tid)
}

/// [`open_item_of`] for the BTF-typed task `task` (0: the current task), thread id `tid`.
#[inline(always)]
pub(crate) fn open_item_of_task(task: u64, tid: u32) -> Option<*mut FlusherItem> {
    if task_storage::available() {
        let v: *mut FlusherItem = task_storage::get(&FLUSHER_ITEM_TASK, task, false)?;
        // SAFETY: a task storage value pointer, valid for this program run.
        return (unsafe { (*v).open } != 0).then_some(v);
    }
    FLUSHER_ITEMS.get_ptr_mut(&tid)
}

/// The fields of one `writeback_work_class` record that wbscope uses.
struct WorkRecord {
    key: WbKey,
    sb_dev: u32,
    kind_bits: u32,
    nr_pages: i64,
}

#[inline(always)]
fn read_field<T>(ctx: &TracePointContext, offset: u32) -> Option<T> {
    // SAFETY: offsets come from the running kernel's format file for this event class, and
    // read_at copies through bpf_probe_read, which fails instead of faulting.
    unsafe { ctx.read_at::<T>(offset as usize) }.ok()
}

#[inline(always)]
fn read_work(ctx: &TracePointContext) -> Option<WorkRecord> {
    let f = WB_WORK_FMT.load();
    if f.nr_pages == 0 {
        return None;
    }
    // The name is copied to the stack with one fixed-size read and cut at its NUL without
    // per-byte branches (a byte loop with branches explodes the verifier's state count). The
    // kernel pads it today, but a key must never carry stale bytes after the NUL.
    let raw: [u64; 2] = read_field(ctx, f.name)?;
    let low_mask = bytes_before_nul(raw[0]);
    let high_mask = if low_mask == u64::MAX {
        bytes_before_nul(raw[1])
    } else {
        0
    };
    let low = (raw[0] & low_mask).to_le_bytes();
    let high = (raw[1] & high_mask).to_le_bytes();
    let mut bdi = [0u8; BDI_NAME_LEN];
    bdi[..8].copy_from_slice(&low);
    bdi[8..].copy_from_slice(&high);
    let sync_mode: i32 = read_field(ctx, f.sync_mode)?;
    let reason: i32 = read_field(ctx, f.reason)?;
    let for_kupdate: i32 = read_field(ctx, f.for_kupdate)?;
    let for_background: i32 = read_field(ctx, f.for_background)?;
    let range_cyclic: i32 = read_field(ctx, f.range_cyclic)?;
    Some(WorkRecord {
        key: WbKey {
            bdi,
            sync_mode: sync_mode as u32,
            reason: reason as u32,
        },
        sb_dev: read_field(ctx, f.sb_dev)?,
        kind_bits: (for_kupdate != 0) as u32
            | ((for_background != 0) as u32) << 1
            | ((range_cyclic != 0) as u32) << 2,
        nr_pages: read_field(ctx, f.nr_pages)?,
    })
}

/// Mask of the bytes (little-endian) before the first NUL of `word`; all ones if it has none.
/// Classic zero-byte test: the lowest flagged bit is exact (later flags may be false positives,
/// which do not matter here).
#[inline(always)]
fn bytes_before_nul(word: u64) -> u64 {
    let zeros = word.wrapping_sub(0x0101_0101_0101_0101) & !word & 0x8080_8080_8080_8080;
    if zeros == 0 {
        return u64::MAX;
    }
    let lowest = zeros.isolate_lowest_one();
    (lowest >> 7).wrapping_sub(1)
}

#[inline(always)]
fn stats(key: &WbKey) -> Option<&'static mut WbStats> {
    let ptr = value_or_insert(
        &WB_WORK_STATS,
        key,
        &WbStats::ZERO,
        map_overflow::WB_WORK_STATS,
    )?;
    // SAFETY: this CPU's value in a per-CPU map, valid for the rest of this program run.
    Some(unsafe { &mut *ptr })
}

#[inline(always)]
fn now() -> u64 {
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    unsafe { bpf_ktime_get_ns() }
}

#[inline(always)]
fn flusher_tid() -> u32 {
    bpf_get_current_pid_tgid() as u32
}

/// Ends the item the flusher `tid` was executing: counts it and records its duration.
#[inline(always)]
fn finish_item(tid: u32) {
    let Some(p) = open_item_of(tid) else {
        return;
    };
    // SAFETY: a map or task storage value pointer, valid for this program run; copied out
    // before the item is closed.
    let item = unsafe { *p };
    if task_storage::available() {
        // SAFETY: as above.
        unsafe { (*p).open = 0 };
    } else {
        let _ = FLUSHER_ITEMS.remove(&tid);
    }
    register::release(register::current(), &item);
    crate::flusher_work::finished(tid);
    if item.started == 0 || item.t_last_written < item.t_first_start {
        return;
    }
    if let Some(s) = stats(&item.key) {
        s.works += 1;
        record(&mut s.duration, item.t_last_written - item.t_first_start);
    }
}

#[inline(always)]
fn open_item(tid: u32, w: &WorkRecord) {
    let item = FlusherItem {
        key: w.key,
        sb_dev: w.sb_dev,
        kind_bits: w.kind_bits,
        started: 0,
        in_iteration: 0,
        t_first_start: 0,
        t_last_written: 0,
        iteration_nr_pages: 0,
        open: 1,
        register: NO_CLAIM,
    };
    if task_storage::available() {
        if let Some(v) = task_storage::get::<_, FlusherItem>(&FLUSHER_ITEM_TASK, 0, true) {
            // SAFETY: a task storage value pointer, valid for this program run; only this
            // flusher thread touches its own value.
            unsafe { *v = item };
        }
    } else {
        let _ = FLUSHER_ITEMS.insert(&tid, &item, 0);
    }
    // The register claim is taken on the stored item only: the item's close (`finish_item`,
    // which finds it there) gives the claim back, so an item that could not be stored must hold
    // none, or its thread would stay the slot's owner and its later bios pass for flusher work.
    if let Some(stored) = open_item_of(tid) {
        // SAFETY: as above; only this flusher thread touches its own item.
        register::claim(register::current(), unsafe { &mut *stored });
    }
    crate::flusher_work::executing(tid, &w.key, w.sb_dev, w.kind_bits);
}

#[inline(always)]
fn same_work(item: &FlusherItem, w: &WorkRecord) -> bool {
    item.key == w.key && item.sb_dev == w.sb_dev && item.kind_bits == w.kind_bits
}

#[tracepoint]
pub fn writeback_queue(ctx: TracePointContext) -> u32 {
    if let Some(w) = read_work(&ctx) {
        crate::flusher_work::queued(&w.key, w.sb_dev, w.kind_bits);
        if let Some(s) = stats(&w.key) {
            s.queued += 1;
        }
    }
    0
}

#[tracepoint]
pub fn writeback_exec(ctx: TracePointContext) -> u32 {
    if let Some(w) = read_work(&ctx) {
        let tid = flusher_tid();
        finish_item(tid);
        open_item(tid, &w);
    }
    0
}

#[tracepoint]
pub fn writeback_start(ctx: TracePointContext) -> u32 {
    let Some(w) = read_work(&ctx) else {
        return 0;
    };
    let tid = flusher_tid();
    let matches = match open_item_of(tid) {
        // SAFETY: map or task storage value pointer, valid for this program run.
        Some(item) => same_work(unsafe { &*item }, &w),
        None => false,
    };
    if !matches {
        finish_item(tid);
        open_item(tid, &w);
    }
    let Some(item) = open_item_of(tid) else {
        return 0;
    };
    // SAFETY: map or task storage value pointer, valid for this program run; only this flusher
    // thread touches its own entry.
    let item = unsafe { &mut *item };
    let t = now();
    if item.started == 0 {
        item.started = 1;
        item.t_first_start = t;
    }
    item.in_iteration = 1;
    item.iteration_nr_pages = w.nr_pages;
    0
}

#[tracepoint]
pub fn writeback_written(ctx: TracePointContext) -> u32 {
    let Some(w) = read_work(&ctx) else {
        return 0;
    };
    let tid = flusher_tid();
    let Some(item) = open_item_of(tid) else {
        return 0;
    };
    // SAFETY: as in writeback_start.
    let item = unsafe { &mut *item };
    if item.in_iteration == 0 || !same_work(item, &w) {
        return 0;
    }
    item.in_iteration = 0;
    item.t_last_written = now();
    let pages = item.iteration_nr_pages - w.nr_pages;
    if pages > 0 {
        crate::flusher_work::written(tid, pages as u64);
        if let Some(s) = stats(&w.key) {
            s.written_pages += pages as u64;
        }
    }
    0
}

#[tracepoint]
pub fn writeback_pages_written(_ctx: TracePointContext) -> u32 {
    finish_item(flusher_tid());
    0
}
