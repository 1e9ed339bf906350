//! Per-process totals for `wbscope top`: time in sync calls and dirty-throttling pauses by
//! thread group. Updated by `sync_calls` at a call's exit and by `dirty_throttle` at each pause,
//! i.e. once per operation that is already being timed; never read in the kernel.
//!
//! The map is an LRU hash keyed by tgid, so a host with many short-lived processes cannot fill
//! it: the least recently active process is forgotten first. Its values are per CPU (the daemon
//! adds them up), so threads of one process on different CPUs never write one cache line: plain
//! adds, no atomics.

use aya_ebpf::{helpers::bpf_get_current_pid_tgid, macros::map, maps::LruPerCpuHashMap};
use probe_common::top_processes::{ProcStats, TOP_PROCESSES_MAX};

/// Totals by tgid. Read by the daemon for `GET /top/processes`.
#[map]
static TOP_PROCESSES: LruPerCpuHashMap<u32, ProcStats> =
    LruPerCpuHashMap::with_max_entries(TOP_PROCESSES_MAX, 0);

/// The current process spent `ns` in a sync call that just returned; `pid_tgid` is the
/// current task's (the caller already fetched it: a helper call saved).
#[inline(always)]
pub fn add_sync(ns: u64, pid_tgid: u64) {
    if let Some(p) = entry(pid_tgid) {
        // SAFETY: this CPU's value of a per-CPU map, valid for this program run.
        unsafe {
            (*p).sync_call_ns += ns;
            (*p).sync_calls += 1;
        }
    }
}

/// The current process is about to be paused `ns` in balance_dirty_pages.
#[inline(always)]
pub fn add_throttle(ns: u64) {
    if let Some(p) = entry(bpf_get_current_pid_tgid()) {
        // SAFETY: as in `add_sync`.
        unsafe { (*p).throttle_ns += ns };
    }
}

/// The current process's entry (`pid_tgid`: the current task's), created with zero totals on
/// first use. The name is taken where this CPU's value has none yet (its creation, or the
/// process's first operation on this CPU), not on every operation: `bpf_get_current_comm` is a
/// helper call and a 16-byte copy, and a process that renames itself later keeps the name it had
/// (`wbscope top` shows the name of a thread that made timed calls).
#[inline(always)]
fn entry(pid_tgid: u64) -> Option<*mut ProcStats> {
    let tgid = (pid_tgid >> 32) as u32;
    if let Some(p) = TOP_PROCESSES.get_ptr_mut(&tgid) {
        // SAFETY: this CPU's value of a per-CPU map, valid for this program run.
        unsafe {
            if (*p).comm[0] == 0 {
                (*p).comm = crate::kernel::current_task::comm();
            }
        }
        return Some(p);
    }
    let fresh = ProcStats {
        sync_call_ns: 0,
        throttle_ns: 0,
        sync_calls: 0,
        comm: crate::kernel::current_task::comm(),
    };
    // BPF_NOEXIST: a thread of the same process that inserted first (on another CPU) keeps its
    // entry; this CPU's value of it is zero then, and is the one returned.
    let _ = TOP_PROCESSES.insert(&tgid, &fresh, 1);
    TOP_PROCESSES.get_ptr_mut(&tgid)
}
