//! Per-process totals for `wbscope top`: time in sync calls and dirty-throttling pauses by
//! thread group. Updated by `sync_calls` at a call's exit and by `dirty_throttle` at each pause,
//! i.e. once per operation that is already being timed; never read in the kernel.
//!
//! Each CPU keeps its most recent process's totals in a per-CPU array element
//! ([`TOP_PROCESS_RECENT`]); only when another process makes a timed operation on that CPU are
//! they added to the table ([`TOP_PROCESSES`]) and the element started over for the new one. A
//! database's fsyncs, one process calling again and again, then cost an inlined array load
//! instead of an LRU hash lookup per call (profiled: the lookup was a third of
//! `sys_exit_fsync`'s time). The daemon adds each CPU's element to its process's row, so
//! nothing waits for a fold to be seen.
//!
//! The table is an LRU hash keyed by tgid, so a host with many short-lived processes cannot fill
//! it: the least recently active process is forgotten first. Its values are per CPU (the daemon
//! adds them up), so threads of one process on different CPUs never write one cache line: plain
//! adds, no atomics.

use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid,
    macros::map,
    maps::{LruPerCpuHashMap, PerCpuArray},
};
use probe_common::top_processes::{ProcStats, RecentProcess, TOP_PROCESSES_MAX};

/// Totals by tgid, of the processes that are no CPU's most recent any more. Read by the daemon
/// for `GET /top/processes`.
#[map]
static TOP_PROCESSES: LruPerCpuHashMap<u32, ProcStats> =
    LruPerCpuHashMap::with_max_entries(TOP_PROCESSES_MAX, 0);

/// Each CPU's most recent process and its totals not yet in [`TOP_PROCESSES`].
#[map]
static TOP_PROCESS_RECENT: PerCpuArray<RecentProcess> = PerCpuArray::with_max_entries(1, 0);

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

/// This CPU's totals of the current process (`pid_tgid`: the current task's): the recent
/// element, after moving another process's totals out of it. The name is taken when the process
/// becomes this CPU's most recent (`bpf_get_current_comm` is a helper call and a 16-byte copy);
/// a process that renames itself later keeps the name it had then.
#[inline(always)]
fn entry(pid_tgid: u64) -> Option<*mut ProcStats> {
    let tgid = (pid_tgid >> 32) as u32;
    let recent = TOP_PROCESS_RECENT.get_ptr_mut(0)?;
    // SAFETY: this CPU's element of a per-CPU array, valid for this program run; only this CPU
    // writes it (programs do not nest on one CPU for these hooks).
    let recent = unsafe { &mut *recent };
    if recent.tgid != tgid {
        // Copied out and started over before the fold: a reader in between misses the old
        // totals for a moment rather than counting them twice.
        let previous = *recent;
        recent.stats = ProcStats {
            sync_call_ns: 0,
            throttle_ns: 0,
            sync_calls: 0,
            comm: crate::kernel::current_task::comm(),
        };
        recent.tgid = tgid;
        if previous.tgid != 0 {
            fold(previous.tgid, &previous.stats);
        }
    }
    Some(&raw mut recent.stats)
}

/// Adds `stats` (this CPU's, of process `tgid`) to the table.
#[inline(always)]
fn fold(tgid: u32, stats: &ProcStats) {
    if let Some(p) = TOP_PROCESSES.get_ptr_mut(&tgid) {
        add_into(p, stats);
        return;
    }
    // BPF_NOEXIST: a thread of the same process that inserted first (on another CPU) keeps its
    // entry; this CPU's value of it is zero then (no name yet), and the totals are added to it.
    if TOP_PROCESSES.insert(&tgid, stats, 1).is_ok() {
        return;
    }
    if let Some(p) = TOP_PROCESSES.get_ptr_mut(&tgid) {
        add_into(p, stats);
    }
}

/// Adds `stats` to this CPU's value `p` of the table, which keeps the name it has (none only
/// where the value was created zero by another CPU's insert).
#[inline(always)]
fn add_into(p: *mut ProcStats, stats: &ProcStats) {
    // SAFETY: this CPU's value of a per-CPU map, valid for this program run.
    let p = unsafe { &mut *p };
    p.sync_call_ns += stats.sync_call_ns;
    p.throttle_ns += stats.throttle_ns;
    p.sync_calls += stats.sync_calls;
    if p.comm[0] == 0 {
        p.comm = stats.comm;
    }
}
