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

mod bio_disk;

use aya_ebpf::{
    EbpfContext,
    helpers::bpf_ktime_get_ns,
    macros::{btf_tracepoint, map},
    maps::{LruHashMap, PerCpuArray, PerCpuHashMap},
    programs::BtfTracePointContext,
};
use probe_common::block::{
    BIO_SLOT_BITS, BioCounts, BioKey, BlockKey, BlockLayout, DISK_IN_REQUEST, FLAG_COUNT,
    FLAG_SYNC, HAS_IO_START_TIME, HAS_START_TIME, HAS_STATS_FLAG, NOT_ATTRIBUTED, RqStats,
};
use probe_common::map_overflow;
use probe_common::slots::{SLOT_BITS, Slot, array_len};

use crate::{
    hist::{record, slot_or_insert},
    kernel::{btf_load::load, globals::load_time},
};

/// Resolved by the daemon from BTF; all zero (unresolved) makes every probe here a no-op.
/// A plain static read field by field with [`layout!`] rather than an `aya_ebpf::Global`, whose
/// `load()` copies the whole struct on every event (about 40 loads and a dozen stack spills in
/// the compiled program). `#[used]`: see kernel/globals.rs; without it LLVM may merge equal constants
/// into this global.
#[used]
#[unsafe(no_mangle)]
static BLOCK_LAYOUT: BlockLayout = BlockLayout::ZERO;

/// One member of [`BLOCK_LAYOUT`] (see `kernel::globals::load_time`).
macro_rules! layout {
    ($member:ident) => {
        load_time!(BLOCK_LAYOUT.$member)
    };
}

/// Request counters, queue latency and issue → complete latency by (dev, op, sync): one value,
/// so that issue and completion each do one map lookup. Feeds requests, bytes, request-level
/// flags, errors and both latency histograms.
#[map]
static BLOCK_RQ_STATS: PerCpuHashMap<BlockKey, RqStats> = PerCpuHashMap::with_max_entries(4096, 0);

/// The slots in front of [`BLOCK_RQ_STATS`] (`probe_common::slots`): issue and completion of
/// every request update one.
#[map]
static BLOCK_RQ_SLOTS: PerCpuArray<Slot<RqStats>> =
    PerCpuArray::with_max_entries(array_len(SLOT_BITS), 0);

/// Bio counters by [`BioKey`]: (dev, op) and the device-writes family's attribution. Feeds
/// bio-level flags and the device-writes family's bytes and bios.
#[map]
static BLOCK_BIO_COUNTS: PerCpuHashMap<BioKey, BioCounts> =
    PerCpuHashMap::with_max_entries(4096, 0);

/// The slots in front of [`BLOCK_BIO_COUNTS`] (`probe_common::slots`): every bio updates one, so
/// a host's busy (device, op, source) keys are counted without a hash lookup. More slots than
/// the other aggregates (`probe_common::block::BIO_SLOT_BITS`).
#[map]
static BLOCK_BIO_SLOTS: PerCpuArray<Slot<BioCounts>> =
    PerCpuArray::with_max_entries(array_len(BIO_SLOT_BITS), 0);

/// Issue time by request address, for requests the kernel does not time itself. LRU, so
/// requests whose completion is never seen (attach races, driver timeouts) cannot fill it.
#[map]
static BLOCK_INFLIGHT: LruHashMap<u64, u64> = LruHashMap::with_max_entries(16384, 0);

#[inline(always)]
fn now() -> u64 {
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    unsafe { bpf_ktime_get_ns() }
}

/// The request fields the probes use.
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
    if rq == 0 {
        return None;
    }
    let features = layout!(features);
    Some(RqFields {
        q: load(rq, layout!(rq_q)),
        disk: if features & DISK_IN_REQUEST != 0 {
            load(rq, layout!(disk))
        } else {
            0
        },
        opf: load(rq, layout!(rq_cmd_flags)),
        data_len: load(rq, layout!(rq_data_len)),
        start_ns: if start && features & HAS_START_TIME != 0 {
            load(rq, layout!(rq_start_time_ns))
        } else {
            0
        },
        io_start_ns: if io_start && features & HAS_IO_START_TIME != 0 {
            load(rq, layout!(rq_io_start_time_ns))
        } else {
            0
        },
    })
}

/// Argument `n` (0 or 1) as a raw value. The index comes from a load-time global; the verifier
/// accepts only constant offsets into the context (it prunes the branch not taken, which may
/// even be past the prototype's last argument), hence the branch. The second load is volatile
/// so that LLVM cannot merge the two into one load at a computed offset (`ctx + 8 * (n != 0)`),
/// which the verifier refuses ("dereference of modified ctx ptr", seen on 5.10, where
/// `block_bio_queue(q, bio)` takes the bio second).
#[inline(always)]
fn arg(ctx: &BtfTracePointContext, n: u32) -> u64 {
    if n == 0 {
        ctx.arg::<u64>(0)
    } else {
        // SAFETY: a tp_btf context is an array of 8-byte arguments, and the daemon sets `n` to 1
        // only when the prototype has a second one (checked in BTF).
        unsafe { core::ptr::read_volatile((ctx.as_ptr() as *const u64).add(1)) }
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

/// The request's disk: `rq->rq_disk` where the request has one ([`DISK_IN_REQUEST`]), else
/// `rq->q->disk`.
#[inline(always)]
fn request_disk(rq: &RqFields) -> Option<u64> {
    if layout!(features) & DISK_IN_REQUEST != 0 {
        Some(rq.disk)
    } else if rq.q != 0 {
        Some(load(rq.q, layout!(disk)))
    } else {
        None
    }
}

/// The whole-disk device as the classic `block_rq_*` tracepoints report it:
/// `MKDEV(disk->major, disk->first_minor)`.
#[inline(always)]
fn disk_dev(disk: u64) -> Option<u32> {
    if disk == 0 {
        return None;
    }
    let major: u32 = load(disk, layout!(disk_major));
    let minor: u32 = load(disk, layout!(disk_first_minor));
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

/// No helper call but the clock: every field is a plain load through the BTF-typed request.
#[inline(always)]
fn try_issue(ctx: &BtfTracePointContext) -> Option<()> {
    if layout!(rq_resolved) == 0 {
        return None;
    }
    let features = layout!(features);
    let rq_addr = arg(ctx, layout!(issue_arg));
    let rq = rq_fields(rq_addr, true, false)?;
    let disk = request_disk(&rq)?;
    let queue_flags = if features & HAS_STATS_FLAG != 0 && rq.q != 0 {
        Some(load::<u64>(rq.q, layout!(q_queue_flags)))
    } else {
        None
    };
    let key = key(disk_dev(disk)?, rq.opf);
    let op = key.op as u32;
    let t = now();
    if let Some(v) = slot_or_insert(
        &BLOCK_RQ_SLOTS,
        SLOT_BITS,
        &BLOCK_RQ_STATS,
        &key,
        &RqStats::ZERO,
        map_overflow::BLOCK_RQ_STATS,
    ) {
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

/// As issue: plain loads through the BTF-typed request.
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
    let key = key(disk_dev(request_disk(&rq)?)?, rq.opf);
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
    let v = slot_or_insert(
        &BLOCK_RQ_SLOTS,
        SLOT_BITS,
        &BLOCK_RQ_STATS,
        &key,
        &RqStats::ZERO,
        map_overflow::BLOCK_RQ_STATS,
    )?;
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

/// `bio->bi_opf` and `bio->bi_bdev->bd_dev` (the partition, before any remapping): what the
/// filesystem asked for, before blk-flush strips PREFLUSH/FUA on devices without them.
#[inline(always)]
fn try_bio_queue(ctx: &BtfTracePointContext) -> Option<()> {
    if layout!(bio_resolved) == 0 {
        return None;
    }
    let bio = arg(ctx, layout!(bio_queue_arg));
    if bio == 0 {
        return None;
    }
    let opf: u32 = load(bio, layout!(bio_bi_opf));
    let dev = if bio_disk::in_use() {
        // Before 5.12: no bi_bdev, the bio names its disk and partition number.
        bio_disk::dev(bio)?
    } else {
        let bdev: u64 = load(bio, layout!(bio_bi_bdev));
        if bdev == 0 {
            return None;
        }
        load(bdev, layout!(bdev_bd_dev))
    };
    let op = opf & layout!(op_mask);
    // The device-writes family's attribution is part of the key: one counter per bio for both.
    let who = crate::device_writes::attribute(bio, op);
    let key = BioKey {
        dev,
        op: op as u8,
        source: who.map_or(NOT_ATTRIBUTED, |w| w.source),
        sync_mode: who.map_or(0, |w| w.sync_mode),
        reason: who.map_or(0, |w| w.reason),
    };
    // Defined on every path and added unconditionally: kept as `Option`, LLVM reloads the
    // bytes of a `None` from a stack slot it never wrote (harmless: the value is not used),
    // and 5.10's verifier refuses any read of an unwritten stack slot.
    let bytes = who.map_or(0, |w| w.bytes as u64);
    let c = slot_or_insert(
        &BLOCK_BIO_SLOTS,
        BIO_SLOT_BITS,
        &BLOCK_BIO_COUNTS,
        &key,
        &BioCounts::ZERO,
        map_overflow::BLOCK_BIO_COUNTS,
    )?;
    // SAFETY: this CPU's value in a per-CPU map, valid for the rest of this program run.
    let c = unsafe { &mut *c };
    c.bios += 1;
    c.bytes += bytes;
    count_flags(&mut c.flags, opf);
    Some(())
}
