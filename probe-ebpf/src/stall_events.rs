//! Stall events: operations over the configured threshold, written to the `STALL_EVENTS` ring
//! buffer with the task, the device and a breakdown of where a sync call's time went.
//!
//! The families' own probes call in here at the points where they know a duration (sync call
//! exit, io_uring completion, throttling pause, writeback wait end, journal commit end, block
//! request completion). A duration below the threshold returns after one array lookup: fast
//! operations never touch the ring buffer.
//!
//! Breakdown of a sync call (all per thread id, between its enter and exit):
//! - writeback waits and throttling pauses of the thread are added to its [`OpenCall`], which
//!   lives in the call's in-flight entry (`inflight`);
//! - journal and flush time come from per-device busy clocks ([`DevBusy`], kept by `dev_busy`):
//!   the difference of the clock between the call's start and end is the time during the call in
//!   which a journal commit (resp. at least one flush request) of the call's device was running.
//!
//! The flush clock is updated from any CPU without a lock (BPF spin locks need BTF-described
//! map values, which aya's legacy map definitions do not have): the in-flight count is changed
//! atomically, the start and total may race when two flushes of one device start or end at the
//! same instant; each part is clipped to the call's duration in any case.

mod dev_busy;

use core::mem::MaybeUninit;

use aya_ebpf::{
    helpers::{bpf_get_current_cgroup_id, bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::map,
    maps::{Array, PerCpuArray, RingBuf},
};
use probe_common::{
    stall_events::{
        DevBusy, OpenCall, STALL_RING_BYTES, StallConfig, StallEvent, StallKind, StallLayout,
    },
    writeback::BDI_NAME_LEN,
};

use crate::kernel::{atomic, btf_load::read, globals::load_time, inflight};

/// Offsets from BTF, resolved by the daemon. A plain static rather than an `aya_ebpf::Global`
/// so that the block hooks, which run on every request, can read the two fields they need (see
/// [`stall_layout!`]) instead of copying the whole struct.
// `#[used]`: see kernel/globals.rs; without it LLVM may merge equal constants into this global.
#[used]
#[unsafe(no_mangle)]
static STALL_LAYOUT: StallLayout = StallLayout {
    op_flush: 0,
    task_comm: 0,
    task_tgid: 0,
    resolved: 0,
};

/// One member of [`STALL_LAYOUT`] (see `kernel::globals::load_time`).
macro_rules! stall_layout {
    ($member:ident) => {
        load_time!(STALL_LAYOUT.$member)
    };
}

/// The whole of [`STALL_LAYOUT`], for the probes that need several fields.
#[inline(always)]
fn stall_layout() -> StallLayout {
    // SAFETY: as in `stall_layout!`.
    unsafe { core::ptr::read_volatile(&raw const STALL_LAYOUT) }
}

/// The stall events. Read by the daemon's flight recorder (or `wbscope trace`).
#[map]
static STALL_EVENTS: RingBuf = RingBuf::with_byte_size(STALL_RING_BYTES, 0);

/// Threshold and on/off switch; the daemon writes it after loading and may change it any time.
#[map]
static STALL_CONFIG: Array<StallConfig> = Array::with_max_entries(1, 0);

/// Events lost because the ring buffer was full. Feeds `wbscope_events_dropped_total`.
#[map]
static STALL_DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
fn now() -> u64 {
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    unsafe { bpf_ktime_get_ns() }
}

/// The threshold, or `None` while stall events are off.
#[inline(always)]
fn threshold() -> Option<u64> {
    let c = STALL_CONFIG.get(0)?;
    (c.enabled != 0).then_some(c.threshold_ns)
}

/// The breakdown accumulators of a sync call on `dev` (0: unknown) starting at `start_ns`, kept
/// in the call's in-flight entry (`inflight`).
#[inline(always)]
pub fn open_call(dev: u32, ino: u64, start_ns: u64) -> OpenCall {
    let (journal_at_start, flush_at_start) = match dev_busy::get(dev) {
        // SAFETY: map value pointer, valid for this program run; copied out at once.
        Some(b) => {
            let b = unsafe { *b };
            (b.journal_at(start_ns), b.flush_at(start_ns))
        }
        _ => (0, 0),
    };
    OpenCall {
        ino,
        wb_wait_ns: 0,
        throttle_ns: 0,
        journal_at_start,
        flush_at_start,
    }
}

/// A sync call that began at `start_ns` ends at `end_ns`: an event if it took at least the
/// threshold. `call` is its accumulators (already removed from the in-flight map).
#[inline(always)]
pub fn close_sync(call: &OpenCall, kind: u32, dev: u32, flags: u32, start_ns: u64, end_ns: u64) {
    let Some(limit) = threshold() else {
        return;
    };
    let duration = end_ns.saturating_sub(start_ns);
    if duration < limit {
        return;
    }
    let mut ev = base(kind, dev, start_ns, duration);
    ev.detail = flags;
    ev.ino = call.ino;
    ev.wb_wait_ns = call.wb_wait_ns.min(duration);
    ev.throttle_ns = call.throttle_ns.min(duration);
    if let Some(b) = dev_busy::get(dev) {
        // SAFETY: map value pointer, valid for this program run; copied out at once.
        let b = unsafe { *b };
        // A clock that started after the call (the device's entry was created during it)
        // reads from 0: saturating_sub then counts from the entry's creation.
        ev.journal_ns = b
            .journal_at(end_ns)
            .saturating_sub(call.journal_at_start)
            .min(duration);
        ev.flush_ns = b
            .flush_at(end_ns)
            .saturating_sub(call.flush_at_start)
            .min(duration);
    }
    current_task(&mut ev);
    emit(&ev);
}

/// An io_uring sync request completed (in whichever task posts the completion; the request ran
/// in an io-wq worker, so there is no per-thread breakdown).
#[inline(always)]
pub fn close_uring(kind: u32, dev: u32, flags: u32, start_ns: u64, end_ns: u64) {
    let Some(limit) = threshold() else {
        return;
    };
    let duration = end_ns.saturating_sub(start_ns);
    if duration < limit {
        return;
    }
    let mut ev = base(kind, dev, start_ns, duration);
    ev.detail = flags;
    current_task(&mut ev);
    emit(&ev);
}

/// The current thread is about to sleep `pause_ns` in balance_dirty_pages on `bdi`.
#[inline(always)]
pub fn throttled(pause_ns: u64, bdi: &[u8; BDI_NAME_LEN]) {
    let tid = bpf_get_current_pid_tgid() as u32;
    if let Some(call) = inflight::current(tid) {
        // SAFETY: map value pointer, valid for this program run; only this thread's programs
        // touch its entry.
        unsafe { (*call).open.throttle_ns += pause_ns };
    }
    let Some(limit) = threshold() else {
        return;
    };
    if pause_ns < limit {
        return;
    }
    let t = now();
    let mut ev = base(StallKind::DirtyThrottle as u32, 0, t, pause_ns);
    ev.bdi = *bdi;
    current_task(&mut ev);
    emit(&ev);
}

/// Thread `tid` (task at `task`, being switched in) slept `ns` on a folio under writeback of
/// `dev`, from `start_ns`; `cgroup_id` is the waiter's, taken when the wait began (0 while
/// per-cgroup totals are off: the id costs a helper call on that path).
#[inline(always)]
pub fn waited(task: u64, tid: u32, dev: u32, start_ns: u64, ns: u64, cgroup_id: u64) {
    if let Some(call) = inflight::of(task, tid) {
        // SAFETY: map value pointer, valid for this program run.
        unsafe { (*call).open.wb_wait_ns += ns };
    }
    let Some(limit) = threshold() else {
        return;
    };
    if ns < limit {
        return;
    }
    let l = stall_layout();
    let mut ev = base(StallKind::WritebackWait as u32, dev, start_ns, ns);
    ev.pid = tid;
    ev.cgroup_id = cgroup_id;
    if l.resolved != 0 {
        ev.tgid = read::<u32>(task + l.task_tgid as u64).unwrap_or(0);
        ev.comm = read::<[u8; 16]>(task + l.task_comm as u64).unwrap_or([0; 16]);
    }
    emit(&ev);
}

/// A journal commit of `dev` starts.
#[inline(always)]
pub fn journal_start(dev: u32, t: u64) {
    if let Some(b) = dev_busy::get_or_create(dev) {
        // SAFETY: map value pointer, valid for this program run.
        start_journal_period(unsafe { &mut *b }, t);
    }
}

/// jbd2 transaction `tid` of `dev` starts committing. The device's entry doubles as the commit's
/// start record (see [`DevBusy::journal_tid`]).
#[inline(always)]
pub fn jbd2_commit_start(dev: u32, tid: u32, t: u64) {
    if let Some(b) = dev_busy::get_or_create(dev) {
        // SAFETY: map value pointer, valid for this program run.
        let b = unsafe { &mut *b };
        start_journal_period(b, t);
        b.journal_tid = tid as u64;
    }
}

#[inline(always)]
fn start_journal_period(b: &mut DevBusy, t: u64) {
    if b.journal_since_ns != 0 && t > b.journal_since_ns {
        // A start without an end (missed): close the previous period here.
        b.journal_total_ns += t - b.journal_since_ns;
    }
    b.journal_since_ns = t;
}

/// jbd2 transaction `tid` of `dev` finished committing at `t`: returns when it started, or `None`
/// if its start was not seen (then nothing changes: the next start closes the open period).
#[inline(always)]
pub fn jbd2_commit_end(dev: u32, tid: u32, t: u64) -> Option<u64> {
    let b = dev_busy::get(dev)?;
    // SAFETY: map value pointer, valid for this program run.
    let b = unsafe { &mut *b };
    let started = b.journal_since_ns;
    if started == 0 || b.journal_tid != tid as u64 {
        return None;
    }
    end_journal_period(b, t);
    journal_stall(dev, started, t);
    Some(started)
}

#[inline(always)]
fn end_journal_period(b: &mut DevBusy, t: u64) {
    if b.journal_since_ns != 0 && t > b.journal_since_ns {
        b.journal_total_ns += t - b.journal_since_ns;
    }
    b.journal_since_ns = 0;
}

/// A journal commit of `dev` that started at `start_ns` ends.
#[inline(always)]
pub fn journal_end(dev: u32, start_ns: u64, t: u64) {
    if let Some(b) = dev_busy::get(dev) {
        // SAFETY: map value pointer, valid for this program run.
        end_journal_period(unsafe { &mut *b }, t);
    }
    journal_stall(dev, start_ns, t);
}

/// A stall event for a journal commit of `dev` from `start_ns` to `t`, if it was long enough.
#[inline(always)]
fn journal_stall(dev: u32, start_ns: u64, t: u64) {
    let Some(limit) = threshold() else {
        return;
    };
    let ns = t.saturating_sub(start_ns);
    if ns < limit {
        return;
    }
    let mut ev = base(StallKind::JournalCommit as u32, dev, start_ns, ns);
    current_task(&mut ev);
    emit(&ev);
}

/// A block request of `op` was issued on `dev`.
#[inline(always)]
pub fn block_issued(dev: u32, op: u32, t: u64) {
    if op != stall_layout!(op_flush) || stall_layout!(resolved) == 0 {
        return;
    }
    if let Some(b) = dev_busy::get_or_create(dev) {
        add(b, 1);
        if inflight(b) == 1 {
            // SAFETY: map value pointer, valid for this program run.
            unsafe { (*b).flush_since_ns = t };
        }
    }
}

/// Atomically adds `delta` to the device's flush in-flight count. The BPF target of this build
/// (cpu v1) has atomic add without fetch, so callers read the count back afterwards: two
/// flushes of one device changing it at the same instant may both see the other's update, which
/// at worst shifts a busy period's start or end by that instant.
#[inline(always)]
fn add(b: *mut DevBusy, delta: u64) {
    // SAFETY: only the member's address is taken; `b` is a map value pointer valid for this
    // program run, and the in-flight count is only changed with atomic adds.
    atomic::add(unsafe { &raw mut (*b).flush_inflight }, delta);
}

/// The in-flight count as it is in memory now (another CPU may have changed it).
#[inline(always)]
fn inflight(b: *mut DevBusy) -> u64 {
    // SAFETY: as in `add`.
    atomic::read(unsafe { &raw const (*b).flush_inflight })
}

/// A block request of `op` on `dev`, issued at `issued`, completed at `t`.
#[inline(always)]
pub fn block_completed(dev: u32, op: u32, issued: u64, t: u64) {
    if op == stall_layout!(op_flush)
        && stall_layout!(resolved) != 0
        && let Some(b) = dev_busy::get(dev)
    {
        add(b, u64::MAX); // wrapping −1
        let left = inflight(b);
        // SAFETY: map value pointer, valid for this program run.
        let busy = unsafe { &mut *b };
        if left > u32::MAX as u64 {
            // Wrapped below 0: a flush issued before the probes were attached. Undo.
            add(b, 1);
        } else if left == 0 && t > busy.flush_since_ns {
            busy.flush_total_ns += t - busy.flush_since_ns;
        }
    }
    let Some(limit) = threshold() else {
        return;
    };
    let ns = t.saturating_sub(issued);
    if ns < limit {
        return;
    }
    let mut ev = base(StallKind::BlockRequest as u32, dev, issued, ns);
    ev.detail = op;
    // The completing task is rarely the submitter (interrupt, driver or loop worker): no task.
    emit_quietly(&ev);
}

/// A [`StallEvent`] in 8-byte words.
const EVENT_WORDS: usize = core::mem::size_of::<StallEvent>() / 8;
const _: () = assert!(core::mem::size_of::<StallEvent>().is_multiple_of(8));

/// An event with these fields and every other one zero. The zeroes are written as volatile
/// 8-byte stores: written as a struct literal, LLVM turns the runs of zero fields into `memset`
/// calls, which on BPF are byte loops (about 450 instructions for this struct), run for every
/// event, and on a slow device every block request is one.
#[inline(always)]
fn base(kind: u32, dev: u32, start_ns: u64, duration_ns: u64) -> StallEvent {
    let mut ev = MaybeUninit::<StallEvent>::uninit();
    let words = ev.as_mut_ptr().cast::<u64>();
    for i in 0..EVENT_WORDS {
        // SAFETY: `i < EVENT_WORDS`, so the store is inside the event, which is 8-byte aligned (it
        // starts with a u64) and a whole number of words long (asserted above).
        unsafe { core::ptr::write_volatile(words.add(i), 0) };
    }
    // SAFETY: every byte was written above, and all-zero is a valid `StallEvent` (integers and
    // byte arrays only).
    let mut ev = unsafe { ev.assume_init() };
    ev.start_ns = start_ns;
    ev.duration_ns = duration_ns;
    ev.kind = kind;
    ev.dev = dev;
    ev
}

#[inline(always)]
fn current_task(ev: &mut StallEvent) {
    let pid_tgid = bpf_get_current_pid_tgid();
    ev.pid = pid_tgid as u32;
    ev.tgid = (pid_tgid >> 32) as u32;
    ev.comm = crate::kernel::current_task::comm();
    // SAFETY: bpf_get_current_cgroup_id has no preconditions.
    ev.cgroup_id = unsafe { bpf_get_current_cgroup_id() };
}

/// `BPF_RB_NO_WAKEUP` and `BPF_RB_FORCE_WAKEUP` (include/uapi/linux/bpf.h, UAPI).
const RB_NO_WAKEUP: u64 = 1;
const RB_FORCE_WAKEUP: u64 = 2;
/// `BPF_RB_AVAIL_DATA`: bytes committed and not yet consumed.
const RB_AVAIL_DATA: u64 = 0;

/// How a block request's event is committed: without waking the daemon, which also drains the
/// ring every second (`STALL_DRAIN_INTERVAL` on its side). A wake-up is an irq_work and,
/// when the reader sleeps on another CPU, an inter-processor interrupt, which in a VM cost
/// microseconds per event in a storm of slow requests (on a saturated device every completion
/// over the threshold is an event). Only a ring a quarter full wakes the reader at once, so a
/// storm cannot fill it between two drains. The other kinds, one per slow call or wait, always
/// wake the reader (`BPF_RB_FORCE_WAKEUP`): the kernel's default wakes it only when it has read
/// everything before the event, which quiet block events may not have been.
#[inline(always)]
fn quiet_wakeup() -> u64 {
    if STALL_EVENTS.query(RB_AVAIL_DATA) >= STALL_RING_BYTES as u64 / 4 {
        RB_FORCE_WAKEUP
    } else {
        RB_NO_WAKEUP
    }
}

#[inline(always)]
fn emit(ev: &StallEvent) {
    emit_with(ev, RB_FORCE_WAKEUP);
}

/// [`emit`] for block requests: see [`quiet_wakeup`].
#[inline(always)]
fn emit_quietly(ev: &StallEvent) {
    emit_with(ev, quiet_wakeup());
}

#[inline(always)]
fn emit_with(ev: &StallEvent, flags: u64) {
    match STALL_EVENTS.reserve::<StallEvent>(0) {
        Some(mut entry) => {
            // Copied word by word with volatile loads and stores: a plain copy lets LLVM see
            // through to the zero fields and fill them with byte-loop `memset` calls (see
            // `base`).
            let dst = entry.as_mut_ptr().cast::<u64>();
            let src = (ev as *const StallEvent).cast::<u64>();
            for i in 0..EVENT_WORDS {
                // SAFETY: `i < EVENT_WORDS`: both accesses are inside an event (the reserved
                // entry, sized for one, and `ev`), both 8-byte aligned (a StallEvent starts with
                // a u64; ring buffer entries are 8-byte aligned).
                unsafe {
                    core::ptr::write_volatile(dst.add(i), core::ptr::read_volatile(src.add(i)))
                };
            }
            entry.submit(flags);
        }
        None => {
            if let Some(drops) = STALL_DROPS.get_ptr_mut(0) {
                // SAFETY: this CPU's element of a per-CPU array, valid for this program run.
                unsafe { *drops += 1 };
            }
        }
    }
}
