//! Dirty throttling (`balance_dirty_pages` pauses): the load-time format, the map key and the
//! names.

use crate::{user_pod, writeback::BDI_NAME_LEN};

/// What the `writeback:balance_dirty_pages` probe needs, resolved by the daemon: two field
/// offsets from the event's format file and the unit of `pause`.
///
/// `include/trace/events/writeback.h`, `TRACE_EVENT(balance_dirty_pages, …)`:
/// `char bdi[32]; … long pause; …`. The sleep is `pause` jiffies, but the event records it as
/// `pause * 1000 / HZ`, i.e. in milliseconds (≤ 0 means the task does not sleep).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirtyThrottleFormat {
    pub bdi: u32,
    pub pause: u32,
    /// Nanoseconds per unit of the recorded `pause` (1 000 000: milliseconds); 0 = unknown.
    pub pause_unit_ns: u32,
    pub _reserved: u32,
}
const _: () = assert!(core::mem::size_of::<DirtyThrottleFormat>() == 16);

/// Aggregation key of throttling pauses: the bdi name as the tracepoint prints it (`MAJ:MIN`
/// for block devices), cut at its NUL and zero-padded.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BdiKey {
    pub bdi: [u8; BDI_NAME_LEN],
}
const _: () = assert!(core::mem::size_of::<BdiKey>() == BDI_NAME_LEN);

user_pod!(DirtyThrottleFormat, BdiKey);

/// Names of this family's load-time globals in the eBPF object (`#[no_mangle]` statics that the
/// daemon sets before load).
pub mod globals {
    pub const DIRTY_THROTTLE_FMT: &str = "DIRTY_THROTTLE_FMT";
}

/// Names of this family's maps in the eBPF object (aya names a map after its `#[map]` static);
/// `object_names` lists them for the test that checks them against the object.
pub mod maps {
    pub const DIRTY_THROTTLE_PAUSE: &str = "DIRTY_THROTTLE_PAUSE";
}
