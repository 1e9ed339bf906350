//! Journal commit durations: ext4's jbd2 commits and XFS log writes.
//!
//! jbd2 (include/trace/events/jbd2.h, class `jbd2_commit`, `TP_PROTO(journal_t *journal,
//! transaction_t *commit_transaction)`): BTF tracepoints `jbd2_start_commit` and
//! `jbd2_end_commit`, which skip building the trace record. The probes read what the classic
//! record would hold, `journal->j_fs_dev->bd_dev` (the filesystem's device) and
//! `commit_transaction->t_tid`. A journal commits one transaction at a time
//! (`jbd2_journal_commit_transaction()` runs in the journal's kjournald2 thread), so the start of
//! the running commit is kept in the device's busy-clock entry (`stall_events`), which the start
//! updates anyway: one map lookup per event instead of an insert, a lookup and a delete in a
//! map of commits in flight. XFS (fs/xfs/xfs_trace.h, class `xlog_iclog_class`): `xlog_iclog_sync`
//! when an in-core log buffer is submitted and `xlog_iclog_sync_done` when its I/O completes,
//! keyed by (dev, lsn): the log I/O a log force waits for.

use aya_ebpf::{
    Global,
    helpers::bpf_ktime_get_ns,
    macros::{btf_tracepoint, map, tracepoint},
    maps::{LruHashMap, PerCpuHashMap},
    programs::{BtfTracePointContext, TracePointContext},
};
use probe_common::{
    hist::Log2Hist,
    journal::{CommitKey, JournalFormat, JournalKey, JournalKind},
    map_overflow,
};

use crate::{
    hist::{record, value_or_insert},
    kernel::btf_load,
};

// `#[used]`: see kernel/globals.rs; without it LLVM may merge equal constants into this global.
#[used]
#[unsafe(no_mangle)]
pub static JOURNAL_FMT: Global<JournalFormat> = Global::new(JournalFormat {
    journal_j_fs_dev: 0,
    bdev_bd_dev: 0,
    transaction_t_tid: 0,
    jbd2_resolved: 0,
    xlog_dev: 0,
    xlog_lsn: 0,
});

/// XFS log writes in flight (several iclogs can be). LRU: a start whose end we never see
/// (attach race) must not pin an entry.
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

/// (device, transaction id) of a jbd2 commit event.
#[inline(always)]
fn jbd2_commit(ctx: &BtfTracePointContext) -> Option<(u32, u32)> {
    let f = JOURNAL_FMT.load();
    if f.jbd2_resolved == 0 {
        return None;
    }
    // `(journal_t *journal, transaction_t *commit_transaction)`, checked by the daemon.
    let journal: u64 = ctx.arg(0);
    let transaction: u64 = ctx.arg(1);
    let bdev: u64 = btf_load::read(journal + f.journal_j_fs_dev as u64)?;
    let dev: u32 = btf_load::read(bdev + f.bdev_bd_dev as u64)?;
    let tid: u32 = btf_load::read(transaction + f.transaction_t_tid as u64)?;
    Some((dev, tid))
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
fn now() -> u64 {
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    unsafe { bpf_ktime_get_ns() }
}

#[inline(always)]
fn start(key: Option<CommitKey>) {
    if let Some(key) = key {
        let now = now();
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
    let t = now();
    crate::stall_events::journal_end(key.dev, started, t);
    record_commit(JournalKind::XfsLog, key.dev, t.saturating_sub(started));
}

/// Records one commit's duration under (journal kind, device).
#[inline(always)]
fn record_commit(kind: JournalKind, dev: u32, ns: u64) {
    let agg = JournalKey {
        kind: kind as u32,
        dev,
    };
    if let Some(hist) = value_or_insert(
        &JOURNAL_COMMIT_LATENCY,
        &agg,
        &Log2Hist::ZERO,
        map_overflow::JOURNAL_COMMIT_LATENCY,
    ) {
        // SAFETY: this CPU's value in a per-CPU map, valid for this program run.
        record(unsafe { &mut *hist }, ns);
    }
}

#[btf_tracepoint(function = "jbd2_start_commit")]
pub fn jbd2_start_commit(ctx: BtfTracePointContext) -> u32 {
    if let Some((dev, tid)) = jbd2_commit(&ctx) {
        crate::stall_events::jbd2_commit_start(dev, tid, now());
    }
    0
}

#[btf_tracepoint(function = "jbd2_end_commit")]
pub fn jbd2_end_commit(ctx: BtfTracePointContext) -> u32 {
    let Some((dev, tid)) = jbd2_commit(&ctx) else {
        return 0;
    };
    let t = now();
    if let Some(started) = crate::stall_events::jbd2_commit_end(dev, tid, t) {
        record_commit(JournalKind::Jbd2, dev, t.saturating_sub(started));
    }
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
