//! Updating per-CPU map values in place.

use aya_ebpf::{
    macros::map,
    maps::{PerCpuArray, PerCpuHashMap},
};
use probe_common::{
    hist::{Log2Hist, SLOTS, slot_for},
    map_overflow,
    slots::{Slot, claims_index, key_bits, slot_indexes},
};

/// `BPF_NOEXIST`: insert only if the key is absent, so two programs racing to create the same
/// entry on one CPU cannot reset each other's counts.
const BPF_NOEXIST: u64 = 1;

/// Events lost because their map was full, per map slot (`probe_common::map_overflow`).
#[map]
static MAP_OVERFLOWS: PerCpuArray<u64> = PerCpuArray::with_max_entries(map_overflow::SLOTS, 0);

/// Counts one event lost to a full map (`slot`: the map's `map_overflow` slot).
#[inline(always)]
pub fn count_overflow(slot: u32) {
    if let Some(count) = MAP_OVERFLOWS.get_ptr_mut(slot) {
        // SAFETY: per-CPU array value pointer, valid for this program run, and only this CPU
        // touches its copy.
        unsafe { *count += 1 };
    }
}

/// Returns a pointer to this CPU's value for `key`, inserting `zero` first if the key is absent.
/// A full map makes the insert fail: the event is lost and counted in `overflow_slot`.
#[inline(always)]
pub fn value_or_insert<K, V>(
    map: &PerCpuHashMap<K, V>,
    key: &K,
    zero: &V,
    overflow_slot: u32,
) -> Option<*mut V> {
    if let Some(ptr) = map.get_ptr_mut(key) {
        return Some(ptr);
    }
    let _ = map.insert(key, zero, BPF_NOEXIST);
    let ptr = map.get_ptr_mut(key);
    if ptr.is_none() {
        count_overflow(overflow_slot);
    }
    ptr
}

/// [`value_or_insert`] behind a per-CPU slot array (`probe_common::slots`) of `1 << slot_bits`
/// slots: this CPU's value for the 8-byte `key` in the first of its candidate slots that the
/// key holds or takes now (a free slot), else in the hash. An array element costs a bounds
/// check and a load where a hash lookup costs tens of nanoseconds.
#[inline(always)]
pub fn slot_or_insert<K: Copy, V>(
    slots: &PerCpuArray<Slot<V>>,
    slot_bits: u32,
    map: &PerCpuHashMap<K, V>,
    key: &K,
    zero: &V,
    overflow_slot: u32,
) -> Option<*mut V> {
    let bits = key_bits(key);
    let [first, second, third] = slot_indexes(bits, slot_bits);
    if let Some(v) = claimed(slots, slot_bits, first, bits) {
        return Some(v);
    }
    if let Some(v) = claimed(slots, slot_bits, second, bits) {
        return Some(v);
    }
    if let Some(v) = claimed(slots, slot_bits, third, bits) {
        return Some(v);
    }
    value_or_insert(map, key, zero, overflow_slot)
}

/// This CPU's value in slot `index` if the key whose bits are `bits` holds it or takes it now
/// (a free slot).
#[inline(always)]
fn claimed<V>(
    slots: &PerCpuArray<Slot<V>>,
    slot_bits: u32,
    index: u32,
    bits: u64,
) -> Option<*mut V> {
    let slot = slots.get_ptr_mut(index)?;
    // SAFETY: this CPU's element of a per-CPU array, valid for this program run; only this CPU
    // writes it.
    let slot = unsafe { &mut *slot };
    if slot.used == 0 {
        // Free since load, so its value is still the kernel's zeroes.
        slot.key = bits;
        slot.used = 1;
        // After the slot is marked: user space that sees the new sum reads the whole array.
        count_claim(slots, slot_bits);
    }
    (slot.key == bits).then_some(&raw mut slot.value)
}

/// Counts one slot taken on this CPU in the array's claim counter (`slots::claims_index`).
#[inline(always)]
fn count_claim<V>(slots: &PerCpuArray<Slot<V>>, slot_bits: u32) {
    if let Some(counter) = slots.get_ptr_mut(claims_index(slot_bits)) {
        // SAFETY: this CPU's element of a per-CPU array, valid for this program run; only this
        // CPU writes it.
        unsafe { (*counter).key += 1 };
    }
}

/// Records one duration in a histogram that lives in a map value.
#[inline(always)]
pub fn record(hist: &mut Log2Hist, ns: u64) {
    let slot = slot_for(ns);
    // The explicit bound lets the verifier prove the array index is in range.
    if slot < SLOTS {
        hist.buckets[slot] += 1;
    }
    hist.sum_ns += ns;
}
