//! Writeback submissions: writepages passes over an inode by device, sync mode and caller.
//!
//! Sources:
//! - ext4 (`tp_btf/ext4_writepages_result(struct inode *, struct writeback_control *, int ret,
//!   int pages_written)`, include/trace/events/ext4.h): one event at the end of each
//!   `ext4_do_writepages()` pass, with the pages it submitted. Passes that submitted nothing
//!   return before any read; the device is `inode->i_sb->s_dev` and the sync mode
//!   `wbc->sync_mode`, as in the classic record.
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
//! Caller: the task's in-flight sync call (`inflight`, set at sys_enter and
//! cleared at sys_exit) if any; otherwise `flusher` when a kernel thread is between
//! `tp_btf/writeback_single_inode_start` and `tp_btf/writeback_single_inode`
//! (`__writeback_single_inode()`, which the flusher runs for every inode it writes back; user
//! tasks reach it only through write_inode_now()/sync_inode_metadata(), and jbd2's ordered-data
//! writepages never do); otherwise `io_uring` in an io-wq worker (thread name `iou-wrk-<pid>`,
//! set by io_uring/io-wq.c), where io_uring fsync and sync_file_range requests always run;
//! otherwise `other`.

use aya_ebpf::{
    Global,
    macros::{btf_tracepoint, map},
    maps::{LruHashMap, PerCpuArray, PerCpuHashMap},
    programs::BtfTracePointContext,
};
use probe_common::map_overflow;
use probe_common::slots::{SLOT_BITS, Slot, array_len};
use probe_common::submissions::{
    Ext4WritepagesResultFormat, PassState, SubmitKey, SubmitStats, WbCaller, WbcLayout,
};

use crate::{
    hist::slot_or_insert,
    kernel::{
        btf_load::{load, read},
        current_task,
        fd_dev::{dev_of_inode, dev_of_typed_inode},
        inflight,
        task_storage::{self, task_storage},
    },
};

// `#[used]`: never merged with a promoted constant (see `kernel::globals`).
#[unsafe(no_mangle)]
#[used]
static EXT4_WP_RESULT_FMT: Global<Ext4WritepagesResultFormat> =
    Global::new(Ext4WritepagesResultFormat {
        wbc_sync_mode: 0,
        resolved: 0,
    });

// `#[used]`: never merged with a promoted constant (see `kernel::globals`).
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

/// The slots in front of [`WB_SUBMISSIONS`] (`probe_common::slots`): a host's few busy keys
/// are counted without a hash lookup.
#[map]
static WB_SUBMISSION_SLOTS: PerCpuArray<Slot<SubmitStats>> =
    PerCpuArray::with_max_entries(array_len(SLOT_BITS), 0);

/// Kernel threads that write back inodes, by thread id: [`IN_INODE`] inside
/// `__writeback_single_inode()`, [`IN_INODE_WITH_PASS`] once a per-folio pass was opened there,
/// [`NOT_IN_INODE`] between inodes. LRU, so exited threads' entries make room. Used where task
/// storage is not ([`FLUSHER_TASK`]).
#[map]
static FLUSHER_INODE: LruHashMap<u32, u32> = LruHashMap::with_max_entries(4096, 0);

task_storage! {
    /// [`FLUSHER_INODE`]'s state of each thread, in task storage where the kernel allows it
    /// (created zero, [`NOT_IN_INODE`]).
    static FLUSHER_TASK: FlusherTaskDef<u32>;
}

/// The thread's flusher-inode state ([`FLUSHER_TASK`] or [`FLUSHER_INODE`]), created as
/// [`NOT_IN_INODE`] with `create`.
#[inline(always)]
fn flusher_state(tid: u32, create: bool) -> Option<*mut u32> {
    if task_storage::available() {
        return task_storage::get(&FLUSHER_TASK, 0, create);
    }
    if let Some(state) = FLUSHER_INODE.get_ptr_mut(&tid) {
        return Some(state);
    }
    if !create {
        return None;
    }
    let _ = FLUSHER_INODE.insert(&tid, &NOT_IN_INODE, 0);
    FLUSHER_INODE.get_ptr_mut(&tid)
}

/// The per-folio pass each thread is in, by thread id (where task storage is not).
#[map]
static PASSES: LruHashMap<u32, PassState> = LruHashMap::with_max_entries(16384, 0);

task_storage! {
    /// The per-folio pass of each thread, in task storage where the kernel allows it; `wbc == 0`:
    /// none.
    static PASS_TASK: PassTaskDef<PassState>;
}

/// The thread's current per-folio pass, if any.
#[inline(always)]
fn pass_state(tid: u32) -> Option<*mut PassState> {
    if task_storage::available() {
        let v: *mut PassState = task_storage::get(&PASS_TASK, 0, false)?;
        // SAFETY: a task storage value pointer, valid for this program run.
        return (unsafe { (*v).wbc } != 0).then_some(v);
    }
    PASSES.get_ptr_mut(&tid)
}

/// The thread starts the per-folio pass `state`.
#[inline(always)]
fn start_pass(tid: u32, state: &PassState) {
    if task_storage::available() {
        if let Some(v) = task_storage::get::<_, PassState>(&PASS_TASK, 0, true) {
            // SAFETY: a task storage value pointer, valid for this program run; only this
            // thread touches its own value.
            unsafe { *v = *state };
        }
    } else {
        let _ = PASSES.insert(&tid, state, 0);
    }
}

/// [`FLUSHER_INODE`] values. An entry outlives the inode (it is reused by the thread's next
/// one), so "not in an inode" is a value too.
const NOT_IN_INODE: u32 = 0;
const IN_INODE: u32 = 1;
const IN_INODE_WITH_PASS: u32 = 2;

/// `iou-wrk-` as a little-endian word: the first 8 bytes of an io-wq worker's name.
const IO_WQ_PREFIX: u64 = u64::from_le_bytes(*b"iou-wrk-");

/// `__writeback_single_inode()` starts (include/trace/events/writeback.h,
/// `writeback_single_inode_template(struct inode *, struct writeback_control *, unsigned long)`;
/// no argument is read).
#[btf_tracepoint(function = "writeback_single_inode_start")]
pub fn writeback_single_inode_start(_ctx: BtfTracePointContext) -> u32 {
    let l = WBC_LAYOUT.load();
    if l.resolved == 0 {
        return 0;
    }
    // The flusher is a kworker, a kernel thread.
    if current_task::is_kernel_thread(l.task_mm) != Some(true) {
        return 0;
    }
    let tid = tid();
    // A kworker writes inode after inode: its entry is reused in place rather than inserted
    // (a hash update allocates) and deleted each time.
    if let Some(state) = flusher_state(tid, true) {
        // SAFETY: a map or task storage value pointer, valid for this program run; only this
        // thread writes its own entry.
        unsafe { *state = IN_INODE };
    }
    0
}

/// `__writeback_single_inode()` ends. Only kernel threads have an entry (see the start), so a
/// user task returns after one lookup.
#[btf_tracepoint(function = "writeback_single_inode")]
pub fn writeback_single_inode(_ctx: BtfTracePointContext) -> u32 {
    let tid = tid();
    let Some(state) = flusher_state(tid, false) else {
        return 0;
    };
    // SAFETY: a value pointer of this map, valid for this program run; only this thread
    // writes its own entry.
    let was = unsafe { *state };
    if was == NOT_IN_INODE {
        return 0;
    }
    // SAFETY: as above.
    unsafe { *state = NOT_IN_INODE };
    if was == IN_INODE_WITH_PASS {
        end_pass(tid);
    }
    0
}

#[btf_tracepoint(function = "ext4_writepages_result")]
pub fn ext4_writepages_result(ctx: BtfTracePointContext) -> u32 {
    let _ = try_ext4_writepages_result(&ctx);
    0
}

#[inline(always)]
fn try_ext4_writepages_result(ctx: &BtfTracePointContext) -> Option<()> {
    // Most passes of an fsync-heavy load submit nothing new: return before any read.
    let pages = ctx.arg::<u64>(3) as i32;
    if pages <= 0 {
        return None;
    }
    let f = EXT4_WP_RESULT_FMT.load();
    if f.resolved == 0 {
        return None;
    }
    let inode: u64 = ctx.arg(0);
    let wbc: u64 = ctx.arg(1);
    if inode == 0 || wbc == 0 {
        return None;
    }
    // Plain loads through the BTF-typed arguments: the verifier checks the load-time constant
    // offsets against the structs' BTF and makes the loads fault-safe, with no helper call.
    let dev = dev_of_typed_inode(inode)?;
    let sync_mode: u32 = load(wbc, f.wbc_sync_mode);
    let key = SubmitKey {
        dev,
        sync_mode: sync_mode as u16,
        caller: caller(tid(), false) as u16,
    };
    add(&key, 1, pages as u64);
    Some(())
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
    if let Some(state) = pass_state(tid) {
        // SAFETY: a map or task storage value pointer, valid for this program run; only this
        // thread touches its own entry.
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
        sync_mode: sync_mode as u16,
        caller: caller(tid, true) as u16,
    };
    let state = PassState {
        wbc,
        mapping,
        last_nr_to_write: nr_to_write,
        key,
    };
    start_pass(tid, &state);
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

/// Forgets the thread's per-folio pass: called where a pass opened inside a sync call or a
/// flusher inode certainly ended (that call's exit, the inode's end), so a later pass at the
/// same stack address is not merged into it. Threads that opened none skip the delete.
#[inline(always)]
pub(crate) fn end_pass(tid: u32) {
    if task_storage::available() {
        if let Some(v) = task_storage::get::<_, PassState>(&PASS_TASK, 0, false) {
            // SAFETY: a task storage value pointer, valid for this program run.
            unsafe { (*v).wbc = 0 };
        }
    } else {
        let _ = PASSES.remove(&tid);
    }
}

/// The key of this thread's entries in the hashes of kernels without task storage (its thread
/// id); 0 where task storage holds them, which saves a helper call per event.
#[inline(always)]
fn tid() -> u32 {
    task_storage::hash_tid()
}

/// Who is writing back in thread `tid`. With `opens_pass`, the thread's sync call or flusher
/// inode is marked as having a per-folio pass, which its end then forgets.
///
/// A user task is in a sync call or in an io-wq worker; a kernel thread is the flusher or other.
/// So the task's `mm` (kernel threads have none) decides which one per-thread lookup is made:
/// the loop and jbd2 threads' passes made two lookups and a name copy before.
#[inline(always)]
fn caller(tid: u32, opens_pass: bool) -> WbCaller {
    // Unknown (`None`) where the offset is unresolved: every lookup is made then.
    let mm_offset = load_time_task_mm();
    let kernel_thread = if mm_offset == 0 {
        None
    } else {
        current_task::is_kernel_thread(mm_offset)
    };
    if kernel_thread != Some(true)
        && let Some(call) = inflight::current(tid)
    {
        // SAFETY: a value pointer of this map, valid for this program run; only this thread
        // writes its own entry.
        let call = unsafe { &mut *call };
        if opens_pass {
            call.pass_open = 1;
        }
        return WbCaller::for_raw_syscall(call.start.syscall);
    }
    if kernel_thread != Some(false)
        && let Some(state) = flusher_state(tid, false)
        // SAFETY: a map or task storage value pointer, valid for this program run.
        && unsafe { *state } != NOT_IN_INODE
    {
        if opens_pass {
            // SAFETY: as above.
            unsafe { *state = IN_INODE_WITH_PASS };
        }
        return WbCaller::Flusher;
    }
    if kernel_thread == Some(true) {
        // io-wq workers share their process's `mm` (before 5.12 too, through use_mm()).
        return WbCaller::Other;
    }
    let comm = current_task::comm();
    let mut head = [0u8; 8];
    head.copy_from_slice(&comm[..8]);
    if u64::from_le_bytes(head) == IO_WQ_PREFIX {
        return WbCaller::IoUring;
    }
    WbCaller::Other
}

/// `task_struct.mm`'s offset (0 while unresolved: every task then takes every lookup).
#[inline(always)]
fn load_time_task_mm() -> u32 {
    // `Global<T>` is `repr(transparent)` over `MaybeUninit<T>`, which has `T`'s layout.
    let layout = (&raw const WBC_LAYOUT).cast::<WbcLayout>();
    // SAFETY: a read of a member of an initialised static; volatile, so that LLVM does not fold
    // in the compile-time value the daemon replaces at load time. One member instead of the
    // whole layout (`Global::load`).
    unsafe { core::ptr::read_volatile(&raw const (*layout).task_mm) }
}

#[inline(always)]
fn add(key: &SubmitKey, passes: u64, pages: u64) {
    if let Some(stats) = slot_or_insert(
        &WB_SUBMISSION_SLOTS,
        SLOT_BITS,
        &WB_SUBMISSIONS,
        key,
        &SubmitStats::ZERO,
        map_overflow::WB_SUBMISSIONS,
    ) {
        // SAFETY: this CPU's value in a per-CPU map, valid for this program run.
        let stats = unsafe { &mut *stats };
        stats.passes += passes;
        stats.pages += pages;
    }
}
