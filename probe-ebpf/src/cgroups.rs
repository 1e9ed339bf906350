//! Per-cgroup totals (opt-in): the sync-call, dirty-throttle and writeback-wait probes add each
//! operation's count and time here under the task's cgroup v2 id. See `probe_common::cgroups`.
//!
//! Off by default: every entry point starts with one load of [`CGROUPS_ENABLED`], a global the
//! daemon freezes at load, and returns when it is 0, so a host that does not ask for per-cgroup
//! metrics pays a load and a branch per operation and no helper call.

use aya_ebpf::{Global, helpers::bpf_get_current_cgroup_id, macros::map, maps::PerCpuHashMap};
use probe_common::{
    cgroups::{CGROUP_TOTALS_MAX, CgroupKey, CgroupOp, CgroupTotals},
    map_overflow,
};

use crate::hist::value_or_insert;

/// Non-zero: record per-cgroup totals (`[cgroups] enabled`).
// `#[used]`: never merged with a promoted constant (see `globals`).
#[unsafe(no_mangle)]
#[used]
static CGROUPS_ENABLED: Global<u32> = Global::new(0);

/// Count and total time by (cgroup, kind, call); per CPU, so concurrent writers never share a
/// cache line. Read (and pruned of vanished cgroups) by the daemon at each scrape.
#[map]
static CGROUP_TOTALS: PerCpuHashMap<CgroupKey, CgroupTotals> =
    PerCpuHashMap::with_max_entries(CGROUP_TOTALS_MAX, 0);

#[inline(always)]
fn enabled() -> bool {
    CGROUPS_ENABLED.load() != 0
}

/// The current task's cgroup v2 id while per-cgroup totals are on, else 0 (no helper call).
/// For operations that end in another task's context (writeback waits end in sched_switch).
#[inline(always)]
pub fn current_id() -> u64 {
    if !enabled() {
        return 0;
    }
    // SAFETY: bpf_get_current_cgroup_id has no preconditions.
    unsafe { bpf_get_current_cgroup_id() }
}

/// The current task's sync call (or io_uring sync request) `call` took `ns`.
#[inline(always)]
pub fn sync_call(call: u32, ns: u64) {
    add(current_id(), CgroupOp::SyncCall, call, ns);
}

/// The current task is about to be paused `ns` in balance_dirty_pages.
#[inline(always)]
pub fn throttled(ns: u64) {
    add(current_id(), CgroupOp::DirtyThrottle, 0, ns);
}

/// A task of cgroup `cgroup_id` (from [`current_id`] when its wait began) slept `ns` on a
/// folio under writeback.
#[inline(always)]
pub fn waited(cgroup_id: u64, ns: u64) {
    add(cgroup_id, CgroupOp::WritebackWait, 0, ns);
}

/// Adds one operation; id 0 means "off" (or a wait that began while off) and records nothing.
#[inline(always)]
fn add(cgroup_id: u64, kind: CgroupOp, call: u32, ns: u64) {
    if cgroup_id == 0 {
        return;
    }
    let key = CgroupKey {
        cgroup_id,
        kind: kind as u32,
        call,
    };
    if let Some(totals) = value_or_insert(
        &CGROUP_TOTALS,
        &key,
        &CgroupTotals::ZERO,
        map_overflow::CGROUP_TOTALS,
    ) {
        // SAFETY: this CPU's value in a per-CPU map, valid for this program run.
        unsafe {
            (*totals).count += 1;
            (*totals).total_ns += ns;
        }
    }
}
