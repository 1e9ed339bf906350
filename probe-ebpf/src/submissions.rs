//! Writeback submissions: writepages passes over an inode by device, sync mode and caller.
//!
//! Sources:
//! - ext4 (`ext4:ext4_writepages_result`, include/trace/events/ext4.h: `dev_t dev`,
//!   `int pages_written`, `int sync_mode`): one event at the end of each `ext4_do_writepages()`
//!   pass, with the pages it submitted.
//! - filesystems that iterate with `writeback_iter()` (xfs and other iomap filesystems, block
//!   devices): `tp_btf/wbc_writepage(struct writeback_control *wbc, struct backing_dev_info *)`
//!   fires once per folio about to be written (mm/page-writeback.c `writeback_get_folio()`, right
//!   after taking the folio from `wbc->fbatch`), with `wbc->nr_to_write` already reduced by the
//!   previous folios of the pass. A pass is a run of events on one thread with the same `wbc`
//!   and folio mapping (file) and a non-increasing `nr_to_write`; the pass state is dropped when
//!   the thread leaves its sync call or its flusher inode. Pages: each folio's size as
//!   `folio_nr_pages()` computes it (`PG_head` flag, `_nr_pages`, older `_folio_nr_pages`). On
//!   kernels without either a folio counts one page when it appears and the rest of its size when the
//!   next folio of the pass shows the `nr_to_write` delta, so only the last folio of a pass is
//!   under-counted there. One per-thread lookup and one per-CPU update per folio keep this hot
//!   hook cheap.
//!
//! Caller: the task's in-flight sync call (`sync_calls::SYNC_INFLIGHT`, set at sys_enter and
//! cleared at sys_exit) if any; otherwise `flusher` when a kernel thread is between
//! `writeback:writeback_single_inode_start` and `writeback:writeback_single_inode`
//! (`__writeback_single_inode()`, which the flusher runs for every inode it writes back; user
//! tasks reach it only through write_inode_now()/sync_inode_metadata(), and jbd2's ordered-data
//! writepages never do); otherwise `io_uring` in an io-wq worker (thread name `iou-wrk-<pid>`,
//! set by io_uring/io-wq.c), where io_uring fsync and sync_file_range requests always run;
//! otherwise `other`.

use aya_ebpf::{
    Global,
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_get_current_task},
    macros::{btf_tracepoint, map, tracepoint},
    maps::{LruHashMap, PerCpuHashMap},
    programs::{BtfTracePointContext, TracePointContext},
};
use probe_common::submission::{
    Ext4WritepagesResultFormat, PassState, SubmitKey, SubmitStats, WbCaller, WbcLayout,
};

use crate::{
    fd_dev::{dev_of_inode, read},
    hist::value_or_insert,
    sync_calls::SYNC_INFLIGHT,
};

// `#[used]`: never merged with a promoted constant (see `globals`).
#[unsafe(no_mangle)]
#[used]
static EXT4_WP_RESULT_FMT: Global<Ext4WritepagesResultFormat> =
    Global::new(Ext4WritepagesResultFormat {
        dev: 0,
        pages_written: 0,
        sync_mode: 0,
        _reserved: 0,
    });

// `#[used]`: never merged with a promoted constant (see `globals`).
#[unsafe(no_mangle)]
#[used]
static WBC_LAYOUT: Global<WbcLayout> = Global::new(WbcLayout {
    nr_to_write: 0,
    sync_mode: 0,
    fbatch: 0,
    fbatch_i: 0,
    fbatch_folios: 0,
    fbatch_len: 0,
    folio_mapping: 0,
    mapping_host: 0,
    task_mm: 0,
    folio_flags: 0,
    folio_nr_pages: 0,
    pg_head: 0,
    resolved: 0,
});

/// Passes and pages by (device, sync mode, caller). Feeds
/// `wbscope_writeback_submissions_total` and `wbscope_writeback_submitted_bytes_total`.
#[map]
static WB_SUBMISSIONS: PerCpuHashMap<SubmitKey, SubmitStats> =
    PerCpuHashMap::with_max_entries(1024, 0);

/// Kernel threads inside `__writeback_single_inode()`, by thread id.
#[map]
static FLUSHER_INODE: LruHashMap<u32, u32> = LruHashMap::with_max_entries(4096, 0);

/// The per-folio pass each thread is in, by thread id.
#[map]
static PASSES: LruHashMap<u32, PassState> = LruHashMap::with_max_entries(16384, 0);

/// `iou-wrk-` as a little-endian word: the first 8 bytes of an io-wq worker's name.
const IO_WQ_PREFIX: u64 = u64::from_le_bytes(*b"iou-wrk-");

#[tracepoint]
pub fn writeback_single_inode_start(_ctx: TracePointContext) -> u32 {
    let l = WBC_LAYOUT.load();
    if l.resolved == 0 {
        return 0;
    }
    // SAFETY: bpf_get_current_task has no preconditions; the result is only used as an address
    // for bpf_probe_read_kernel.
    let task = unsafe { bpf_get_current_task() };
    // Kernel threads have no mm; the flusher is a kworker.
    if read::<u64>(task + l.task_mm as u64) == Some(0) {
        let _ = FLUSHER_INODE.insert(&tid(), &1, 0);
    }
    0
}

#[tracepoint]
pub fn writeback_single_inode(_ctx: TracePointContext) -> u32 {
    let tid = tid();
    let _ = FLUSHER_INODE.remove(&tid);
    end_pass(tid);
    0
}

#[tracepoint]
pub fn ext4_writepages_result(ctx: TracePointContext) -> u32 {
    let f = EXT4_WP_RESULT_FMT.load();
    if f.dev == 0 {
        return 0;
    }
    // SAFETY (all three): offsets from this event's format file, sizes checked by the daemon
    // (dev_t and int: 4 bytes); read_at copies through bpf_probe_read, which fails instead of
    // faulting.
    let fields = unsafe {
        (
            ctx.read_at::<u32>(f.dev as usize),
            ctx.read_at::<i32>(f.pages_written as usize),
            ctx.read_at::<i32>(f.sync_mode as usize),
        )
    };
    let (Ok(dev), Ok(pages), Ok(sync_mode)) = fields else {
        return 0;
    };
    if pages <= 0 {
        return 0;
    }
    let key = SubmitKey {
        dev,
        sync_mode: sync_mode as u32,
        caller: caller(tid()) as u32,
        _reserved: 0,
    };
    add(&key, 1, pages as u64);
    0
}

#[btf_tracepoint(function = "wbc_writepage")]
pub fn wbc_writepage(ctx: BtfTracePointContext) -> u32 {
    let _ = try_wbc_writepage(&ctx);
    0
}

#[inline(always)]
fn try_wbc_writepage(ctx: &BtfTracePointContext) -> Option<()> {
    let l = WBC_LAYOUT.load();
    if l.resolved == 0 {
        return None;
    }
    // Kept as a number: arithmetic on the typed pointer is rejected by the verifier.
    let wbc: u64 = ctx.arg(0);
    let nr_to_write: i64 = read(wbc + l.nr_to_write as u64)?;
    let folio = current_folio(wbc, &l)?;
    let mapping: u64 = read(folio + l.folio_mapping as u64)?;
    if mapping == 0 {
        return None;
    }
    let size = folio_pages(folio, &l);
    let tid = tid();
    if let Some(state) = PASSES.get_ptr_mut(&tid) {
        // SAFETY: a value pointer of this map, valid for this program run; only this thread
        // touches its own entry.
        let state = unsafe { &mut *state };
        if state.wbc == wbc && state.mapping == mapping && nr_to_write <= state.last_nr_to_write {
            let pages = match size {
                Some(pages) => pages,
                None => {
                    // The previous folio was counted as one page; add the rest of its size.
                    let rest = state.last_nr_to_write - nr_to_write - 1;
                    1 + if rest > 0 { rest as u64 } else { 0 }
                }
            };
            state.last_nr_to_write = nr_to_write;
            let key = state.key;
            add(&key, 0, pages);
            return Some(());
        }
    }
    let sync_mode: u32 = read(wbc + l.sync_mode as u64)?;
    let host: u64 = read(mapping + l.mapping_host as u64).unwrap_or(0);
    let key = SubmitKey {
        dev: if host == 0 { 0 } else { dev_of_inode(host) },
        sync_mode,
        caller: caller(tid) as u32,
        _reserved: 0,
    };
    let state = PassState {
        wbc,
        mapping,
        last_nr_to_write: nr_to_write,
        key,
    };
    let _ = PASSES.insert(&tid, &state, 0);
    add(&key, 1, size.unwrap_or(1));
    Some(())
}

/// The folio the event is about: `wbc->fbatch.folios[wbc->fbatch.i - 1]`.
#[inline(always)]
fn current_folio(wbc: u64, l: &WbcLayout) -> Option<u64> {
    let fbatch = wbc + l.fbatch as u64;
    let i: u8 = read(fbatch + l.fbatch_i as u64)?;
    // The explicit bounds keep the index provably inside the array.
    if i == 0 || i as u32 > l.fbatch_len || i > 64 {
        return None;
    }
    let slot = (i - 1) as u64;
    read(fbatch + l.fbatch_folios as u64 + slot * 8)
}

/// `folio_nr_pages(folio)` (include/linux/mm.h), or `None` when the layout lacks `_nr_pages`
/// (`_folio_nr_pages` on older kernels).
#[inline(always)]
fn folio_pages(folio: u64, l: &WbcLayout) -> Option<u64> {
    if l.folio_nr_pages == 0 || l.pg_head >= 64 {
        return None;
    }
    let flags: u64 = read(folio + l.folio_flags as u64)?;
    if flags & (1 << l.pg_head) == 0 {
        return Some(1);
    }
    let pages: u32 = read(folio + l.folio_nr_pages as u64)?;
    Some(pages as u64)
}

/// Forgets the thread's per-folio pass: called where a pass certainly ended (sync call exit,
/// end of a flusher inode), so a later pass at the same stack address is not merged into it.
#[inline(always)]
pub(crate) fn end_pass(tid: u32) {
    let _ = PASSES.remove(&tid);
}

#[inline(always)]
fn tid() -> u32 {
    bpf_get_current_pid_tgid() as u32
}

#[inline(always)]
fn caller(tid: u32) -> WbCaller {
    // SAFETY: the value is only read within this program run.
    if let Some(start) = unsafe { SYNC_INFLIGHT.get(&tid) } {
        return WbCaller::for_raw_syscall(start.syscall);
    }
    if FLUSHER_INODE.get_ptr(&tid).is_some() {
        return WbCaller::Flusher;
    }
    if let Ok(comm) = bpf_get_current_comm() {
        let mut head = [0u8; 8];
        head.copy_from_slice(&comm[..8]);
        if u64::from_le_bytes(head) == IO_WQ_PREFIX {
            return WbCaller::IoUring;
        }
    }
    WbCaller::Other
}

#[inline(always)]
fn add(key: &SubmitKey, passes: u64, pages: u64) {
    if let Some(stats) = value_or_insert(&WB_SUBMISSIONS, key, &SubmitStats::ZERO) {
        // SAFETY: this CPU's value in a per-CPU map, valid for this program run.
        let stats = unsafe { &mut *stats };
        stats.passes += passes;
        stats.pages += pages;
    }
}
