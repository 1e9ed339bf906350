//! NFS client WRITE and COMMIT RPCs by mount, stability and the sync mode that issued them.
//!
//! Sources (fs/nfs/nfstrace.h, classic tracepoints of the `nfs` module, fields at offsets from
//! the running kernel's format files):
//! - `nfs_initiate_write` when a WRITE RPC is set up (`nfs_initiate_pgio()`), with the stability
//!   the client asks for (`hdr->args.stable`: UNSTABLE, DATA_SYNC or FILE_SYNC) and its byte
//!   count; `nfs_writeback_done` when its reply is handled (`tk_status` as `error`).
//! - `nfs_initiate_commit` / `nfs_commit_done`: the COMMIT that makes UNSTABLE writes durable.
//!
//! An RPC is matched between its two events by (device, fileid, offset), which both records
//! carry from the same argument struct. The sync mode comes from `tp_btf/wbc_writepage`
//! (mm/page-writeback.c, once per folio that a writepages pass hands to the filesystem, with the
//! pass's `writeback_control`): `nfs_writepages()` sets WRITEs up in the thread that runs the pass
//! (`nfs_pageio_doio()` → `nfs_initiate_pgio()`), so the thread's last `wbc->sync_mode` is the
//! mode of the pass that issued the WRITE. A WRITE set up outside any pass (a thread that never
//! ran one) is counted with `SYNC_MODE_UNKNOWN`.

use aya_ebpf::{
    Global,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{btf_tracepoint, map, tracepoint},
    maps::{LruHashMap, PerCpuHashMap},
    programs::{BtfTracePointContext, TracePointContext},
};
use probe_common::map_overflow;
use probe_common::nfs::{
    NfsCommitKey, NfsCommitStats, NfsFormat, NfsRpcId, NfsRpcStart, NfsWbcMode, NfsWriteKey,
    NfsWriteStats, SYNC_MODE_UNKNOWN,
};

use crate::{
    hist::{record, value_or_insert},
    kernel::btf_load::load,
};

// `#[used]`: never merged with a promoted constant (see `kernel::globals`).
#[unsafe(no_mangle)]
#[used]
static NFS_FMT: Global<NfsFormat> = Global::new(NfsFormat {
    write_dev: 0,
    write_fileid: 0,
    write_offset: 0,
    write_count: 0,
    write_stable: 0,
    write_done_dev: 0,
    write_done_fileid: 0,
    write_done_offset: 0,
    write_done_error: 0,
    writes_resolved: 0,
    commit_dev: 0,
    commit_fileid: 0,
    commit_offset: 0,
    commit_done_dev: 0,
    commit_done_fileid: 0,
    commit_done_offset: 0,
    commit_done_error: 0,
    commits_resolved: 0,
    wbc_sync_mode: 0,
    wbc_resolved: 0,
});

/// WRITEs by (device, stability, sync mode). Feeds `wbscope_nfs_write_requests_total`,
/// `wbscope_nfs_write_bytes_total`, `wbscope_nfs_write_errors_total` and
/// `wbscope_nfs_write_duration_seconds`.
#[map]
static NFS_WRITES: PerCpuHashMap<NfsWriteKey, NfsWriteStats> =
    PerCpuHashMap::with_max_entries(1024, 0);

/// COMMITs by device. Feeds `wbscope_nfs_commits_total`, `wbscope_nfs_commit_errors_total` and
/// `wbscope_nfs_commit_duration_seconds`.
#[map]
static NFS_COMMITS: PerCpuHashMap<NfsCommitKey, NfsCommitStats> =
    PerCpuHashMap::with_max_entries(1024, 0);

/// WRITEs and COMMITs in flight (separate maps: a COMMIT of a whole file has offset 0, like the
/// file's first WRITE). LRU: an RPC whose done event we never see (attach race) must not pin an
/// entry.
#[map]
static NFS_WRITES_INFLIGHT: LruHashMap<NfsRpcId, NfsRpcStart> =
    LruHashMap::with_max_entries(16384, 0);
#[map]
static NFS_COMMITS_INFLIGHT: LruHashMap<NfsRpcId, NfsRpcStart> =
    LruHashMap::with_max_entries(4096, 0);

/// The writepages pass each thread ran last, by thread id.
#[map]
static NFS_PASS_MODE: LruHashMap<u32, NfsWbcMode> = LruHashMap::with_max_entries(4096, 0);

#[inline(always)]
fn read<T>(ctx: &TracePointContext, offset: u32) -> Option<T> {
    if offset == 0 {
        return None;
    }
    // SAFETY: offsets come from the running kernel's format file for this event; read_at copies
    // through bpf_probe_read and fails instead of faulting.
    unsafe { ctx.read_at::<T>(offset as usize) }.ok()
}

#[inline(always)]
fn now() -> u64 {
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    unsafe { bpf_ktime_get_ns() }
}

#[inline(always)]
fn tid() -> u32 {
    bpf_get_current_pid_tgid() as u32
}

#[inline(always)]
fn rpc_id(ctx: &TracePointContext, dev: u32, fileid: u32, offset: u32) -> Option<NfsRpcId> {
    Some(NfsRpcId {
        dev: read(ctx, dev)?,
        _reserved: 0,
        fileid: read(ctx, fileid)?,
        offset: read(ctx, offset)?,
    })
}

/// A folio of a writepages pass: remember the pass's sync mode for the thread. One lookup per
/// folio while the pass lasts; the mode is read and stored only when the pass changes.
#[btf_tracepoint(function = "wbc_writepage")]
pub fn nfs_wbc_writepage(ctx: BtfTracePointContext) -> u32 {
    let f = NFS_FMT.load();
    if f.wbc_resolved == 0 {
        return 0;
    }
    // `(struct writeback_control *wbc, struct backing_dev_info *bdi)`, checked by the daemon.
    let wbc: u64 = ctx.arg(0);
    if wbc == 0 {
        return 0;
    }
    let tid = tid();
    if let Some(mode) = NFS_PASS_MODE.get_ptr_mut(&tid) {
        // SAFETY: a value pointer of this map, valid for this program run; only this thread
        // writes its own entry.
        let mode = unsafe { &mut *mode };
        if mode.wbc != wbc {
            mode.wbc = wbc;
            mode.sync_mode = load::<u32>(wbc, f.wbc_sync_mode);
        }
        return 0;
    }
    let mode = NfsWbcMode {
        wbc,
        sync_mode: load::<u32>(wbc, f.wbc_sync_mode),
        _reserved: 0,
    };
    let _ = NFS_PASS_MODE.insert(&tid, &mode, 0);
    0
}

#[tracepoint]
pub fn nfs_initiate_write(ctx: TracePointContext) -> u32 {
    let _ = try_initiate_write(&ctx);
    0
}

#[inline(always)]
fn try_initiate_write(ctx: &TracePointContext) -> Option<()> {
    let f = NFS_FMT.load();
    if f.writes_resolved == 0 {
        return None;
    }
    let id = rpc_id(ctx, f.write_dev, f.write_fileid, f.write_offset)?;
    let count: u32 = read(ctx, f.write_count)?;
    // `unsigned long` on 6.x: the low word (little-endian) holds the 0..2 value.
    let stable: u32 = read(ctx, f.write_stable)?;
    // SAFETY: copied out immediately.
    let sync_mode = unsafe { NFS_PASS_MODE.get(&tid()) }
        .map(|m| m.sync_mode)
        .unwrap_or(SYNC_MODE_UNKNOWN);
    let key = NfsWriteKey {
        dev: id.dev,
        stable,
        sync_mode,
        _reserved: 0,
    };
    if let Some(stats) = value_or_insert(
        &NFS_WRITES,
        &key,
        &NfsWriteStats::ZERO,
        map_overflow::NFS_WRITES,
    ) {
        // SAFETY: this CPU's value in a per-CPU map, valid for this program run.
        let stats = unsafe { &mut *stats };
        stats.requests += 1;
        stats.bytes += count as u64;
    }
    let start = NfsRpcStart {
        start_ns: now(),
        stable,
        sync_mode,
    };
    let _ = NFS_WRITES_INFLIGHT.insert(&id, &start, 0);
    Some(())
}

#[tracepoint]
pub fn nfs_writeback_done(ctx: TracePointContext) -> u32 {
    let _ = try_writeback_done(&ctx);
    0
}

#[inline(always)]
fn try_writeback_done(ctx: &TracePointContext) -> Option<()> {
    let f = NFS_FMT.load();
    if f.writes_resolved == 0 {
        return None;
    }
    let id = rpc_id(
        ctx,
        f.write_done_dev,
        f.write_done_fileid,
        f.write_done_offset,
    )?;
    // SAFETY: copied out immediately; removed right after.
    let start = (unsafe { NFS_WRITES_INFLIGHT.get(&id) }).copied()?;
    let _ = NFS_WRITES_INFLIGHT.remove(&id);
    let error: i32 = read(ctx, f.write_done_error).unwrap_or(0);
    let key = NfsWriteKey {
        dev: id.dev,
        stable: start.stable,
        sync_mode: start.sync_mode,
        _reserved: 0,
    };
    if let Some(stats) = value_or_insert(
        &NFS_WRITES,
        &key,
        &NfsWriteStats::ZERO,
        map_overflow::NFS_WRITES,
    ) {
        // SAFETY: this CPU's value in a per-CPU map, valid for this program run.
        let stats = unsafe { &mut *stats };
        if error < 0 {
            stats.errors += 1;
        }
        record(&mut stats.latency, now().saturating_sub(start.start_ns));
    }
    Some(())
}

#[tracepoint]
pub fn nfs_initiate_commit(ctx: TracePointContext) -> u32 {
    let _ = try_initiate_commit(&ctx);
    0
}

#[inline(always)]
fn try_initiate_commit(ctx: &TracePointContext) -> Option<()> {
    let f = NFS_FMT.load();
    if f.commits_resolved == 0 {
        return None;
    }
    let id = rpc_id(ctx, f.commit_dev, f.commit_fileid, f.commit_offset)?;
    let key = NfsCommitKey {
        dev: id.dev,
        _reserved: 0,
    };
    if let Some(stats) = value_or_insert(
        &NFS_COMMITS,
        &key,
        &NfsCommitStats::ZERO,
        map_overflow::NFS_COMMITS,
    ) {
        // SAFETY: this CPU's value in a per-CPU map, valid for this program run.
        unsafe { (*stats).commits += 1 };
    }
    let start = NfsRpcStart {
        start_ns: now(),
        stable: 0,
        sync_mode: 0,
    };
    let _ = NFS_COMMITS_INFLIGHT.insert(&id, &start, 0);
    Some(())
}

#[tracepoint]
pub fn nfs_commit_done(ctx: TracePointContext) -> u32 {
    let _ = try_commit_done(&ctx);
    0
}

#[inline(always)]
fn try_commit_done(ctx: &TracePointContext) -> Option<()> {
    let f = NFS_FMT.load();
    if f.commits_resolved == 0 {
        return None;
    }
    let id = rpc_id(
        ctx,
        f.commit_done_dev,
        f.commit_done_fileid,
        f.commit_done_offset,
    )?;
    // SAFETY: copied out immediately; removed right after.
    let start = (unsafe { NFS_COMMITS_INFLIGHT.get(&id) }).copied()?;
    let _ = NFS_COMMITS_INFLIGHT.remove(&id);
    let error: i32 = read(ctx, f.commit_done_error).unwrap_or(0);
    let key = NfsCommitKey {
        dev: id.dev,
        _reserved: 0,
    };
    if let Some(stats) = value_or_insert(
        &NFS_COMMITS,
        &key,
        &NfsCommitStats::ZERO,
        map_overflow::NFS_COMMITS,
    ) {
        // SAFETY: this CPU's value in a per-CPU map, valid for this program run.
        let stats = unsafe { &mut *stats };
        if error < 0 {
            stats.errors += 1;
        }
        record(&mut stats.latency, now().saturating_sub(start.start_ns));
    }
    Some(())
}
