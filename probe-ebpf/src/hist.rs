//! Updating per-CPU map values in place.

use aya_ebpf::maps::PerCpuHashMap;
use probe_common::hist::{Log2Hist, SLOTS, slot_for};

/// `BPF_NOEXIST`: insert only if the key is absent, so two programs racing to create the same
/// entry on one CPU cannot reset each other's counts.
const BPF_NOEXIST: u64 = 1;

/// Returns a pointer to this CPU's value for `key`, inserting `zero` first if the key is absent.
#[inline(always)]
pub fn value_or_insert<K, V>(map: &PerCpuHashMap<K, V>, key: &K, zero: &V) -> Option<*mut V> {
    if let Some(ptr) = map.get_ptr_mut(key) {
        return Some(ptr);
    }
    // A full map makes the insert fail; the event is then lost, which the daemon sees as a
    // missing series rather than a wrong one.
    let _ = map.insert(key, zero, BPF_NOEXIST);
    map.get_ptr_mut(key)
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
