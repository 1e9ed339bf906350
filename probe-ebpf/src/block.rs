//! Block layer: requests by device × op × REQ_SYNC with bytes and flags, issue → complete and
//! allocation → issue latency, errors; bio flags before flush emulation.
//!
//! BTF tracepoints (include/trace/events/block.h; prototypes checked by the daemon in BTF):
//! `block_rq_issue(struct request *rq)` (`(q, rq)` before 5.11), `block_rq_requeue(rq)`,
//! `block_rq_complete(rq, blk_status_t error, unsigned int nr_bytes)`, `block_bio_queue(bio)`.
//! Every struct offset, flag bit and op value comes from the `BLOCK_LAYOUT` global (BTF).
//!
//! Issue → complete latency is map-free where the kernel stamps `rq->io_start_time_ns`
//! (`blk_mq_start_request`, right after the issue tracepoint, when `QUEUE_FLAG_STATS` is set and
//! the request is not passthrough; since 6.9 it may be the plug's cached time, a little before
//! the tracepoint); otherwise issue stores its time in an LRU map keyed by the request's
//! address. Completion counts each request once: a partial completion
//! (`nr_bytes < __data_len`) is not the end, and a zero-byte completion of a read or write is the
//! flush machinery completing a request a second time (`blk_flush_complete_seq` ends the data
//! request again after the post-flush) or ending an empty pre-flush that never reached the driver.

use core::mem::MaybeUninit;

use aya_ebpf::{
    helpers::{bpf_ktime_get_ns, bpf_probe_read_kernel, generated},
    macros::{btf_tracepoint, map},
    maps::{LruHashMap, PerCpuHashMap},
    programs::BtfTracePointContext,
};
use probe_common::block::{
    BioCounts, BlockKey, BlockLayout, DISK_IN_REQUEST, FLAG_COUNT, FLAG_SYNC, HAS_IO_START_TIME,
    HAS_START_TIME, HAS_STATS_FLAG, RqStats,
};

use crate::hist::{record, value_or_insert};

/// Resolved by the daemon from BTF; all zero (unresolved) makes every probe here a no-op.
/// A plain static read field by field with [`layout!`] rather than an `aya_ebpf::Global`, whose
/// `load()` copies the whole struct on every event (about 40 loads and a dozen stack spills in
/// the compiled program). `#[used]`: see globals.rs; without it LLVM may merge equal constants
/// into this global.
#[used]
#[unsafe(no_mangle)]
static BLOCK_LAYOUT: BlockLayout = BlockLayout::ZERO;

/// One field of [`BLOCK_LAYOUT`]. After loading, the verifier knows these values (the global
/// lives in a frozen read-only map) and drops the branches they rule out.
macro_rules! layout {
    ($field:ident) => {
        // SAFETY: a read of a field of an initialised static. Volatile, so that LLVM does not
        // fold in the compile-time value the daemon replaces at load time.
        unsafe { core::ptr::read_volatile(&raw const BLOCK_LAYOUT.$field) }
    };
}

/// Request counters, queue latency and issue → complete latency by (dev, op, sync): one value,
/// so that issue and completion each do one map lookup. Feeds requests, bytes, request-level
/// flags, errors and both latency histograms.
#[map]
static BLOCK_RQ_STATS: PerCpuHashMap<BlockKey, RqStats> = PerCpuHashMap::with_max_entries(4096, 0);

/// Bio counters by (dev, op). Feeds bio-level flags.
#[map]
static BLOCK_BIO_COUNTS: PerCpuHashMap<BlockKey, BioCounts> =
    PerCpuHashMap::with_max_entries(4096, 0);

/// Issue time by request address, for requests the kernel does not time itself. LRU, so
/// requests whose completion is never seen (attach races, driver timeouts) cannot fill it.
#[map]
static BLOCK_INFLIGHT: LruHashMap<u64, u64> = LruHashMap::with_max_entries(16384, 0);

#[inline(always)]
fn read<T>(addr: u64) -> Option<T> {
    if addr == 0 {
        return None;
    }
    // SAFETY: bpf_probe_read_kernel copies from an arbitrary kernel address into a stack value
    // and returns an error instead of faulting on a bad address.
    unsafe { bpf_probe_read_kernel(addr as *const T) }.ok()
}

#[inline(always)]
fn now() -> u64 {
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    unsafe { bpf_ktime_get_ns() }
}

/// Words of `struct request` read with one helper call: every field the probes use (on 6.18:
/// `q` at 0 … `io_start_time_ns` at 112). One 128-byte `bpf_probe_read_kernel` costs about what
/// a 4-byte one does: the helper call, not the copy, is the cost.
const RQ_WORDS: usize = 16;

/// Words of `struct request_queue` read at once: `queue_flags` and `disk` (32 and 104 on 6.18).
const Q_WORDS: usize = 14;

/// Room for the first `N` words of a kernel struct, filled in place by [`Window::fill`] (a
/// window returned by value would be copied word by word on the BPF stack).
struct Window<const N: usize> {
    base: u64,
    words: MaybeUninit<[u64; N]>,
}

/// A filled [`Window`]. A field outside it (another kernel's layout) is read on its own; which
/// case applies is known to the verifier (the offsets are load-time constants), which keeps
/// only that one.
struct Filled<'a, const N: usize> {
    base: u64,
    words: &'a [u64; N],
}

impl<const N: usize> Window<N> {
    #[inline(always)]
    fn new(base: u64) -> Self {
        Window {
            base,
            words: MaybeUninit::uninit(),
        }
    }

    /// Reads the words with one helper call.
    #[inline(always)]
    fn fill(&mut self) -> Option<Filled<'_, N>> {
        if self.base == 0 {
            return None;
        }
        // SAFETY: bpf_probe_read_kernel writes at most `N * 8` bytes into `words` and returns an
        // error instead of faulting on a bad address.
        let ret = unsafe {
            generated::bpf_probe_read_kernel(
                self.words.as_mut_ptr().cast(),
                (N * 8) as u32,
                self.base as *const _,
            )
        };
        (ret == 0).then(|| Filled {
            base: self.base,
            // SAFETY: a zero return means all `N * 8` bytes were written.
            words: unsafe { self.words.assume_init_ref() },
        })
    }
}

impl<const N: usize> Filled<'_, N> {
    /// The 8-byte field at byte `off`.
    #[inline(always)]
    fn u64_at(&self, off: u32) -> Option<u64> {
        let i = (off / 8) as usize;
        if off.is_multiple_of(8) && i < N {
            Some(self.words[i])
        } else {
            read(self.base + off as u64)
        }
    }

    /// The 4-byte field at byte `off`.
    #[inline(always)]
    fn u32_at(&self, off: u32) -> Option<u32> {
        let i = (off / 8) as usize;
        if off.is_multiple_of(4) && i < N {
            Some(half(self.words[i], off))
        } else {
            read(self.base + off as u64)
        }
    }
}

/// The request fields the probes use, from one read of its first [`RQ_WORDS`] words.
struct RqFields {
    q: u64,
    /// `rq->rq_disk` where [`DISK_IN_REQUEST`], else 0 (the disk is `q->disk`).
    disk: u64,
    opf: u32,
    data_len: u32,
    /// `start_time_ns` if asked for and present, else 0.
    start_ns: u64,
    /// `io_start_time_ns` if asked for and present, else 0.
    io_start_ns: u64,
}

#[inline(always)]
fn rq_fields(rq: u64, start: bool, io_start: bool) -> Option<RqFields> {
    let features = layout!(features);
    let mut window = Window::<RQ_WORDS>::new(rq);
    let w = window.fill()?;
    Some(RqFields {
        q: w.u64_at(layout!(rq_q))?,
        disk: if features & DISK_IN_REQUEST != 0 {
            w.u64_at(layout!(disk))?
        } else {
            0
        },
        opf: w.u32_at(layout!(rq_cmd_flags))?,
        data_len: w.u32_at(layout!(rq_data_len))?,
        start_ns: if start && features & HAS_START_TIME != 0 {
            w.u64_at(layout!(rq_start_time_ns)).unwrap_or(0)
        } else {
            0
        },
        io_start_ns: if io_start && features & HAS_IO_START_TIME != 0 {
            w.u64_at(layout!(rq_io_start_time_ns)).unwrap_or(0)
        } else {
            0
        },
    })
}

/// The 4-byte-aligned field at byte `off` (taken modulo 8) of a native-endian word.
#[inline(always)]
fn half(word: u64, off: u32) -> u32 {
    let high = !off.is_multiple_of(8) == cfg!(target_endian = "little");
    (if high { word >> 32 } else { word }) as u32
}

/// Argument `n` (0 or 1) as a raw value. The index comes from a load-time global; the verifier
/// accepts only constant offsets into the context (it prunes the branch not taken, which may
/// even be past the prototype's last argument), hence the branch.
#[inline(always)]
fn arg(ctx: &BtfTracePointContext, n: u32) -> u64 {
    if n == 0 {
        ctx.arg::<u64>(0)
    } else {
        ctx.arg::<u64>(1)
    }
}

/// Counts the flags of `opf` into `counters`, branch-free: one AND and compare per flag.
#[inline(always)]
fn count_flags(counters: &mut [u64; FLAG_COUNT], opf: u32) {
    let masks: [u32; FLAG_COUNT] = layout!(flag_masks);
    for i in 0..FLAG_COUNT {
        counters[i] += ((opf & masks[i]) != 0) as u64;
    }
}

/// The whole-disk device as the classic `block_rq_*` tracepoints report it:
/// `MKDEV(disk->major, disk->first_minor)`. One read where the two ints share a word (they are
/// the first two members of `struct gendisk`).
#[inline(always)]
fn disk_dev(disk: u64) -> Option<u32> {
    let (major_off, minor_off) = (layout!(disk_major), layout!(disk_first_minor));
    let (major, minor) = if major_off / 8 == minor_off / 8 {
        let word: u64 = read(disk + (major_off / 8 * 8) as u64)?;
        (half(word, major_off), half(word, minor_off))
    } else {
        (
            read::<u32>(disk + major_off as u64)?,
            read::<u32>(disk + minor_off as u64)?,
        )
    };
    Some((major << 20) | minor)
}

/// The aggregation key of a request with flags `opf` on `dev`.
#[inline(always)]
fn key(dev: u32, opf: u32) -> BlockKey {
    BlockKey {
        dev,
        op: (opf & layout!(op_mask)) as u16,
        sync: ((opf & layout!(flag_masks)[FLAG_SYNC]) != 0) as u16,
    }
}

/// True when the kernel will stamp `io_start_time_ns` for a request of `op` on a queue whose
/// `queue_flags` are `flags` (`blk_mq_start_request`: QUEUE_FLAG_STATS and not passthrough).
#[inline(always)]
fn kernel_times_it(features: u32, op: u32, flags: Option<u64>) -> bool {
    let needed = HAS_IO_START_TIME | HAS_STATS_FLAG;
    features & needed == needed
        && op != layout!(op_drv_in)
        && op != layout!(op_drv_out)
        && flags.is_some_and(|f| f & layout!(stats_flag_mask) != 0)
}

#[btf_tracepoint(function = "block_rq_issue")]
pub fn block_rq_issue(ctx: BtfTracePointContext) -> i32 {
    let _ = try_issue(&ctx);
    0
}

/// Three helper reads on 6.18: the request's first 128 bytes (q, cmd_flags, __data_len,
/// start_time_ns), the queue's (disk, queue_flags), the disk's major and first minor.
#[inline(always)]
fn try_issue(ctx: &BtfTracePointContext) -> Option<()> {
    if layout!(rq_resolved) == 0 {
        return None;
    }
    let features = layout!(features);
    let rq_addr = arg(ctx, layout!(issue_arg));
    let rq = rq_fields(rq_addr, true, false)?;
    let (disk, queue_flags) = {
        let mut window = Window::<Q_WORDS>::new(rq.q);
        let q = window.fill()?;
        let disk = if features & DISK_IN_REQUEST != 0 {
            rq.disk
        } else {
            q.u64_at(layout!(disk))?
        };
        let flags = if features & HAS_STATS_FLAG != 0 {
            q.u64_at(layout!(q_queue_flags))
        } else {
            None
        };
        (disk, flags)
    };
    let key = key(disk_dev(disk)?, rq.opf);
    let op = key.op as u32;
    let t = now();
    if let Some(v) = value_or_insert(&BLOCK_RQ_STATS, &key, &RqStats::ZERO) {
        // SAFETY: this CPU's value in a per-CPU map, valid for the rest of this program run.
        let v = unsafe { &mut *v };
        v.counts.requests += 1;
        v.counts.bytes += rq.data_len as u64;
        count_flags(&mut v.counts.flags, rq.opf);
        // 0: the kernel did not need a timestamp for this request (no iostats, no elevator).
        if rq.start_ns != 0 && t >= rq.start_ns {
            record(&mut v.queue, t - rq.start_ns);
        }
    }
    crate::stall_events::block_issued(key.dev, op, t);
    if !kernel_times_it(features, op, queue_flags) {
        let _ = BLOCK_INFLIGHT.insert(&rq_addr, &t, 0);
    }
    Some(())
}

#[btf_tracepoint(function = "block_rq_requeue")]
pub fn block_rq_requeue(ctx: BtfTracePointContext) -> i32 {
    if layout!(rq_resolved) != 0 {
        // The request goes back to the queue; its next issue starts a new measurement (the
        // kernel also restamps io_start_time_ns then).
        let _ = BLOCK_INFLIGHT.remove(&arg(&ctx, layout!(requeue_arg)));
    }
    0
}

#[btf_tracepoint(function = "block_rq_complete")]
pub fn block_rq_complete(ctx: BtfTracePointContext) -> i32 {
    let _ = try_complete(&ctx);
    0
}

/// Three helper reads on 6.18: the request's first 128 bytes (__data_len, cmd_flags, q,
/// io_start_time_ns), `q->disk`, the disk's major and first minor.
#[inline(always)]
fn try_complete(ctx: &BtfTracePointContext) -> Option<()> {
    if layout!(rq_resolved) == 0 {
        return None;
    }
    // block_rq_complete(struct request *rq, blk_status_t error, unsigned int nr_bytes).
    let rq_addr = ctx.arg::<u64>(0);
    let error = ctx.arg::<u64>(1) as u32;
    let nr_bytes = ctx.arg::<u64>(2) as u32;
    let rq = rq_fields(rq_addr, false, true)?;
    if nr_bytes < rq.data_len {
        return None; // a partial completion: the request goes on
    }
    let op = rq.opf & layout!(op_mask);
    if nr_bytes == 0 && (op == layout!(op_read) || op == layout!(op_write)) {
        return None; // a second (flush-sequence) completion, or a pre-flush never issued
    }
    let disk = if layout!(features) & DISK_IN_REQUEST != 0 {
        rq.disk
    } else {
        read(rq.q + layout!(disk) as u64)?
    };
    let key = key(disk_dev(disk)?, rq.opf);
    let t = now();
    let stamped = rq.io_start_ns;
    let issued = if stamped != 0 {
        Some(stamped)
    } else {
        // SAFETY: the value is copied out before the entry is removed.
        let t0 = unsafe { BLOCK_INFLIGHT.get(&rq_addr) }.copied();
        if t0.is_some() {
            let _ = BLOCK_INFLIGHT.remove(&rq_addr);
        }
        t0
    };
    if let Some(issued) = issued {
        crate::stall_events::block_completed(key.dev, op, issued, t);
    }
    let latency = issued.filter(|i| t >= *i).map(|i| t - i);
    if error == 0 && latency.is_none() {
        return None;
    }
    let v = value_or_insert(&BLOCK_RQ_STATS, &key, &RqStats::ZERO)?;
    // SAFETY: this CPU's value in a per-CPU map, valid for the rest of this program run.
    let v = unsafe { &mut *v };
    if error != 0 {
        v.counts.errors += 1;
    }
    if let Some(ns) = latency {
        record(&mut v.latency, ns);
    }
    Some(())
}

#[btf_tracepoint(function = "block_bio_queue")]
pub fn block_bio_queue(ctx: BtfTracePointContext) -> i32 {
    let _ = try_bio_queue(&ctx);
    0
}

/// Words of `struct bio` read at once: `bi_bdev` and `bi_opf` are its 2nd and 3rd members.
const BIO_WORDS: usize = 3;

/// `bio->bi_opf` and `bio->bi_bdev->bd_dev` (the partition, before any remapping): what the
/// filesystem asked for, before blk-flush strips PREFLUSH/FUA on devices without them.
/// Two helper reads where `bi_bdev` and `bi_opf` are among the bio's first 24 bytes.
#[inline(always)]
fn try_bio_queue(ctx: &BtfTracePointContext) -> Option<()> {
    if layout!(bio_resolved) == 0 {
        return None;
    }
    let bio = arg(ctx, layout!(bio_queue_arg));
    let (opf_off, bdev_off) = (layout!(bio_bi_opf), layout!(bio_bi_bdev));
    let (opf, bdev) = if opf_off.is_multiple_of(4)
        && bdev_off.is_multiple_of(8)
        && (opf_off / 8) < BIO_WORDS as u32
        && (bdev_off / 8) < BIO_WORDS as u32
    {
        let words: [u64; BIO_WORDS] = read(bio)?;
        (
            half(*words.get((opf_off / 8) as usize)?, opf_off),
            *words.get((bdev_off / 8) as usize)?,
        )
    } else {
        (
            read::<u32>(bio + opf_off as u64)?,
            read::<u64>(bio + bdev_off as u64)?,
        )
    };
    let dev: u32 = read(bdev + layout!(bdev_bd_dev) as u64)?;
    let key = BlockKey {
        dev,
        op: (opf & layout!(op_mask)) as u16,
        sync: 0,
    };
    let c = value_or_insert(&BLOCK_BIO_COUNTS, &key, &BioCounts::ZERO)?;
    // SAFETY: this CPU's value in a per-CPU map, valid for the rest of this program run.
    let c = unsafe { &mut *c };
    c.bios += 1;
    count_flags(&mut c.flags, opf);
    Some(())
}
