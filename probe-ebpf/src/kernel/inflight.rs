//! The sync call each thread has in flight: its start and its stall-breakdown accumulators
//! (`InflightSync`), written at the call's enter, read and ended at its exit, and read in
//! between by the probes that attribute work to the call (writeback submissions, waits,
//! throttling, msync's device).
//!
//! In task storage where the kernel allows it ([`task_storage::available`]): one value per
//! thread, reused by each of its calls, with `start.start_ns == 0` meaning "no call in flight";
//! enter and exit then do one task storage get each and no map update. Elsewhere (5.10) in an
//! LRU hash keyed by thread id, one insert at enter and one delete at exit; LRU so that enters
//! whose exit is never seen (attach races, a thread killed in the call) cannot fill it. Task
//! storage needs no such bound: a thread's value goes away with the thread.

use aya_ebpf::{macros::map, maps::LruHashMap};
use probe_common::stall_events::InflightSync;

use super::task_storage::{self, task_storage};

task_storage! {
    /// Calls in flight, per thread (task storage kernels).
    static SYNC_TASK: SyncTaskDef<InflightSync>;
}

/// Calls in flight by thread id (kernels without task storage for tracing programs).
#[map]
static SYNC_INFLIGHT: LruHashMap<u32, InflightSync> = LruHashMap::with_max_entries(16384, 0);

/// The call in flight of the current thread `tid`.
#[inline(always)]
pub fn current(tid: u32) -> Option<*mut InflightSync> {
    of(0, tid)
}

/// The call in flight of thread `tid`, whose BTF-typed task is `task` (0: the current task).
#[inline(always)]
pub fn of(task: u64, tid: u32) -> Option<*mut InflightSync> {
    if task_storage::available() {
        let v: *mut InflightSync = task_storage::get(&SYNC_TASK, task, false)?;
        // SAFETY: a task storage value pointer, valid for this program run.
        (unsafe { (*v).start.start_ns } != 0).then_some(v)
    } else {
        SYNC_INFLIGHT.get_ptr_mut(&tid)
    }
}

/// The current thread `tid`, whose BTF-typed task is `task` (0: fetch it), starts `call`
/// (replacing one whose exit was missed).
#[inline(always)]
pub fn begin(task: u64, tid: u32, call: &InflightSync) {
    if task_storage::available() {
        if let Some(v) = task_storage::get::<_, InflightSync>(&SYNC_TASK, task, true) {
            // SAFETY: a task storage value pointer, valid for this program run; only this
            // thread's own programs write its value.
            unsafe { *v = *call };
        }
    } else {
        let _ = SYNC_INFLIGHT.insert(&tid, call, 0);
    }
}

/// Ends the current thread `tid`'s call in flight and returns it.
#[inline(always)]
pub fn take(tid: u32) -> Option<InflightSync> {
    if task_storage::available() {
        let v: *mut InflightSync = task_storage::get(&SYNC_TASK, 0, false)?;
        // SAFETY: a task storage value pointer, valid for this program run; copied out before
        // it is marked ended.
        let call = unsafe { *v };
        if call.start.start_ns == 0 {
            return None;
        }
        // SAFETY: as above.
        unsafe { (*v).start.start_ns = 0 };
        Some(call)
    } else {
        let entry = SYNC_INFLIGHT.get_ptr(&tid)?;
        // SAFETY: a value pointer of this map, valid for this program run; copied out before
        // the entry is removed.
        let call = unsafe { *entry };
        let _ = SYNC_INFLIGHT.remove(&tid);
        Some(call)
    }
}
