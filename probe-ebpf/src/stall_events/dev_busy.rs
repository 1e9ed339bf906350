//! Where a device's busy clocks ([`DevBusy`]) live: a slot of [`DEV_BUSY_SLOTS`] for the block
//! devices the host had when the daemon started, the [`DEV_BUSY`] hash for the others.
//!
//! The clocks are read or updated about five times per fsync (its enter, the journal commit's
//! start and end, each flush request's issue and completion). A hash lookup there cost as much
//! as the rest of those programs together (profiled: `__htab_map_lookup_elem` under
//! `block_rq_issue`, `jbd2_end_commit` and `sys_enter_fsync`); an array element is a bounds
//! check and a load, which the verifier inlines. The daemon writes each known device's dev_t
//! into the first free of its two candidate slots (`dev_busy_slot_indexes`) before attaching
//! the probes and never changes a slot afterwards, so a device's clocks are in one place for the
//! probes' whole life: in its slot, or, for a device that appeared later or whose two
//! candidates were taken, in the hash.

use aya_ebpf::{
    macros::map,
    maps::{Array, LruHashMap},
};
use probe_common::stall_events::{
    DEV_BUSY_SLOT_COUNT, DevBusy, DevBusySlot, dev_busy_slot_indexes,
};

/// The busy clocks of the devices the daemon placed, tagged with their dev_t.
#[map]
static DEV_BUSY_SLOTS: Array<DevBusySlot> = Array::with_max_entries(DEV_BUSY_SLOT_COUNT, 0);

/// Busy clocks of the other devices, by kernel dev_t. LRU so that short-lived devices cannot
/// fill it.
#[map]
static DEV_BUSY: LruHashMap<u32, DevBusy> = LruHashMap::with_max_entries(1024, 0);

const EMPTY_BUSY: DevBusy = DevBusy {
    journal_total_ns: 0,
    journal_since_ns: 0,
    flush_total_ns: 0,
    flush_since_ns: 0,
    flush_inflight: 0,
    journal_tid: 0,
};

/// `dev`'s clocks if it has a slot.
#[inline(always)]
fn slot_of(dev: u32) -> Option<*mut DevBusy> {
    let (first, second) = dev_busy_slot_indexes(dev);
    for index in [first, second] {
        if let Some(slot) = DEV_BUSY_SLOTS.get_ptr_mut(index) {
            // SAFETY: an array element, valid for the map's lifetime; `dev` is written only by
            // the daemon, before the probes run.
            if unsafe { (*slot).dev } == dev {
                // SAFETY: as above; only the member's address is taken.
                return Some(unsafe { &raw mut (*slot).busy });
            }
        }
    }
    None
}

/// `dev`'s clocks, if it has any yet (0, unknown, has none).
#[inline(always)]
pub fn get(dev: u32) -> Option<*mut DevBusy> {
    if dev == 0 {
        return None;
    }
    slot_of(dev).or_else(|| DEV_BUSY.get_ptr_mut(&dev))
}

/// `dev`'s clocks, created at zero in the hash if it has no slot and no entry yet.
#[inline(always)]
pub fn get_or_create(dev: u32) -> Option<*mut DevBusy> {
    if let Some(b) = get(dev) {
        return Some(b);
    }
    if dev == 0 {
        return None;
    }
    let _ = DEV_BUSY.insert(&dev, &EMPTY_BUSY, 0);
    DEV_BUSY.get_ptr_mut(&dev)
}
