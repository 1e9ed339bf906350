//! Who queued the flusher's work: `writeback_queue` runs in the queuing task, `writeback_exec`
//! in the flusher; the item's fields (`WorkId`) carry the queuer from one to the other. When the
//! flusher finishes an item, one `WorkRecord` (fields, queuer, start, end, pages) goes to the
//! `WORK_RECORDS` ring buffer for the stall context.
//!
//! sync(2) wakes the flusher for its WB_SYNC_NONE pass without queuing a work item
//! (`wakeup_flusher_threads()` → `wb_start_writeback()` sets `WB_start_all`, and the flusher
//! runs the pass as on-stack work): that item's queuer is the last task that entered sync(2),
//! if it did so within `SYNC_QUEUER_NS`. The writeback family calls in here from its own
//! programs (`writeback.rs`), the sync-call family from `sys_enter_sync`.

use aya_ebpf::{
    Global,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::map,
    maps::{Array, LruHashMap, RingBuf},
};
use probe_common::{
    flusher_work::{Queuer, SYNC_QUEUER_NS, WORK_RING_BYTES, WorkId, WorkQueuerLayout, WorkRecord},
    writeback::{WB_SYNC_ALL, WbKey},
};

// `#[used]`: never merged with a promoted constant (see `kernel::globals`).
#[unsafe(no_mangle)]
#[used]
static WORK_QUEUER_LAYOUT: Global<WorkQueuerLayout> = Global::new(WorkQueuerLayout {
    reason_sync: 0,
    resolved: 0,
});

/// The latest queuer of each not-yet-executed item. LRU: items queued but never executed (a
/// bdi going away) make room.
#[map]
static QUEUED_WORK: LruHashMap<WorkId, Queuer> = LruHashMap::with_max_entries(1024, 0);

/// The item each flusher thread executes, with its queuer and pages so far.
#[map]
static RUNNING_WORK: LruHashMap<u32, WorkRecord> = LruHashMap::with_max_entries(1024, 0);

/// The last task that entered sync(2) (slot 0).
#[map]
static LAST_SYNC: Array<Queuer> = Array::with_max_entries(1, 0);

/// Executed work items. Read by the daemon's stall context.
#[map]
static WORK_RECORDS: RingBuf = RingBuf::with_byte_size(WORK_RING_BYTES, 0);

#[inline(always)]
fn now() -> u64 {
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    unsafe { bpf_ktime_get_ns() }
}

#[inline(always)]
fn current_queuer() -> Queuer {
    let pid_tgid = bpf_get_current_pid_tgid();
    Queuer {
        tid: pid_tgid as u32,
        tgid: (pid_tgid >> 32) as u32,
        comm: crate::kernel::current_task::comm(),
        t_ns: now(),
    }
}

#[inline(always)]
fn id(key: &WbKey, sb_dev: u32, kind_bits: u32) -> WorkId {
    WorkId {
        key: *key,
        sb_dev,
        kind_bits,
    }
}

/// `writeback_queue`, in the queuing task.
#[inline(always)]
pub fn queued(key: &WbKey, sb_dev: u32, kind_bits: u32) {
    if WORK_QUEUER_LAYOUT.load().resolved == 0 {
        return;
    }
    let _ = QUEUED_WORK.insert(&id(key, sb_dev, kind_bits), &current_queuer(), 0);
}

/// `sys_enter_sync`, in the task entering sync(2).
#[inline(always)]
pub fn sync_entered() {
    if let Some(slot) = LAST_SYNC.get_ptr_mut(0) {
        // SAFETY: the array's only value, valid for this program run. Two tasks entering
        // sync(2) at the same instant may mix their fields; either is a right answer.
        unsafe { *slot = current_queuer() };
    }
}

/// The flusher thread `tid` starts executing an item (`writeback_exec`, or the first
/// `writeback_start` of on-stack work).
#[inline(always)]
pub fn executing(tid: u32, key: &WbKey, sb_dev: u32, kind_bits: u32) {
    let l = WORK_QUEUER_LAYOUT.load();
    if l.resolved == 0 {
        return;
    }
    let id = id(key, sb_dev, kind_bits);
    let t = now();
    // SAFETY: copied out at once.
    let queuer = match unsafe { QUEUED_WORK.get(&id) }.copied() {
        Some(q) => {
            let _ = QUEUED_WORK.remove(&id);
            q
        }
        None => sync_queuer(&l, key, t).unwrap_or_default(),
    };
    let record = WorkRecord {
        id,
        queuer,
        flusher_tid: tid,
        _reserved: 0,
        start_ns: t,
        end_ns: 0,
        pages: 0,
    };
    let _ = RUNNING_WORK.insert(&tid, &record, 0);
}

/// sync(2)'s start-all pass: WB_SYNC_NONE with reason `sync`, shortly after a sync(2) entry.
#[inline(always)]
fn sync_queuer(l: &WorkQueuerLayout, key: &WbKey, t: u64) -> Option<Queuer> {
    if key.reason != l.reason_sync || key.sync_mode == WB_SYNC_ALL {
        return None;
    }
    let last = *LAST_SYNC.get(0)?;
    (last.tid != 0 && t >= last.t_ns && t - last.t_ns <= SYNC_QUEUER_NS).then_some(last)
}

/// One `writeback_written` iteration of the item flusher `tid` runs wrote `pages`.
#[inline(always)]
pub fn written(tid: u32, pages: u64) {
    if let Some(r) = RUNNING_WORK.get_ptr_mut(&tid) {
        // SAFETY: a value pointer of this map, valid for this program run; only this flusher
        // thread touches its own entry.
        unsafe { (*r).pages += pages };
    }
}

/// The item flusher `tid` ran is over: its record goes to the ring buffer (dropped when the
/// ring is full; the stall context then misses that item).
#[inline(always)]
pub fn finished(tid: u32) {
    // SAFETY: copied out at once; removed right after.
    let Some(mut record) = (unsafe { RUNNING_WORK.get(&tid) }).copied() else {
        return;
    };
    let _ = RUNNING_WORK.remove(&tid);
    record.end_ns = now();
    let _ = WORK_RECORDS.output(&record, 0);
}
