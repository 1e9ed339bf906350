//! Time tasks spend asleep waiting on folios under writeback, by device.
//!
//! `tp_btf/folio_wait_writeback(struct folio *, struct address_space *)` fires in
//! mm/page-writeback.c `folio_wait_writeback()` (and `folio_wait_writeback_killable()`) once per
//! loop iteration, right before `folio_wait_bit(folio, PG_writeback)` (or its killable
//! variant); the tracepoint has no end event. The wait ends in one of three ways, the first the
//! kernel allows:
//! - **fexit** (`fexit_end`), where the kernel accepts fexit and tracing programs have task
//!   storage: at the return of that `folio_wait_bit()` / `folio_wait_bit_killable()` of the same
//!   folio and bit. Exact, and nothing runs on context switches or wake-ups.
//! - **sched_wakeup** (`wakeup_end`), where tracing programs have task storage (5.13+): at the
//!   waiter's wake-up from the wait's I/O sleep.
//! - **sched_switch** elsewhere (5.10, this module): from the tracepoint to the task's next
//!   switch-in after the wait's sleep:
//!   - at the tracepoint, store `{ts, dev}` for the thread;
//!   - `tp_btf/sched_switch(preempt, prev, next, prev_state)` with prev == that thread and
//!     `prev_state & TASK_UNINTERRUPTIBLE` within [`MAX_GAP_NS`] of CPU time after the
//!     tracepoint: it went to sleep for the wait, mark it; a switch-out in any other sleeping
//!     state, or much later, means the wait did not sleep (writeback ended first): drop the
//!     entry; a preemption (state 0) keeps it, and the gap is measured again from the thread's
//!     next switch-in, so a busy run queue cannot make a real wait look like a missed one;
//!   - sched_switch with next == that thread and marked: duration = now − ts (it includes the
//!     run-queue delay after the wake-up, which the waiter suffers too).
//!
//! All ends take only waits that slept. With task storage the tracepoint stores the thread's
//! `nvcsw` (voluntary context switches): a wait whose `nvcsw` did not move did not sleep, and the
//! wait's sleep is the first voluntary switch after the tracepoint. The one case this can take
//! for a wait is a wait that did not sleep followed, without any voluntary switch between, by
//! another I/O sleep (a flush or a read); the switch-out rule of the hash path (a D-state sleep
//! within 1 ms of CPU time) takes the same case. A wait ends by clearing `start_ns`, with no map
//! update. On 5.10 it lives in a hash by thread id, and sched_switch exits after one read of a
//! global counter of pending entries while no wait is pending, and otherwise looks a thread up
//! in the hash only if a per-bucket counter says it may have an entry. Kernels before 5.18 have
//! no `prev_state` argument; `prev_state` reads the task's state there.

mod fexit_end;
mod prev_state;
mod wakeup_end;

use aya_ebpf::{
    Global,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{btf_tracepoint, map},
    maps::{Array, HashMap, PerCpuHashMap},
    programs::BtfTracePointContext,
};
use probe_common::{
    hist::Log2Hist,
    map_overflow,
    writeback_wait::{FolioWaitLayout, PendingWait},
};

use crate::{
    hist::{record, value_or_insert},
    kernel::{
        atomic,
        btf_load::load,
        current_task,
        fd_dev::dev_of_typed_inode,
        task_storage::{self, task_storage},
    },
};

/// Struct offsets from BTF and the TASK_UNINTERRUPTIBLE bit, resolved by the daemon.
// `#[used]`: see kernel/globals.rs; without it LLVM may merge equal constants into this global.
#[used]
#[unsafe(no_mangle)]
pub static FOLIO_WAIT_LAYOUT: Global<FolioWaitLayout> = Global::new(FolioWaitLayout {
    mapping_host: 0,
    task_pid: 0,
    task_uninterruptible: 0,
    resolved: 0,
    task_bpf_storage: 0,
    task_nvcsw: 0,
    task_in_iowait: 0,
    in_iowait_mask: 0,
    pg_writeback: 0,
    _reserved: 0,
});

/// A switch-out in D state this long after the tracepoint (counting only time on the CPU) is not
/// the wait's sleep: the folio's writeback had ended before `folio_wait_bit` could sleep, and the
/// task blocked on something else later. The gap between the two is normally a few microseconds.
const MAX_GAP_NS: u64 = 1_000_000;

/// `BPF_NOEXIST`: the entry is new only if the insert creates it, which keeps the pending
/// counter exact.
const BPF_NOEXIST: u64 = 1;

task_storage! {
    /// The wait in progress of each thread (task storage kernels); `start_ns == 0`: none.
    pub(crate) static FOLIO_WAIT_TASK: FolioWaitTaskDef<PendingWait>;
}

/// Waits in progress by thread id (kernels without task storage for tracing programs). A plain hash, not LRU: an evicted entry would leave the
/// pending counter too high forever. Every entry goes away at its thread's next switch-out or
/// switch-in, so the map cannot fill with stale entries.
#[map]
static FOLIO_WAITS: HashMap<u32, PendingWait> = HashMap::with_max_entries(16384, 0);

/// Number of entries in [`FOLIO_WAITS`], updated atomically; sched_switch reads only this while
/// it is 0.
#[map]
static FOLIO_WAITS_PENDING: Array<u64> = Array::with_max_entries(1, 0);

/// Number of buckets in [`FOLIO_WAIT_BUCKETS`]; a power of two, so a thread's bucket is a mask.
const BUCKETS: u32 = 4096;

/// Entries of [`FOLIO_WAITS`] by thread-id bucket (`tid % BUCKETS`), updated atomically with the
/// pending counter. Under an fsync-heavy load some wait is pending most of the time, so
/// sched_switch would otherwise look up both threads of every switch in the hash; an array
/// element (inlined by the verifier into a plain load) rules out almost all of them first.
#[map]
static FOLIO_WAIT_BUCKETS: Array<u64> = Array::with_max_entries(BUCKETS, 0);

/// Wait-duration histograms by kernel dev_t. Feeds `wbscope_writeback_wait_duration_seconds`.
#[map]
static WRITEBACK_WAIT: PerCpuHashMap<u32, Log2Hist> = PerCpuHashMap::with_max_entries(1024, 0);

#[btf_tracepoint(function = "folio_wait_writeback")]
pub fn folio_wait_writeback(ctx: BtfTracePointContext) -> u32 {
    let _ = try_folio_wait_writeback(&ctx);
    0
}

#[btf_tracepoint(function = "sched_switch")]
pub fn folio_wait_sched_switch(ctx: BtfTracePointContext) -> u32 {
    let _ = try_sched_switch(&ctx);
    0
}

/// The `n`th tp_btf argument as a plain number, loaded straight from the context (`n` must be a
/// constant at every call site: the verifier accepts only constant context offsets).
#[inline(always)]
fn arg_u64(ctx: &BtfTracePointContext, n: usize) -> Option<u64> {
    Some(ctx.arg::<u64>(n))
}

#[inline(always)]
fn now() -> u64 {
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    unsafe { bpf_ktime_get_ns() }
}

/// Keeps the pending counter and `tid`'s bucket in step with the map (`delta` is 1 or wrapping
/// −1).
#[inline(always)]
fn count(tid: u32, delta: u64) {
    if let Some(ptr) = FOLIO_WAITS_PENDING.get_ptr_mut(0) {
        atomic::add(ptr, delta);
    }
    if let Some(ptr) = FOLIO_WAIT_BUCKETS.get_ptr_mut(tid & (BUCKETS - 1)) {
        atomic::add(ptr, delta);
    }
}

/// Whether `tid` may have an entry: false only if none of its bucket's threads has one.
#[inline(always)]
fn may_wait(tid: u32) -> bool {
    FOLIO_WAIT_BUCKETS
        .get(tid & (BUCKETS - 1))
        .is_some_and(|n| *n != 0)
}

/// Removes `tid`'s entry and keeps the counters in step with the map.
#[inline(always)]
fn forget(tid: u32) {
    if FOLIO_WAITS.remove(&tid).is_ok() {
        count(tid, u64::MAX); // wrapping −1
    }
}

/// The kernel dev_t of `mapping`'s inode: its filesystem's, or the device's own for block device
/// inodes (the shared inode → device resolution, `kernel::fd_dev`).
#[inline(always)]
fn dev_of_mapping(l: &FolioWaitLayout, mapping: u64) -> Option<u32> {
    // The verifier types the argument as a maybe-null trusted pointer and allows the offset
    // arithmetic below only after this check.
    if mapping == 0 {
        return None;
    }
    dev_of_typed_inode(load(mapping, l.mapping_host))
}

#[inline(always)]
fn try_folio_wait_writeback(ctx: &BtfTracePointContext) -> Option<()> {
    let l = FOLIO_WAIT_LAYOUT.load();
    if l.resolved == 0 {
        return None;
    }
    let folio = arg_u64(ctx, 0).unwrap_or(0);
    let dev = arg_u64(ctx, 1)
        .and_then(|mapping| dev_of_mapping(&l, mapping))
        .unwrap_or(0);
    let t = now();
    let mut wait = PendingWait {
        start_ns: t,
        on_cpu_since_ns: t,
        dev,
        sleeping: 0,
        cgroup_id: crate::cgroups::current_id(),
        nvcsw: 0,
        folio,
    };
    if task_storage::available() {
        // Task storage implies a typed current task: fetched once for both uses.
        let task = current_task::Current::get()?;
        wait.nvcsw = task.member::<u64>(l.task_nvcsw)?;
        // A not-yet-slept wait of this thread (e.g. it was preempted) is replaced by this one.
        let v: *mut PendingWait = task_storage::get(&FOLIO_WAIT_TASK, task.typed_ptr(), true)?;
        // SAFETY: a task storage value pointer, valid for this program run.
        unsafe { store(v, &wait) };
        return Some(());
    }
    // Only the hash is keyed by thread id: the helper call is not made where task storage is.
    let tid = bpf_get_current_pid_tgid() as u32;
    if FOLIO_WAITS.insert(&tid, &wait, BPF_NOEXIST).is_ok() {
        count(tid, 1);
    } else if let Some(existing) = FOLIO_WAITS.get_ptr_mut(&tid) {
        // A not-yet-slept entry of this thread (e.g. it was preempted): this wait replaces it.
        // SAFETY: map value pointer, valid for this program run; only this thread's own
        // tracepoint and sched_switch touch its entry.
        unsafe { store(existing, &wait) };
    } else {
        // Neither inserted nor present: the map is full and this wait goes unmeasured.
        crate::hist::count_overflow(map_overflow::FOLIO_WAITS);
    }
    Some(())
}

#[inline(always)]
fn try_sched_switch(ctx: &BtfTracePointContext) -> Option<()> {
    // Where tracing programs have task storage the waits end at the wake-up (`wakeup_end`)
    // and this program is not attached; the check keeps the hash path the only one verified.
    if task_storage::available() {
        return None;
    }
    // The early exit: one map read while nothing is pending.
    if *FOLIO_WAITS_PENDING.get(0)? == 0 {
        return None;
    }
    let l = FOLIO_WAIT_LAYOUT.load();
    let prev = ctx.arg::<u64>(1);
    let prev_tid = load::<u32>(prev, l.task_pid);
    // A switch-out in any state other than running (a preemption) may be the wait's sleep.
    if may_wait(prev_tid)
        && let Some(wait) = FOLIO_WAITS.get_ptr_mut(&prev_tid)
    {
        let prev_state = prev_state::prev_state(ctx, prev)?;
        // SAFETY: map value pointer, valid for this program run.
        let wait = unsafe { &mut *wait };
        if prev_state != 0 {
            let slept_for_it = prev_state & l.task_uninterruptible != 0
                && wait.sleeping == 0
                && now().saturating_sub(wait.on_cpu_since_ns) <= MAX_GAP_NS;
            if slept_for_it {
                wait.sleeping = 1;
            } else {
                forget(prev_tid);
            }
        }
    }
    let next = ctx.arg::<u64>(2);
    let next_tid = load::<u32>(next, l.task_pid);
    if !may_wait(next_tid) {
        return None;
    }
    let t = now();
    let wait_ptr = FOLIO_WAITS.get_ptr_mut(&next_tid)?;
    // SAFETY: map value pointer, valid for this program run.
    let wait = unsafe { &mut *wait_ptr };
    if wait.sleeping == 0 {
        // Back on the CPU after a preemption between the tracepoint and the sleep.
        wait.on_cpu_since_ns = t;
        return None;
    }
    let wait = copy_of(wait);
    forget(next_tid);
    ended(next, next_tid, &wait, t)
}

/// Writes `wait` to the value at `dst` member by member. A whole-struct copy of this size is
/// lowered to a call of a byte-loop `memcpy` on BPF: four instructions a byte, and refused by
/// 5.10's verifier ("invalid size of register fill").
///
/// # Safety
/// `dst` must be a map or task storage value pointer valid for this program run.
#[inline(always)]
unsafe fn store(dst: *mut PendingWait, wait: &PendingWait) {
    // SAFETY: the caller's pointer is valid and aligned; each write is one member.
    unsafe {
        core::ptr::write_volatile(&raw mut (*dst).start_ns, wait.start_ns);
        core::ptr::write_volatile(&raw mut (*dst).on_cpu_since_ns, wait.on_cpu_since_ns);
        core::ptr::write_volatile(&raw mut (*dst).dev, wait.dev);
        core::ptr::write_volatile(&raw mut (*dst).sleeping, wait.sleeping);
        core::ptr::write_volatile(&raw mut (*dst).cgroup_id, wait.cgroup_id);
        core::ptr::write_volatile(&raw mut (*dst).nvcsw, wait.nvcsw);
        core::ptr::write_volatile(&raw mut (*dst).folio, wait.folio);
    }
}

/// The value at `src` read member by member, for the reason [`store`] gives.
#[inline(always)]
pub(crate) fn copy_of(src: &PendingWait) -> PendingWait {
    let src: *const PendingWait = src;
    // SAFETY: `src` comes from a reference, so every member is readable.
    unsafe {
        PendingWait {
            start_ns: core::ptr::read_volatile(&raw const (*src).start_ns),
            on_cpu_since_ns: core::ptr::read_volatile(&raw const (*src).on_cpu_since_ns),
            dev: core::ptr::read_volatile(&raw const (*src).dev),
            sleeping: core::ptr::read_volatile(&raw const (*src).sleeping),
            cgroup_id: core::ptr::read_volatile(&raw const (*src).cgroup_id),
            nvcsw: core::ptr::read_volatile(&raw const (*src).nvcsw),
            folio: core::ptr::read_volatile(&raw const (*src).folio),
        }
    }
}

/// Thread `tid` (task `task`, being switched in at `t`) ends `wait`: the stall breakdown and the
/// histogram.
#[inline(always)]
pub(crate) fn ended(task: u64, tid: u32, wait: &PendingWait, t: u64) -> Option<()> {
    let ns = t.saturating_sub(wait.start_ns);
    crate::stall_events::waited(task, tid, wait.dev, wait.start_ns, ns, wait.cgroup_id);
    crate::cgroups::waited(wait.cgroup_id, ns);
    let hist = value_or_insert(
        &WRITEBACK_WAIT,
        &wait.dev,
        &Log2Hist::ZERO,
        map_overflow::WRITEBACK_WAIT,
    )?;
    // SAFETY: this CPU's value in a per-CPU map, valid for the rest of this program run.
    record(unsafe { &mut *hist }, ns);
    Some(())
}
