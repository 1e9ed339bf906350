//! The state `tp_btf/sched_switch` switched the previous task out in, on kernels with and
//! without the `prev_state` argument.
//!
//! Since 5.18 the hook is `sched_switch(preempt, prev, next, prev_state)`, where `prev_state`
//! is `prev->__state` as `__schedule()` read it. Before, it is `sched_switch(preempt, prev,
//! next)`, and a program that reads a fourth argument is refused by the verifier. There the
//! state is read from `prev` itself (`__state` since 5.14, `state` before). On every kernel a
//! preemption (`preempt`, argument #0) counts as state 0: the task was not put to sleep. The daemon picks the
//! source in [`PREV_STATE_SOURCE`], a frozen global, so the verifier visits only the branch
//! this kernel's prototype allows.
//!
//! The member read happens a little later than `__schedule()`'s own: a waker on another CPU may
//! already have set the task `TASK_WAKING`. Such a wait is then not recognised as a sleep and is
//! not counted; it was a short one.

use aya_ebpf::{Global, programs::BtfTracePointContext};
use probe_common::writeback_wait::PrevStateSource;

use crate::kernel::btf_load::load;

// `#[used]`: never merged with a promoted constant (see `kernel::globals`).
#[unsafe(no_mangle)]
#[used]
static PREV_STATE_SOURCE: Global<PrevStateSource> = Global::new(PrevStateSource {
    from_arg: 0,
    task_state: 0,
    task_state_size: 0,
    resolved: 0,
});

/// The state `prev` (argument #1 of `ctx`, BTF-typed) was switched out in; `None` when the
/// daemon resolved no source.
#[inline(always)]
pub fn prev_state(ctx: &BtfTracePointContext, prev: u64) -> Option<u32> {
    let s = PREV_STATE_SOURCE.load();
    if s.resolved == 0 {
        return None;
    }
    if ctx.arg::<u64>(0) & 0xff != 0 {
        // Preempted: the task stays on the run queue whatever its state says (it may have set
        // TASK_UNINTERRUPTIBLE just before, on its way to sleep).
        return Some(0);
    }
    if s.from_arg != 0 {
        return Some(ctx.arg::<u64>(3) as u32);
    }
    Some(if s.task_state_size == 8 {
        // `volatile long state`: the flag bits are in the low word.
        load::<u64>(prev, s.task_state) as u32
    } else {
        load::<u32>(prev, s.task_state)
    })
}
