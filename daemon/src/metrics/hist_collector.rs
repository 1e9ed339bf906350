//! A collector for the common shape "per-CPU hash map of key → log2 histogram, exported as one
//! histogram family whose labels derive from the key".

use aya::{
    Ebpf, Pod,
    maps::{MapData, PerCpuHashMap},
};
use probe_common::hist::Log2Hist;
use prometheus::{
    core::{Collector, Desc},
    proto::MetricFamily,
};

use super::{MapErrors, describe, proto::MetricBuilder, read_per_cpu_hash};

/// Labels for one key, or `None` to skip the entry (e.g. an unknown id).
pub type KeyLabels<K> = Box<dyn Fn(&K) -> Option<Vec<(&'static str, String)>> + Send + Sync>;

/// Exports the map `map_name` as the histogram family `family` (name, help).
pub struct Log2HistCollector<K: Pod> {
    map_name: &'static str,
    map: Option<PerCpuHashMap<MapData, K, Log2Hist>>,
    family: &'static [(&'static str, &'static str)],
    labels: KeyLabels<K>,
    errors: MapErrors,
    descs: Vec<Desc>,
}

impl<K: Pod + Send + Sync> Log2HistCollector<K> {
    /// Takes `map_name` out of `ebpf` (a missing map is counted at every scrape) and registers it
    /// for `wbscope_map_read_errors_total`. `family` holds exactly one (name, help) pair.
    pub fn take(
        ebpf: &mut Ebpf,
        map_name: &'static str,
        family: &'static [(&'static str, &'static str)],
        errors: &MapErrors,
        labels: KeyLabels<K>,
    ) -> Log2HistCollector<K> {
        errors.register(map_name);
        let map = ebpf
            .take_map(map_name)
            .and_then(|m| PerCpuHashMap::try_from(m).ok());
        Log2HistCollector {
            map_name,
            map,
            family,
            labels,
            errors: errors.clone(),
            descs: describe(family),
        }
    }
}

impl<K: Pod + Send + Sync> Collector for Log2HistCollector<K> {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Some(entries) = read_per_cpu_hash(
            self.map_name,
            self.map.as_ref(),
            &self.errors,
            |acc: &mut Log2Hist, v| acc.merge(v),
            Log2Hist::ZERO,
        ) else {
            return Vec::new();
        };
        let Some((name, _)) = self.family.first() else {
            return Vec::new();
        };
        let mut family = MetricBuilder::histogram(name, self.family);
        for (key, hist) in entries {
            let Some(labels) = (self.labels)(&key) else {
                continue;
            };
            let pairs: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            family.add_log2_histogram(&pairs, &hist);
        }
        family.finish().into_iter().collect()
    }
}
