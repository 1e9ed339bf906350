//! Dirty throttling: how long tasks sleep in `balance_dirty_pages`, by backing device.
//!
//! Classic tracepoint `writeback:balance_dirty_pages` (include/trace/events/writeback.h, called
//! from mm/page-writeback.c `balance_dirty_pages()` right before `io_schedule_timeout(pause)`):
//! `char bdi[32]` and `long pause` at offsets from the running kernel's format file. The task
//! sleeps `pause` jiffies, which the event records as `pause * 1000 / HZ` milliseconds. On the
//! `pause < min_pause` path the event is emitted with `min(pause, 0)` and the task does not
//! sleep, so only `pause > 0` is a throttling pause. The classic tracepoint is used rather than
//! tp_btf because its arguments changed shape around 6.15 (scalars → `dtc`), while the record
//! fields kept their names.

use aya_ebpf::{
    Global,
    macros::{map, tracepoint},
    maps::PerCpuHashMap,
    programs::TracePointContext,
};
use probe_common::{
    dirty_throttle::{BdiKey, DirtyThrottleFormat},
    hist::Log2Hist,
    map_overflow,
    writeback::BDI_NAME_LEN,
};

use crate::hist::{record, value_or_insert};

/// Field offsets and the unit of `pause`, resolved by the daemon; all zero = not resolved.
// `#[used]`: see kernel/globals.rs; without it LLVM may merge equal constants into this global.
#[used]
#[unsafe(no_mangle)]
pub static DIRTY_THROTTLE_FMT: Global<DirtyThrottleFormat> = Global::new(DirtyThrottleFormat {
    bdi: 0,
    pause: 0,
    pause_unit_ns: 0,
    _reserved: 0,
});

/// Pause histograms by bdi. Feeds `wbscope_dirty_throttle_pause_seconds`.
#[map]
static DIRTY_THROTTLE_PAUSE: PerCpuHashMap<BdiKey, Log2Hist> =
    PerCpuHashMap::with_max_entries(1024, 0);

#[tracepoint]
pub fn balance_dirty_pages(ctx: TracePointContext) -> u32 {
    let _ = try_balance_dirty_pages(&ctx);
    0
}

#[inline(always)]
fn try_balance_dirty_pages(ctx: &TracePointContext) -> Option<()> {
    let f = DIRTY_THROTTLE_FMT.load();
    if f.pause == 0 || f.pause_unit_ns == 0 {
        return None;
    }
    // SAFETY: the offset is the `pause` field's in this event's format file (size 8 checked by
    // the daemon); read_at copies through bpf_probe_read and fails instead of faulting.
    let pause: i64 = unsafe { ctx.read_at::<i64>(f.pause as usize) }.ok()?;
    if pause <= 0 {
        return None;
    }
    // The name is copied with one fixed-size read and cut at its NUL without per-byte branches
    // (a byte loop with branches explodes the verifier's state count). strscpy does not pad the
    // record, so bytes after the NUL may be stale and must not reach the key.
    // SAFETY: as above, for the `bdi` field (at least BDI_NAME_LEN bytes, checked by the daemon).
    let raw: [u64; 2] = unsafe { ctx.read_at::<[u64; 2]>(f.bdi as usize) }.ok()?;
    let low_mask = bytes_before_nul(raw[0]);
    let high_mask = if low_mask == u64::MAX {
        bytes_before_nul(raw[1])
    } else {
        0
    };
    let mut key = BdiKey {
        bdi: [0; BDI_NAME_LEN],
    };
    key.bdi[..8].copy_from_slice(&(raw[0] & low_mask).to_le_bytes());
    key.bdi[8..].copy_from_slice(&(raw[1] & high_mask).to_le_bytes());
    let pause_ns = pause as u64 * f.pause_unit_ns as u64;
    crate::stall_events::throttled(pause_ns, &key.bdi);
    crate::top_processes::add_throttle(pause_ns);
    crate::cgroups::throttled(pause_ns);
    let hist = value_or_insert(
        &DIRTY_THROTTLE_PAUSE,
        &key,
        &Log2Hist::ZERO,
        map_overflow::DIRTY_THROTTLE_PAUSE,
    )?;
    // SAFETY: this CPU's value in a per-CPU map, valid for the rest of this program run.
    record(unsafe { &mut *hist }, pause_ns);
    Some(())
}

/// Mask of the bytes (little-endian) before the first NUL of `word`; all ones if it has none.
/// Classic zero-byte test: the lowest flagged bit is exact (later flags may be false positives,
/// which do not matter here).
#[inline(always)]
fn bytes_before_nul(word: u64) -> u64 {
    let zeros = word.wrapping_sub(0x0101_0101_0101_0101) & !word & 0x8080_8080_8080_8080;
    if zeros == 0 {
        return u64::MAX;
    }
    let lowest = zeros.isolate_lowest_one();
    (lowest >> 7).wrapping_sub(1)
}
