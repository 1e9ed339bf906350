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

use aya_ebpf::{
    Global,
    helpers::{bpf_ktime_get_ns, bpf_probe_read_kernel},
    macros::{btf_tracepoint, map},
    maps::{LruHashMap, PerCpuHashMap},
    programs::BtfTracePointContext,
};
use probe_common::{
    block::{
        BioCounts, BlockKey, BlockLayout, DISK_IN_REQUEST, FLAG_COUNT, FLAG_SYNC,
        HAS_IO_START_TIME, HAS_START_TIME, HAS_STATS_FLAG, RqCounts,
    },
    hist::Log2Hist,
};

use crate::hist::{record, value_or_insert};

/// Resolved by the daemon from BTF; all zero (unresolved) makes every probe here a no-op.
/// `#[used]`: see globals.rs; without it LLVM may merge equal constants into this global.
#[used]
#[unsafe(no_mangle)]
static BLOCK_LAYOUT: Global<BlockLayout> = Global::new(BlockLayout::ZERO);

/// Request counters by (dev, op, sync). Feeds requests, bytes, request-level flags and errors.
#[map]
static BLOCK_RQ_COUNTS: PerCpuHashMap<BlockKey, RqCounts> =
    PerCpuHashMap::with_max_entries(4096, 0);

/// Bio counters by (dev, op). Feeds bio-level flags.
#[map]
static BLOCK_BIO_COUNTS: PerCpuHashMap<BlockKey, BioCounts> =
    PerCpuHashMap::with_max_entries(4096, 0);

/// Issue → complete latency by (dev, op, sync).
#[map]
static BLOCK_RQ_LATENCY: PerCpuHashMap<BlockKey, Log2Hist> =
    PerCpuHashMap::with_max_entries(4096, 0);

/// Allocation → issue latency by (dev, op).
#[map]
static BLOCK_QUEUE_LATENCY: PerCpuHashMap<BlockKey, Log2Hist> =
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
fn count_flags(counters: &mut [u64; FLAG_COUNT], opf: u32, masks: &[u32; FLAG_COUNT]) {
    for i in 0..FLAG_COUNT {
        counters[i] += ((opf & masks[i]) != 0) as u64;
    }
}

/// What the probes need to know about a request.
struct Rq {
    opf: u32,
    op: u32,
    key: BlockKey,
}

/// The request's flags and its (whole-disk) device, as the classic `block_rq_*` tracepoints
/// report it: `MKDEV(disk->major, disk->first_minor)`.
#[inline(always)]
fn request(l: &BlockLayout, rq: u64) -> Option<Rq> {
    let opf: u32 = read(rq + l.rq_cmd_flags as u64)?;
    let disk: u64 = if l.features & DISK_IN_REQUEST != 0 {
        read(rq + l.disk as u64)?
    } else {
        let q: u64 = read(rq + l.rq_q as u64)?;
        read(q + l.disk as u64)?
    };
    let major: u32 = read(disk + l.disk_major as u64)?;
    let minor: u32 = read(disk + l.disk_first_minor as u64)?;
    let op = opf & l.op_mask;
    Some(Rq {
        opf,
        op,
        key: BlockKey {
            dev: (major << 20) | minor,
            op: op as u16,
            sync: ((opf & l.flag_masks[FLAG_SYNC]) != 0) as u16,
        },
    })
}

/// True when the kernel will stamp `io_start_time_ns` for this request at this issue.
#[inline(always)]
fn kernel_times_it(l: &BlockLayout, rq: u64, op: u32) -> bool {
    let needed = HAS_IO_START_TIME | HAS_STATS_FLAG;
    if l.features & needed != needed || op == l.op_drv_in || op == l.op_drv_out {
        return false;
    }
    let Some(q) = read::<u64>(rq + l.rq_q as u64) else {
        return false;
    };
    read::<u64>(q + l.q_queue_flags as u64).is_some_and(|flags| flags & l.stats_flag_mask != 0)
}

#[btf_tracepoint(function = "block_rq_issue")]
pub fn block_rq_issue(ctx: BtfTracePointContext) -> i32 {
    let _ = try_issue(&ctx);
    0
}

#[inline(always)]
fn try_issue(ctx: &BtfTracePointContext) -> Option<()> {
    let l = BLOCK_LAYOUT.load();
    if l.rq_resolved == 0 {
        return None;
    }
    let rq_addr = arg(ctx, l.issue_arg);
    let rq = request(&l, rq_addr)?;
    let t = now();
    let bytes: u32 = read(rq_addr + l.rq_data_len as u64).unwrap_or(0);
    if let Some(c) = value_or_insert(&BLOCK_RQ_COUNTS, &rq.key, &RqCounts::ZERO) {
        // SAFETY: this CPU's value in a per-CPU map, valid for the rest of this program run.
        let c = unsafe { &mut *c };
        c.requests += 1;
        c.bytes += bytes as u64;
        count_flags(&mut c.flags, rq.opf, &l.flag_masks);
    }
    if l.features & HAS_START_TIME != 0 {
        let start: u64 = read(rq_addr + l.rq_start_time_ns as u64).unwrap_or(0);
        // 0: the kernel did not need a timestamp for this request (no iostats, no elevator).
        if start != 0 && t >= start {
            let key = BlockKey { sync: 0, ..rq.key };
            if let Some(h) = value_or_insert(&BLOCK_QUEUE_LATENCY, &key, &Log2Hist::ZERO) {
                // SAFETY: as above.
                record(unsafe { &mut *h }, t - start);
            }
        }
    }
    crate::stall_events::block_issued(rq.key.dev, rq.op, t);
    if !kernel_times_it(&l, rq_addr, rq.op) {
        let _ = BLOCK_INFLIGHT.insert(&rq_addr, &t, 0);
    }
    Some(())
}

#[btf_tracepoint(function = "block_rq_requeue")]
pub fn block_rq_requeue(ctx: BtfTracePointContext) -> i32 {
    let l = BLOCK_LAYOUT.load();
    if l.rq_resolved != 0 {
        // The request goes back to the queue; its next issue starts a new measurement (the
        // kernel also restamps io_start_time_ns then).
        let _ = BLOCK_INFLIGHT.remove(&arg(&ctx, l.requeue_arg));
    }
    0
}

#[btf_tracepoint(function = "block_rq_complete")]
pub fn block_rq_complete(ctx: BtfTracePointContext) -> i32 {
    let _ = try_complete(&ctx);
    0
}

#[inline(always)]
fn try_complete(ctx: &BtfTracePointContext) -> Option<()> {
    let l = BLOCK_LAYOUT.load();
    if l.rq_resolved == 0 {
        return None;
    }
    // block_rq_complete(struct request *rq, blk_status_t error, unsigned int nr_bytes).
    let rq_addr = ctx.arg::<u64>(0);
    let error = ctx.arg::<u64>(1) as u32;
    let nr_bytes = ctx.arg::<u64>(2) as u32;
    let remaining: u32 = read(rq_addr + l.rq_data_len as u64)?;
    if nr_bytes < remaining {
        return None; // a partial completion: the request goes on
    }
    let rq = request(&l, rq_addr)?;
    if nr_bytes == 0 && (rq.op == l.op_read || rq.op == l.op_write) {
        return None; // a second (flush-sequence) completion, or a pre-flush never issued
    }
    let t = now();
    if error != 0
        && let Some(c) = value_or_insert(&BLOCK_RQ_COUNTS, &rq.key, &RqCounts::ZERO)
    {
        // SAFETY: this CPU's value in a per-CPU map, valid for the rest of this program run.
        unsafe { (*c).errors += 1 };
    }
    let stamped: u64 = if l.features & HAS_IO_START_TIME != 0 {
        read(rq_addr + l.rq_io_start_time_ns as u64).unwrap_or(0)
    } else {
        0
    };
    let issued = if stamped != 0 {
        stamped
    } else {
        // SAFETY: the value is copied out before the entry is removed.
        let t0 = unsafe { BLOCK_INFLIGHT.get(&rq_addr) }.copied()?;
        let _ = BLOCK_INFLIGHT.remove(&rq_addr);
        t0
    };
    crate::stall_events::block_completed(rq.key.dev, rq.op, issued, t);
    if t >= issued
        && let Some(h) = value_or_insert(&BLOCK_RQ_LATENCY, &rq.key, &Log2Hist::ZERO)
    {
        // SAFETY: as above.
        record(unsafe { &mut *h }, t - issued);
    }
    Some(())
}

#[btf_tracepoint(function = "block_bio_queue")]
pub fn block_bio_queue(ctx: BtfTracePointContext) -> i32 {
    let _ = try_bio_queue(&ctx);
    0
}

/// `bio->bi_opf` and `bio->bi_bdev->bd_dev` (the partition, before any remapping): what the
/// filesystem asked for, before blk-flush strips PREFLUSH/FUA on devices without them.
#[inline(always)]
fn try_bio_queue(ctx: &BtfTracePointContext) -> Option<()> {
    let l = BLOCK_LAYOUT.load();
    if l.bio_resolved == 0 {
        return None;
    }
    let bio = arg(ctx, l.bio_queue_arg);
    let opf: u32 = read(bio + l.bio_bi_opf as u64)?;
    let bdev: u64 = read(bio + l.bio_bi_bdev as u64)?;
    let dev: u32 = read(bdev + l.bdev_bd_dev as u64)?;
    let key = BlockKey {
        dev,
        op: (opf & l.op_mask) as u16,
        sync: 0,
    };
    let c = value_or_insert(&BLOCK_BIO_COUNTS, &key, &BioCounts::ZERO)?;
    // SAFETY: this CPU's value in a per-CPU map, valid for the rest of this program run.
    let c = unsafe { &mut *c };
    c.bios += 1;
    count_flags(&mut c.flags, opf, &l.flag_masks);
    Some(())
}
