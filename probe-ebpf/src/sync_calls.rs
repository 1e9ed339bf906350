//! Latency of sync-family system calls, by call and by the file's device.
//!
//! `syscalls:sys_enter_fsync` / `sys_exit_fsync` (and the fdatasync pair): the enter record has
//! `unsigned int fd` at the offset given by its format file (`FSYNC_ENTER_FMT`). The device is
//! resolved at enter from the task's fd table, since by exit the fd may already be closed.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{map, tracepoint},
    maps::{LruHashMap, PerCpuHashMap},
    programs::TracePointContext,
};
use probe_common::{
    hist::Log2Hist,
    sync_call::{SyncKey, SyncStart, SyncSyscall},
};

use crate::{
    fd_dev::dev_of_fd,
    globals::{FDATASYNC_ENTER_FMT, FSYNC_ENTER_FMT, is_ignored_tgid},
    hist::{record, value_or_insert},
};

/// Calls in flight by thread id. LRU so that enters whose exit we never see (attach races, a
/// thread killed in the call) cannot fill the map.
#[map]
static SYNC_INFLIGHT: LruHashMap<u32, SyncStart> = LruHashMap::with_max_entries(16384, 0);

/// Latency histograms by (call, device). Feeds `wbscope_sync_call_duration_seconds`.
#[map]
static SYNC_CALL_LATENCY: PerCpuHashMap<SyncKey, Log2Hist> =
    PerCpuHashMap::with_max_entries(4096, 0);

#[tracepoint]
pub fn sys_enter_fsync(ctx: TracePointContext) -> u32 {
    enter(&ctx, SyncSyscall::Fsync, FSYNC_ENTER_FMT.load().fd);
    0
}

#[tracepoint]
pub fn sys_exit_fsync(ctx: TracePointContext) -> u32 {
    exit(&ctx, SyncSyscall::Fsync);
    0
}

#[tracepoint]
pub fn sys_enter_fdatasync(ctx: TracePointContext) -> u32 {
    enter(&ctx, SyncSyscall::Fdatasync, FDATASYNC_ENTER_FMT.load().fd);
    0
}

#[tracepoint]
pub fn sys_exit_fdatasync(ctx: TracePointContext) -> u32 {
    exit(&ctx, SyncSyscall::Fdatasync);
    0
}

#[inline(always)]
fn enter(ctx: &TracePointContext, syscall: SyncSyscall, fd_offset: u32) {
    if fd_offset == 0 {
        return;
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    if is_ignored_tgid(pid_tgid) {
        return;
    }
    // SAFETY: the offset comes from this event's format file and the field is 8 bytes wide
    // (syscall arguments are stored as longs); read_at bounds-checks through bpf_probe_read.
    let Ok(fd) = (unsafe { ctx.read_at::<u64>(fd_offset as usize) }) else {
        return;
    };
    let start = SyncStart {
        // SAFETY: bpf_ktime_get_ns has no preconditions.
        start_ns: unsafe { bpf_ktime_get_ns() },
        syscall: syscall as u32,
        dev: dev_of_fd(fd),
    };
    let _ = SYNC_INFLIGHT.insert(&(pid_tgid as u32), &start, 0);
}

#[inline(always)]
fn exit(ctx: &TracePointContext, syscall: SyncSyscall) {
    let tid = bpf_get_current_pid_tgid() as u32;
    // SAFETY: the value is copied out immediately; the entry is removed right after.
    let Some(start) = (unsafe { SYNC_INFLIGHT.get(&tid) }).copied() else {
        return;
    };
    let _ = SYNC_INFLIGHT.remove(&tid);
    if start.syscall != syscall as u32 {
        // A stale entry from a call whose exit we missed: drop it rather than mis-attribute.
        return;
    }
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let ns = unsafe { bpf_ktime_get_ns() }.saturating_sub(start.start_ns);
    // Kernel-side logging costs microseconds per event: only in `debug` builds.
    #[cfg(feature = "debug")]
    aya_log_ebpf::debug!(
        ctx,
        "sync call {} on dev {:x} took {} ns",
        start.syscall,
        start.dev,
        ns
    );
    #[cfg(not(feature = "debug"))]
    let _ = ctx;
    let key = SyncKey {
        syscall: start.syscall,
        dev: start.dev,
    };
    if let Some(hist) = value_or_insert(&SYNC_CALL_LATENCY, &key, &Log2Hist::ZERO) {
        // SAFETY: the pointer is this CPU's value in a per-CPU map, valid for this program run.
        record(unsafe { &mut *hist }, ns);
    }
}
