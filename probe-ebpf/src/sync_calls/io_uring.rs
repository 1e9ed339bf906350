//! io_uring fsync, fdatasync and sync_file_range requests, timed from submission to completion.
//!
//! `tp_btf/io_uring_submit_req(struct io_kiocb *req)` (include/trace/events/io_uring.h) fires in
//! `io_submit_sqe()` after the request was prepared, so `req->opcode` and the `struct io_sync` in
//! `req->cmd` (`flags`: IORING_FSYNC_DATASYNC, or the sync_file_range flags) are set. Requests are
//! keyed by the `req` pointer as a number. `tp_btf/io_uring_complete(ctx, void *req, cqe)` fires
//! when the completion is posted; `req->file` is still held then and names the device (it also
//! works for registered files, where the submit-time fd is an index). FSYNC and SYNC_FILE_RANGE
//! always run in an io-wq worker, so the submitter's tid would not pair them.
//!
//! Cost: the submit program reads one byte for every io_uring request; the complete program does
//! one hash lookup per completion.

use aya_ebpf::{
    Global,
    helpers::bpf_ktime_get_ns,
    macros::{btf_tracepoint, map},
    maps::LruHashMap,
    programs::BtfTracePointContext,
};
use probe_common::{
    sync_calls::layout::IoUringLayout,
    sync_calls::{IORING_FSYNC_DATASYNC, SyncStart, SyncSyscall},
};

use crate::{
    kernel::{btf_load::read, fd_dev::dev_of_file, globals::is_ignored_tgid},
    sync_calls::record_latency,
};

// `#[used]`: never merged with a promoted constant (see `kernel::globals`).
#[unsafe(no_mangle)]
#[used]
static IO_URING_LAYOUT: Global<IoUringLayout> = Global::new(IoUringLayout {
    kiocb_opcode: 0,
    kiocb_file: 0,
    kiocb_cmd: 0,
    io_sync_flags: 0,
    op_fsync: 0,
    op_sync_file_range: 0,
    resolved: 0,
    _reserved: 0,
});

/// Sync requests in flight by `struct io_kiocb` address. LRU: a request whose completion is
/// never posted (IOSQE_CQE_SKIP_SUCCESS, ring torn down) must not leak an entry forever.
#[map]
static URING_INFLIGHT: LruHashMap<u64, SyncStart> = LruHashMap::with_max_entries(16384, 0);

#[btf_tracepoint(function = "io_uring_submit_req")]
pub fn io_uring_submit_req(ctx: BtfTracePointContext) -> u32 {
    let _ = try_submit(&ctx);
    0
}

#[btf_tracepoint(function = "io_uring_complete")]
pub fn io_uring_complete(ctx: BtfTracePointContext) -> u32 {
    let _ = try_complete(&ctx);
    0
}

#[inline(always)]
fn now() -> u64 {
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    unsafe { bpf_ktime_get_ns() }
}

#[inline(always)]
fn try_submit(ctx: &BtfTracePointContext) -> Option<()> {
    let l = IO_URING_LAYOUT.load();
    if l.resolved == 0 {
        return None;
    }
    // Kept as a number: arithmetic on the typed pointer is rejected by the verifier.
    let req: u64 = ctx.arg(0);
    let opcode: u8 = read(req + l.kiocb_opcode as u64)?;
    let opcode = opcode as u32;
    if opcode != l.op_fsync && opcode != l.op_sync_file_range {
        return None;
    }
    if is_ignored_tgid(aya_ebpf::helpers::bpf_get_current_pid_tgid()) {
        return None;
    }
    let flags: u32 = read(req + l.kiocb_cmd as u64 + l.io_sync_flags as u64)?;
    let syscall = if opcode == l.op_sync_file_range {
        SyncSyscall::IoUringSyncFileRange
    } else if flags & IORING_FSYNC_DATASYNC != 0 {
        SyncSyscall::IoUringFdatasync
    } else {
        SyncSyscall::IoUringFsync
    };
    let start = SyncStart {
        start_ns: now(),
        syscall: syscall as u32,
        dev: 0,
        flags,
        _reserved: 0,
    };
    URING_INFLIGHT.insert(&req, &start, 0).ok()
}

#[inline(always)]
fn try_complete(ctx: &BtfTracePointContext) -> Option<()> {
    let req: u64 = ctx.arg(1);
    // SAFETY: copied out immediately; removed right after.
    let start = (unsafe { URING_INFLIGHT.get(&req) }).copied()?;
    let _ = URING_INFLIGHT.remove(&req);
    let l = IO_URING_LAYOUT.load();
    let file: u64 = read(req + l.kiocb_file as u64).unwrap_or(0);
    let dev = if file == 0 { 0 } else { dev_of_file(file) };
    let end = now();
    crate::stall_events::close_uring(start.syscall, dev, start.flags, start.start_ns, end);
    crate::cgroups::sync_call(start.syscall, end.saturating_sub(start.start_ns));
    record_latency(start.syscall, dev, end.saturating_sub(start.start_ns));
    Some(())
}
