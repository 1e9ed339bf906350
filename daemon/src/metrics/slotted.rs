//! An aggregate kept in a per-CPU slot array in front of a per-CPU hash (`probe_common::slots`),
//! read whole only when its slots changed hands.
//!
//! A slot, once a key takes it on a CPU, is never freed, and the array's last element counts the
//! slots taken ([`probe_common::slots::claims_index`]). So while that count stays the same, the
//! used slots are the ones the last whole read saw, and a read copies only those: a handful of
//! elements instead of 32 or 128, at every scrape and at every sample of the stall-context
//! history. When the count moves, the read is whole again and learns the new set.

use std::sync::{Mutex, PoisonError};

use aya::{
    Pod,
    maps::{MapData, PerCpuArray, PerCpuHashMap},
};
use probe_common::slots::{Slot, key_from_bits};

use super::{
    MapErrors,
    batch::{self, BatchError},
    read_per_cpu_hash,
};

/// The two maps of a slotted aggregate, named for errors, and what its last whole read of the
/// slots learnt.
pub struct Slotted<K: Pod, V: Pod>
where
    Slot<V>: Pod,
{
    pub slots_name: &'static str,
    pub slots: Option<PerCpuArray<MapData, Slot<V>>>,
    pub name: &'static str,
    pub map: Option<PerCpuHashMap<MapData, K, V>>,
    known: Mutex<Option<KnownSlots>>,
}

/// The used slots (indexes, ascending) and the claim count they go with.
struct KnownSlots {
    claims: u64,
    used: Vec<u32>,
}

impl<K: Pod + PartialEq, V: Pod> Slotted<K, V>
where
    Slot<V>: Pod,
{
    /// The aggregate over these maps (`None`: missing from the object, an error at each read).
    pub fn new(
        slots_name: &'static str,
        slots: Option<PerCpuArray<MapData, Slot<V>>>,
        name: &'static str,
        map: Option<PerCpuHashMap<MapData, K, V>>,
    ) -> Self {
        Slotted {
            slots_name,
            slots,
            name,
            map,
            known: Mutex::new(None),
        }
    }

    /// Takes both maps out of the object.
    pub fn take(ebpf: &mut aya::Ebpf, slots_name: &'static str, name: &'static str) -> Self {
        Slotted::new(
            slots_name,
            ebpf.take_map(slots_name)
                .and_then(|m| PerCpuArray::try_from(m).ok()),
            name,
            ebpf.take_map(name)
                .and_then(|m| PerCpuHashMap::try_from(m).ok()),
        )
    }

    /// Every key's value, the CPUs' slots and the hash added up with `merge`; `None` (counted
    /// and logged, like [`read_per_cpu_hash`]) when either map cannot be read, since a part
    /// of a count must not pass for all of it.
    pub fn read(
        &self,
        errors: &MapErrors,
        merge: impl Fn(&mut V, &V),
        zero: V,
    ) -> Option<Vec<(K, V)>> {
        let mut out = read_per_cpu_hash(self.name, self.map.as_ref(), errors, &merge, zero)?;
        errors.register(self.slots_name);
        let Some(slots) = self.slots.as_ref() else {
            errors.count(self.slots_name);
            tracing::warn!("map {} is missing from the eBPF object", self.slots_name);
            return None;
        };
        // A used slot's key and value join the hash's, CPU by CPU.
        let add_slot = |slot: Slot<V>| {
            if slot.used == 0 {
                return;
            }
            let key: K = key_from_bits(slot.key);
            match out.iter_mut().find(|(k, _)| *k == key) {
                Some((_, total)) => merge(total, &slot.value),
                None => {
                    let mut total = zero;
                    merge(&mut total, &slot.value);
                    out.push((key, total));
                }
            }
        };
        if let Err(err) = self.visit_used_slots(slots, add_slot) {
            errors.count(self.slots_name);
            tracing::warn!("reading map {}: {err}", self.slots_name);
            return None;
        }
        Some(out)
    }

    /// Calls `each` with every CPU's copy of every slot that may be used: the known ones while
    /// the claim count is the one they go with, else every slot. On an error the caller must
    /// drop what `each` saw.
    fn visit_used_slots(
        &self,
        slots: &PerCpuArray<MapData, Slot<V>>,
        mut each: impl FnMut(Slot<V>),
    ) -> Result<(), BatchError> {
        let claims_index = slots.len().saturating_sub(1);
        // Read before the slots: a slot taken after this read moves the count, and the next
        // read is whole again, so a new key is at worst one read late, never lost.
        let claims = slots
            .get(&claims_index, 0)?
            .iter()
            .fold(0u64, |sum, counter| sum.wrapping_add(counter.key));
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = known.as_ref().filter(|k| k.claims == claims) {
            for index in &known.used {
                slots.get(index, 0)?.iter().for_each(|slot| each(*slot));
            }
            return Ok(());
        }
        let mut used = Vec::new();
        batch::per_cpu_array(slots, |index, slot| {
            if index != claims_index {
                note_used(&mut used, index, &slot);
                each(slot);
            }
        })?;
        *known = Some(KnownSlots { claims, used });
        Ok(())
    }
}

/// Adds `index` to `used` (ascending, each once) when this CPU's copy of it is used; called in
/// index order, CPU by CPU.
fn note_used<V>(used: &mut Vec<u32>, index: u32, slot: &Slot<V>) {
    if slot.used != 0 && used.last() != Some(&index) {
        used.push(index);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(used: u64) -> Slot<u64> {
        Slot {
            key: 7,
            used,
            value: 1,
        }
    }

    #[test]
    fn a_slot_used_on_any_cpu_is_noted_once() {
        let mut used = Vec::new();
        // Two CPUs per index: 3 on the second only, 5 on both, 9 on neither.
        for (index, cpu_copies) in [(3, [0, 1]), (5, [1, 1]), (9, [0, 0])] {
            for copy in cpu_copies {
                note_used(&mut used, index, &slot(copy));
            }
        }
        assert_eq!(used, vec![3, 5]);
    }

    #[test]
    fn an_aggregate_without_maps_reads_as_an_error() {
        use probe_common::block::{BioCounts, BioKey};
        let slotted: Slotted<BioKey, BioCounts> = Slotted::new("slots", None, "map", None);
        let errors = MapErrors::default();
        assert!(
            slotted
                .read(&errors, |a, b| a.bios += b.bios, BioCounts::ZERO)
                .is_none()
        );
        assert_eq!(errors.snapshot().get("map"), Some(&1));
    }
}
