//! Prometheus exposition helpers: maps are read only when Prometheus scrapes, through
//! `Collector`s (one per family, see `crate::families`) that turn in-kernel log2 histograms into
//! real Prometheus histograms.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use aya::{
    Pod,
    maps::{MapData, PerCpuHashMap},
};
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
mod slotted;

pub use scrape_errors::ScrapeErrors;
pub use self_metrics::{AttachedProgram, SelfCollector};
pub use slotted::Slotted;

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
