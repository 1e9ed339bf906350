//! Journal commit durations: ext4's jbd2 commits and XFS log writes.
//!
//! jbd2 (include/trace/events/jbd2.h, class `jbd2_commit`): `jbd2_start_commit` and
//! `jbd2_end_commit` carry `dev_t dev` (the filesystem's device) and `tid_t transaction`; a commit
//! is keyed by (dev, tid). XFS (fs/xfs/xfs_trace.h, class `xlog_iclog_class`): `xlog_iclog_sync`
//! when an in-core log buffer is submitted and `xlog_iclog_sync_done` when its I/O completes,
//! keyed by (dev, lsn): the log I/O a log force waits for.

use aya_ebpf::{
    Global,
    helpers::bpf_ktime_get_ns,
    macros::{map, tracepoint},
    maps::{LruHashMap, PerCpuHashMap},
    programs::TracePointContext,
};
use probe_common::{
    hist::Log2Hist,
    journal::{CommitKey, JournalFormat, JournalKey, JournalKind},
};

use crate::hist::{record, value_or_insert};

// `#[used]`: see globals.rs; without it LLVM may merge equal constants into this global.
#[used]
#[unsafe(no_mangle)]
pub static JOURNAL_FMT: Global<JournalFormat> = Global::new(JournalFormat {
    jbd2_dev: 0,
    jbd2_tid: 0,
    xlog_dev: 0,
    xlog_lsn: 0,
});

/// Commits in flight. LRU: a start whose end we never see (attach race) must not pin an entry.
#[map]
static COMMITS_INFLIGHT: LruHashMap<CommitKey, u64> = LruHashMap::with_max_entries(4096, 0);

/// Commit durations by (journal kind, device). Feeds `wbscope_journal_commit_duration_seconds`.
#[map]
static JOURNAL_COMMIT_LATENCY: PerCpuHashMap<JournalKey, Log2Hist> =
    PerCpuHashMap::with_max_entries(1024, 0);

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
fn jbd2_key(ctx: &TracePointContext) -> Option<CommitKey> {
    let f = JOURNAL_FMT.load();
    let dev: u32 = read(ctx, f.jbd2_dev)?;
    let tid: u32 = read(ctx, f.jbd2_tid)?;
    Some(CommitKey {
        kind: JournalKind::Jbd2 as u32,
        dev,
        id: tid as u64,
    })
}

#[inline(always)]
fn xlog_key(ctx: &TracePointContext) -> Option<CommitKey> {
    let f = JOURNAL_FMT.load();
    let dev: u32 = read(ctx, f.xlog_dev)?;
    let lsn: u64 = read(ctx, f.xlog_lsn)?;
    Some(CommitKey {
        kind: JournalKind::XfsLog as u32,
        dev,
        id: lsn,
    })
}

#[inline(always)]
fn start(key: Option<CommitKey>) {
    if let Some(key) = key {
        // SAFETY: bpf_ktime_get_ns has no preconditions.
        let now = unsafe { bpf_ktime_get_ns() };
        let _ = COMMITS_INFLIGHT.insert(&key, &now, 0);
        crate::stall_events::journal_start(key.dev, now);
    }
}

#[inline(always)]
fn end(key: Option<CommitKey>) {
    let Some(key) = key else {
        return;
    };
    // SAFETY: copied out immediately; removed right after.
    let Some(started) = (unsafe { COMMITS_INFLIGHT.get(&key) }).copied() else {
        return;
    };
    let _ = COMMITS_INFLIGHT.remove(&key);
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let t = unsafe { bpf_ktime_get_ns() };
    crate::stall_events::journal_end(key.dev, started, t);
    let ns = t.saturating_sub(started);
    let agg = JournalKey {
        kind: key.kind,
        dev: key.dev,
    };
    if let Some(hist) = value_or_insert(&JOURNAL_COMMIT_LATENCY, &agg, &Log2Hist::ZERO) {
        // SAFETY: this CPU's value in a per-CPU map, valid for this program run.
        record(unsafe { &mut *hist }, ns);
    }
}

#[tracepoint]
pub fn jbd2_start_commit(ctx: TracePointContext) -> u32 {
    start(jbd2_key(&ctx));
    0
}

#[tracepoint]
pub fn jbd2_end_commit(ctx: TracePointContext) -> u32 {
    end(jbd2_key(&ctx));
    0
}

#[tracepoint]
pub fn xlog_iclog_sync(ctx: TracePointContext) -> u32 {
    start(xlog_key(&ctx));
    0
}

#[tracepoint]
pub fn xlog_iclog_sync_done(ctx: TracePointContext) -> u32 {
    end(xlog_key(&ctx));
    0
}
