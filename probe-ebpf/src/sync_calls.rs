//! Latency of sync-family system calls, by call and by the file's device, and sync_file_range
//! calls by flags.
//!
//! `syscalls:sys_enter_<call>` / `sys_exit_<call>` for fsync, fdatasync, sync_file_range, syncfs,
//! sync and msync. Enter records store every argument as an 8-byte long at the offset given by the
//! event's format file (`FSYNC_ENTER_FMT`, `SFR_ENTER_FMT`, …). The device is resolved at enter
//! from the task's fd table, since by exit the fd may already be closed. sync(2) has no device
//! (`all`); msync's device is filled in by the filesystem's fsync event (see `msync_dev`).
//!
//! Where the kernel allows fentry/fexit, the same calls are timed on their syscall functions
//! instead (`fentry`), which spares every other system call of the host the tracepoints' slow
//! path; both paths share [`begin`] and [`exit`], so they count the same events.
//!
//! The in-flight call per thread (`inflight`) is also the "inside sync call X" marker that the
//! writeback submission probes (`submissions`) read to attribute writepages passes to their
//! caller, and it carries the call's stall-event breakdown (`stall_events`).

mod fentry;
mod io_uring;
mod msync_dev;

use aya_ebpf::{
    EbpfContext, Global,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{map, tracepoint},
    maps::{PerCpuArray, PerCpuHashMap},
    programs::TracePointContext,
};
use probe_common::{
    hist::Log2Hist,
    map_overflow,
    slots::{SLOT_BITS, Slot, array_len},
    stall_events::InflightSync,
    sync_calls::{
        MS_SYNC, SfrKey, SyncKey, SyncStart, SyncSyscall,
        layout::{FieldFormat, SfrEnterFormat, SysEnterFdFormat},
    },
};

use crate::{
    hist::{record, slot_or_insert, value_or_insert},
    kernel::{
        current_task::Current,
        fd_dev::{dev_and_ino_of_inode, inode_of_fd},
        globals::is_ignored_tgid,
    },
    stall_events,
};

// `#[used]`: never merged with a promoted constant (see `kernel::globals`).
#[unsafe(no_mangle)]
#[used]
static FSYNC_ENTER_FMT: Global<SysEnterFdFormat> = Global::new(SysEnterFdFormat {
    fd: 0,
    _reserved: 0,
});

// `#[used]`: never merged with a promoted constant (see `kernel::globals`).
#[unsafe(no_mangle)]
#[used]
static FDATASYNC_ENTER_FMT: Global<SysEnterFdFormat> = Global::new(SysEnterFdFormat {
    fd: 0,
    _reserved: 0,
});

// `#[used]`: never merged with a promoted constant (see `kernel::globals`).
#[unsafe(no_mangle)]
#[used]
static SFR_ENTER_FMT: Global<SfrEnterFormat> = Global::new(SfrEnterFormat { fd: 0, flags: 0 });

// `#[used]`: never merged with a promoted constant (see `kernel::globals`).
#[unsafe(no_mangle)]
#[used]
static SYNCFS_ENTER_FMT: Global<SysEnterFdFormat> = Global::new(SysEnterFdFormat {
    fd: 0,
    _reserved: 0,
});

// `#[used]`: never merged with a promoted constant (see `kernel::globals`).
#[unsafe(no_mangle)]
#[used]
static MSYNC_ENTER_FMT: Global<FieldFormat> = Global::new(FieldFormat {
    offset: 0,
    _reserved: 0,
});

/// Latency histograms by (call, device) for block devices (and sync(2), and unknown devices).
/// Feeds `wbscope_sync_call_duration_seconds`. The daemon sizes it from the host's block devices.
#[map]
static SYNC_CALL_LATENCY: PerCpuHashMap<SyncKey, Log2Hist> =
    PerCpuHashMap::with_max_entries(4096, 0);

/// The slots in front of [`SYNC_CALL_LATENCY`] (`probe_common::slots`): a host's few busy
/// (call, device) keys are recorded without a hash lookup.
#[map]
static SYNC_CALL_LATENCY_SLOTS: PerCpuArray<Slot<Log2Hist>> =
    PerCpuArray::with_max_entries(array_len(SLOT_BITS), 0);

/// The same for anonymous superblocks (major 0: tmpfs, overlay, proc, btrfs, nfs, fuse…): a map
/// of its own, so that a container host's thousands of mounts fill only this one and never
/// take the room of the real disks. The daemon removes keys of unmounted filesystems.
#[map]
static SYNC_CALL_LATENCY_ANON: PerCpuHashMap<SyncKey, Log2Hist> =
    PerCpuHashMap::with_max_entries(4096, 0);

/// Completed sync_file_range calls by (device, flags). Feeds
/// `wbscope_sync_file_range_calls_total`.
#[map]
static SFR_CALLS: PerCpuHashMap<SfrKey, u64> = PerCpuHashMap::with_max_entries(1024, 0);

#[tracepoint]
pub fn sys_enter_fsync(ctx: TracePointContext) -> u32 {
    enter_fd(&ctx, SyncSyscall::Fsync, FSYNC_ENTER_FMT.load().fd);
    0
}

#[tracepoint]
pub fn sys_exit_fsync(ctx: TracePointContext) -> u32 {
    exit(&ctx, SyncSyscall::Fsync);
    0
}

#[tracepoint]
pub fn sys_enter_fdatasync(ctx: TracePointContext) -> u32 {
    enter_fd(&ctx, SyncSyscall::Fdatasync, FDATASYNC_ENTER_FMT.load().fd);
    0
}

#[tracepoint]
pub fn sys_exit_fdatasync(ctx: TracePointContext) -> u32 {
    exit(&ctx, SyncSyscall::Fdatasync);
    0
}

#[tracepoint]
pub fn sys_enter_syncfs(ctx: TracePointContext) -> u32 {
    enter_fd(&ctx, SyncSyscall::Syncfs, SYNCFS_ENTER_FMT.load().fd);
    0
}

#[tracepoint]
pub fn sys_exit_syncfs(ctx: TracePointContext) -> u32 {
    exit(&ctx, SyncSyscall::Syncfs);
    0
}

/// `sys_enter_sync_file_range`: `int fd`, `loff_t offset`, `loff_t nbytes`, `unsigned int flags`.
#[tracepoint]
pub fn sys_enter_sync_file_range(ctx: TracePointContext) -> u32 {
    let f = SFR_ENTER_FMT.load();
    if f.fd == 0 || f.flags == 0 {
        return 0;
    }
    let Some(tid) = traced_tid() else {
        return 0;
    };
    if let (Some(fd), Some(flags)) = (read_u64(&ctx, f.fd), read_u64(&ctx, f.flags)) {
        begin_sfr(tid, fd, flags);
    }
    0
}

#[tracepoint]
pub fn sys_exit_sync_file_range(ctx: TracePointContext) -> u32 {
    exit(&ctx, SyncSyscall::SyncFileRange);
    0
}

/// sync(2) takes no arguments and covers every filesystem: device 0, exported as `all`.
#[tracepoint]
pub fn sys_enter_sync(_ctx: TracePointContext) -> u32 {
    enter_sync();
    0
}

#[tracepoint]
pub fn sys_exit_sync(ctx: TracePointContext) -> u32 {
    exit(&ctx, SyncSyscall::Sync);
    0
}

/// `sys_enter_msync`: `unsigned long start`, `size_t len`, `int flags`.
#[tracepoint]
pub fn sys_enter_msync(ctx: TracePointContext) -> u32 {
    let offset = MSYNC_ENTER_FMT.load().offset;
    if offset == 0 {
        return 0;
    }
    let Some(tid) = traced_tid() else {
        return 0;
    };
    if let Some(flags) = read_u64(&ctx, offset) {
        begin_msync(tid, flags);
    }
    0
}

#[tracepoint]
pub fn sys_exit_msync(ctx: TracePointContext) -> u32 {
    exit(&ctx, SyncSyscall::Msync);
    0
}

/// The 8-byte syscall argument at `offset` of the event record. The offsets every kernel's
/// format files give for the arguments read here (16: the first, 32: the third, 40: the
/// fourth) are plain context loads, which the verifier allows only at an offset fixed in the
/// instruction, hence one branch per offset (the daemon's offset is a frozen global, so the
/// verifier keeps only the branch taken); each load is volatile so that LLVM cannot merge them
/// into one load at a computed offset, which the verifier refuses. Any other offset is copied
/// with `bpf_probe_read`.
#[inline(always)]
fn read_u64(ctx: &TracePointContext, offset: u32) -> Option<u64> {
    match offset {
        16 => Some(record_word(ctx, 2)),
        32 => Some(record_word(ctx, 4)),
        40 => Some(record_word(ctx, 5)),
        // SAFETY: the offset comes from this event's format file and syscall arguments are
        // stored as 8-byte longs; read_at copies through bpf_probe_read, which fails instead of
        // faulting.
        _ => unsafe { ctx.read_at::<u64>(offset as usize) }.ok(),
    }
}

/// The `index`th 8-byte word of the event record, a plain context load (`index` must be a
/// constant at the call site).
#[inline(always)]
fn record_word(ctx: &TracePointContext, index: usize) -> u64 {
    // SAFETY: a tracepoint context is the event record, at least as long as the format file's
    // last field, whose offset the daemon read from that file; the verifier checks the offset
    // against the record's bounds at load time.
    unsafe { core::ptr::read_volatile((ctx.as_ptr() as *const u64).add(index)) }
}

/// The current thread id, or `None` when the current process is ignored.
#[inline(always)]
pub(crate) fn traced_tid() -> Option<u32> {
    let pid_tgid = bpf_get_current_pid_tgid();
    (!is_ignored_tgid(pid_tgid)).then_some(pid_tgid as u32)
}

#[inline(always)]
fn now() -> u64 {
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    unsafe { bpf_ktime_get_ns() }
}

#[inline(always)]
fn enter_fd(ctx: &TracePointContext, syscall: SyncSyscall, fd_offset: u32) {
    if fd_offset == 0 {
        return;
    }
    let Some(tid) = traced_tid() else {
        return;
    };
    if let Some(fd) = read_u64(ctx, fd_offset) {
        begin_fd(tid, syscall, fd);
    }
}

/// Starts timing a call of thread `tid` on file descriptor `fd` (fsync, fdatasync, syncfs).
#[inline(always)]
pub(crate) fn begin_fd(tid: u32, syscall: SyncSyscall, fd: u64) {
    // Fetched once for the fd walk and the task storage (a helper call saved).
    let task = Current::get();
    let inode = inode_of_fd(task, fd).unwrap_or(0);
    begin(task, tid, syscall, inode, 0);
}

/// Starts timing sync_file_range(fd, …, flags) of thread `tid`.
#[inline(always)]
pub(crate) fn begin_sfr(tid: u32, fd: u64, flags: u64) {
    let task = Current::get();
    let inode = inode_of_fd(task, fd).unwrap_or(0);
    begin(task, tid, SyncSyscall::SyncFileRange, inode, flags as u32);
}

/// Starts timing msync(…, flags) of thread `tid`. Only MS_SYNC writes back (MS_ASYNC has been a
/// no-op since 2.6.19), so only MS_SYNC calls are timed.
#[inline(always)]
pub(crate) fn begin_msync(tid: u32, flags: u64) {
    if flags as u32 & MS_SYNC != 0 {
        msync_dev::msync_started();
        begin(None, tid, SyncSyscall::Msync, 0, flags as u32);
    }
}

/// The current task enters sync(2): the flusher-work records' "queued by sync" marker, then the
/// call's timing.
#[inline(always)]
pub(crate) fn enter_sync() {
    crate::flusher_work::sync_entered();
    if let Some(tid) = traced_tid() {
        begin(None, tid, SyncSyscall::Sync, 0, 0);
    }
}

/// Starts timing a call of thread `tid` (the current task, `task` if the caller fetched it) on
/// the file whose inode is at kernel address `inode` (0: no file, or not resolvable).
#[inline(always)]
fn begin(task: Option<Current>, tid: u32, syscall: SyncSyscall, inode: u64, flags: u32) {
    let (dev, ino) = dev_and_ino_of_inode(inode);
    let start_ns = now();
    let call = InflightSync {
        start: SyncStart {
            start_ns,
            syscall: syscall as u32,
            dev,
            flags,
            _reserved: 0,
        },
        open: stall_events::open_call(dev, ino, start_ns),
        pass_open: 0,
        _reserved: 0,
    };
    crate::kernel::inflight::begin(task.map_or(0, |t| t.typed_ptr()), tid, &call);
}

/// Ends the current thread's call `syscall`: its latency, sync_file_range flags, top table and
/// stall event. `ctx` is only for kernel-side logging in `debug` builds.
#[inline(always)]
pub(crate) fn exit<C: EbpfContext>(ctx: &C, syscall: SyncSyscall) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    let Some(call) = crate::kernel::inflight::take(tid) else {
        return;
    };
    if call.pass_open != 0 {
        crate::submissions::end_pass(tid);
    }
    let start = call.start;
    if start.syscall != syscall as u32 {
        // A stale entry from a call whose exit we missed: drop it rather than mis-attribute.
        return;
    }
    let end = now();
    stall_events::close_sync(
        &call.open,
        start.syscall,
        start.dev,
        start.flags,
        start.start_ns,
        end,
    );
    let ns = end.saturating_sub(start.start_ns);
    crate::top_processes::add_sync(ns, pid_tgid);
    crate::cgroups::sync_call(start.syscall, ns);
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
    if syscall == SyncSyscall::SyncFileRange {
        let key = SfrKey {
            dev: start.dev,
            flags: start.flags,
        };
        if let Some(count) = value_or_insert(&SFR_CALLS, &key, &0, map_overflow::SFR_CALLS) {
            // SAFETY: this CPU's value in a per-CPU map, valid for this program run.
            unsafe { *count += 1 };
        }
    }
    record_latency(start.syscall, start.dev, ns);
}

/// Records one sync call's duration under (call, device).
#[inline(always)]
pub(crate) fn record_latency(syscall: u32, dev: u32, ns: u64) {
    let key = SyncKey { syscall, dev };
    let hist = if map_overflow::is_anonymous_dev(dev) {
        value_or_insert(
            &SYNC_CALL_LATENCY_ANON,
            &key,
            &Log2Hist::ZERO,
            map_overflow::SYNC_CALL_LATENCY_ANON,
        )
    } else {
        slot_or_insert(
            &SYNC_CALL_LATENCY_SLOTS,
            SLOT_BITS,
            &SYNC_CALL_LATENCY,
            &key,
            &Log2Hist::ZERO,
            map_overflow::SYNC_CALL_LATENCY,
        )
    };
    if let Some(hist) = hist {
        // SAFETY: the pointer is this CPU's value in a per-CPU map, valid for this program run.
        record(unsafe { &mut *hist }, ns);
    }
}
