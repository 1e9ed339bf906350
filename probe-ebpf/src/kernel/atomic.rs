//! The one atomic the probes use: BPF's atomic add (`BPF_XADD`), which every supported kernel
//! has. The build targets BPF cpu v1 for 5.10, which has no fetch-and-add or compare-and-swap,
//! so callers read the value back with a volatile load when they need it.

use core::intrinsics::{AtomicOrdering, atomic_xadd};

/// Adds `delta` (wrapping: `u64::MAX` subtracts one) to the map value member at `ptr`.
#[inline(always)]
pub fn add(ptr: *mut u64, delta: u64) {
    // SAFETY: callers pass a member of a map value, 8-byte aligned and valid for this program
    // run, that is only ever changed through this atomic add.
    unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(ptr, delta) };
}

/// The value at `ptr` as it is in memory now (another CPU may be changing it).
#[inline(always)]
pub fn read(ptr: *const u64) -> u64 {
    // SAFETY: as in `add`: an aligned member of a map value, valid for this program run.
    unsafe { core::ptr::read_volatile(ptr) }
}
