//! Prometheus exposition helpers: maps are read only when Prometheus scrapes, through
//! `Collector`s (one per family, see `crate::families`) that turn in-kernel log2 histograms into
//! real Prometheus histograms.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use aya::{
    Pod,
    maps::{MapData, PerCpuArray, PerCpuHashMap},
};
use probe_common::slots::{Slot, key_from_bits};
use prometheus::core::Desc;

mod batch;
pub mod detail;
pub mod hist_collector;
pub mod map_overflow;
pub mod process;
mod program_info;
pub mod proto;
mod run_stats_cache;
pub mod scrape_errors;
pub mod self_metrics;

pub use scrape_errors::ScrapeErrors;
pub use self_metrics::{AttachedProgram, SelfCollector};

/// Failed map reads by map name, shared by every collector and exported as
/// `wbscope_map_read_errors_total`.
#[derive(Clone, Default)]
pub struct MapErrors(Arc<Mutex<BTreeMap<&'static str, u64>>>);

impl MapErrors {
    /// Registers a map so its counter is exported (at 0) before any error.
    pub fn register(&self, map: &'static str) {
        if let Ok(mut counts) = self.0.lock() {
            counts.entry(map).or_insert(0);
        }
    }

    /// Counts one failed read of `map`.
    pub fn count(&self, map: &'static str) {
        if let Ok(mut counts) = self.0.lock() {
            *counts.entry(map).or_insert(0) += 1;
        }
    }

    /// Current counts.
    pub fn snapshot(&self) -> BTreeMap<&'static str, u64> {
        self.0.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

/// Descs for a collector's families (name, help) pairs.
pub fn describe(families: &[(&str, &str)]) -> Vec<Desc> {
    families
        .iter()
        .filter_map(|(name, help)| {
            Desc::new((*name).into(), (*help).into(), vec![], Default::default()).ok()
        })
        .collect()
}

/// Reads every entry of a per-CPU hash map, summing the CPUs' values with `merge`. A missing map
/// or a failed read is counted in `errors` and logged; the caller then emits nothing for it.
pub fn read_per_cpu_hash<K: Pod, V: Pod>(
    name: &'static str,
    map: Option<&PerCpuHashMap<MapData, K, V>>,
    errors: &MapErrors,
    merge: impl Fn(&mut V, &V),
    zero: V,
) -> Option<Vec<(K, V)>> {
    errors.register(name);
    let Some(map) = map else {
        errors.count(name);
        tracing::warn!("map {name} is missing from the eBPF object");
        return None;
    };
    // Batch reads where the kernel has them (5.6+), else key by key.
    batch::per_cpu_hash(map, &merge, zero)
        .map_err(|err| {
            errors.count(name);
            tracing::warn!("reading map {name}: {err}");
        })
        .ok()
}

/// An aggregate kept in a per-CPU slot array in front of a per-CPU hash
/// (`probe_common::slots`): the two maps, named for errors.
pub struct Slotted<K: Pod, V: Pod>
where
    Slot<V>: Pod,
{
    pub slots_name: &'static str,
    pub slots: Option<PerCpuArray<MapData, Slot<V>>>,
    pub name: &'static str,
    pub map: Option<PerCpuHashMap<MapData, K, V>>,
}

impl<K: Pod + PartialEq, V: Pod> Slotted<K, V>
where
    Slot<V>: Pod,
{
    /// Takes both maps out of the object.
    pub fn take(ebpf: &mut aya::Ebpf, slots_name: &'static str, name: &'static str) -> Self {
        Slotted {
            slots_name,
            slots: ebpf
                .take_map(slots_name)
                .and_then(|m| PerCpuArray::try_from(m).ok()),
            name,
            map: ebpf
                .take_map(name)
                .and_then(|m| PerCpuHashMap::try_from(m).ok()),
        }
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
        let mut add_slot = |slot: Slot<V>| {
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
        if let Err(err) = batch::per_cpu_array(slots, |_, slot| add_slot(slot)) {
            errors.count(self.slots_name);
            tracing::warn!("reading map {}: {err}", self.slots_name);
            return None;
        }
        Some(out)
    }
}
