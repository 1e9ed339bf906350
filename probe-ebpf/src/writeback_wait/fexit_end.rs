//! The end of a writeback wait at the return of the `folio_wait_bit()` it sleeps in (fexit),
//! where the kernel accepts fexit and tracing programs have task storage: no program runs on
//! wake-ups or context switches then (see the parent module).
//!
//! `folio_wait_writeback()` calls `folio_wait_bit(folio, PG_writeback)` right after its
//! tracepoint, `folio_wait_writeback_killable()` calls `folio_wait_bit_killable(folio,
//! PG_writeback)` (before 5.16: `wait_on_page_bit` and `wait_on_page_bit_killable`, with the page
//! instead of the folio). Both functions also serve other bits (`PG_locked` for page-cache reads)
//! and other callers, so a return ends the thread's pending wait only if it is for the same
//! folio and `PG_writeback`. A pending wait whose thread did not switch voluntarily in between
//! (`nvcsw` unchanged) did not sleep (the writeback ended first) and is dropped, as the other
//! ends drop it; one that slept is timed to the return, which includes the run-queue delay
//! after the wake-up, as the 5.10 sched_switch end's does (the wake-up end's does not).

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::fexit,
    programs::FExitContext,
};
use probe_common::writeback_wait::PendingWait;

use super::{FOLIO_WAIT_LAYOUT, FOLIO_WAIT_TASK, copy_of, ended};
use crate::kernel::{btf_load::load, current_task, task_storage};

#[fexit]
pub fn folio_wait_bit_exit(ctx: FExitContext) -> u32 {
    let _ = returned(&ctx);
    0
}

#[fexit]
pub fn folio_wait_bit_killable_exit(ctx: FExitContext) -> u32 {
    let _ = returned(&ctx);
    0
}

/// `folio_wait_bit{,_killable}(folio, bit_nr)` returned in the current thread.
#[inline(always)]
fn returned(ctx: &FExitContext) -> Option<()> {
    let l = FOLIO_WAIT_LAYOUT.load();
    if l.resolved == 0 || l.pg_writeback == 0 {
        return None;
    }
    let folio: u64 = ctx.arg(0);
    let bit: u64 = ctx.arg(1);
    if bit as u32 != l.pg_writeback {
        return None;
    }
    // Typed: the daemon attaches this program only where tracing programs have task storage
    // (5.13+), which implies `bpf_get_current_task_btf` (5.11+).
    let task = current_task::Current::get()?.typed_ptr();
    // A thread without any BPF storage has no wait.
    if task == 0 || task_storage::none_on(task, l.task_bpf_storage) {
        return None;
    }
    let wait: *mut PendingWait = task_storage::get(&FOLIO_WAIT_TASK, task, false)?;
    // SAFETY: a task storage value pointer, valid for this program run; only the thread's own
    // programs touch it.
    let wait = unsafe { &mut *wait };
    if wait.start_ns == 0 || wait.folio != folio {
        return None;
    }
    let ended_wait = copy_of(wait);
    wait.start_ns = 0;
    if load::<u64>(task, l.task_nvcsw) == ended_wait.nvcsw {
        return None; // it did not sleep
    }
    let tid = bpf_get_current_pid_tgid() as u32;
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let t = unsafe { bpf_ktime_get_ns() };
    ended(task, tid, &ended_wait, t)
}
