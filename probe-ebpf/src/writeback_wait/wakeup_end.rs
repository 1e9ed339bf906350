//! The end of a writeback wait at the waiter's wake-up (`tp_btf/sched_wakeup(struct task_struct
//! *p)`), where tracing programs have task storage and the fexit end is unavailable (see the
//! parent module).
//!
//! Why the wake-up and not the waiter's next switch-in: sched_switch runs about 19 times per fio
//! write+fsync, sched_wakeup about 12, and at a switch-in the incoming task's `in_iowait` byte
//! is a line the scheduler has not touched on this CPU (the wake-up read it, often on another
//! CPU): that one load was most of what the sched_switch end cost per run. At the wake-up,
//! `try_to_wake_up()` has just read the task's `in_iowait` (its iowait accounting), so the line
//! is hot. The wait is timed to the moment the waiter became runnable again, which leaves out
//! the run-queue delay after the wake-up that the fexit end includes.
//!
//! `folio_wait_bit()` sleeps in `io_schedule()`, which sets `in_iowait` until the task runs on,
//! so every other wake-up costs a load and a branch. A wait slept if the thread's `nvcsw` moved
//! on by exactly one since the tracepoint: the wake-up of a dequeued task is traced only after
//! its switch-out finished (`try_to_wake_up()` waits for `on_cpu` to clear, or queues the wake-up
//! to run after the switch), and the switch-out counts the voluntary switch before it. A wake-up
//! that overtakes the sleep (the writeback ended between the tracepoint and `schedule()`) finds
//! `nvcsw` unchanged, and that wait, which did not sleep, is dropped; so is one whose thread
//! switched voluntarily more than once since (it did not sleep for this wait).

use aya_ebpf::{helpers::bpf_ktime_get_ns, macros::btf_tracepoint, programs::BtfTracePointContext};
use probe_common::writeback_wait::PendingWait;

use super::{FOLIO_WAIT_LAYOUT, FOLIO_WAIT_TASK, copy_of, ended};
use crate::kernel::{btf_load::load, task_storage};

#[btf_tracepoint(function = "sched_wakeup")]
pub fn folio_wait_end(ctx: BtfTracePointContext) -> u32 {
    let _ = woken(&ctx);
    0
}

/// `sched_wakeup(p)`: task `p` became runnable.
#[inline(always)]
fn woken(ctx: &BtfTracePointContext) -> Option<()> {
    // The daemon attaches this program only where tracing programs have task storage; the
    // check keeps the verifier from seeing the helper where it does not exist.
    if !task_storage::available() {
        return None;
    }
    let task = ctx.arg::<u64>(0);
    let l = FOLIO_WAIT_LAYOUT.load();
    // The verifier allows the offset loads below only after the null check.
    if task == 0 || l.resolved == 0 {
        return None;
    }
    let flags: u8 = load(task, l.task_in_iowait);
    if flags as u32 & l.in_iowait_mask == 0 {
        return None;
    }
    // A task without any BPF storage has no wait: one load instead of a helper call.
    if task_storage::none_on(task, l.task_bpf_storage) {
        return None;
    }
    let wait: *mut PendingWait = task_storage::get(&FOLIO_WAIT_TASK, task, false)?;
    // SAFETY: a task storage value pointer, valid for this program run; only the thread's own
    // tracepoint and its wake-up touch it, and the thread is not running its tracepoint while
    // it is being woken from the wait.
    let wait = unsafe { &mut *wait };
    if wait.start_ns == 0 {
        return None;
    }
    let ended_wait = copy_of(wait);
    wait.start_ns = 0;
    if load::<u64>(task, l.task_nvcsw) != ended_wait.nvcsw.wrapping_add(1) {
        return None;
    }
    let tid = load::<u32>(task, l.task_pid);
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let t = unsafe { bpf_ktime_get_ns() };
    ended(task, tid, &ended_wait, t)
}
