//! `wbscope_map_overflows_total{map}`: events a probe could not record because their map was
//! full (a new key found no room), and `wbscope_map_capacity{map}` for the maps sized from the
//! host at start. See `probe_common::map_overflow` for the slots.

use aya::{
    Ebpf,
    maps::{MapData, PerCpuArray},
};
use probe_common::map_overflow::MAPS;
use prometheus::{
    core::{Collector, Desc},
    proto::MetricFamily,
};

use super::{MapErrors, describe, proto::MetricBuilder};

// The object names its maps after these (checked by `probes::object_names`).
use probe_common::map_overflow::maps::MAP_OVERFLOWS;

const FAMILIES: &[(&str, &str)] = &[
    (
        "wbscope_map_overflows_total",
        "Events not recorded because their aggregation map was full, by map. Non-zero means the \
         series of that map are incomplete: see the README on map sizes.",
    ),
    (
        "wbscope_map_capacity",
        "Maximum keys of a map sized from the host at start (block devices, mounted filesystems).",
    ),
];

/// Exports the overflow counters and the capacities.
pub struct OverflowCollector {
    counters: Option<PerCpuArray<MapData, u64>>,
    capacities: Vec<(&'static str, u32)>,
    errors: MapErrors,
    descs: Vec<Desc>,
}

impl OverflowCollector {
    /// Takes the counters' map out of `ebpf`; `capacities` are the sizes set at load.
    pub fn take(
        ebpf: &mut Ebpf,
        capacities: Vec<(&'static str, u32)>,
        errors: MapErrors,
    ) -> OverflowCollector {
        errors.register(MAP_OVERFLOWS);
        let counters = ebpf
            .take_map(MAP_OVERFLOWS)
            .and_then(|m| PerCpuArray::try_from(m).ok());
        OverflowCollector {
            counters,
            capacities,
            errors,
            descs: describe(FAMILIES),
        }
    }

    fn overflows(&self) -> Option<MetricFamily> {
        let Some(counters) = &self.counters else {
            self.errors.count(MAP_OVERFLOWS);
            return None;
        };
        // The whole array in one call where the kernel can (5.6+), else slot by slot; each
        // slot's CPUs added up.
        let mut per_slot = vec![0u64; counters.len() as usize];
        let mut add = |slot: u32, count: u64| {
            if let Some(total) = per_slot.get_mut(slot as usize) {
                *total = total.wrapping_add(count);
            }
        };
        if let Err(err) = super::batch::per_cpu_array(counters, &mut add) {
            return self.failed(&err);
        }
        let mut family = MetricBuilder::counter(FAMILIES[0].0, FAMILIES);
        for (slot, map) in MAPS {
            let Some(total) = per_slot.get(slot as usize) else {
                return self.failed(&format!("no slot {slot} in a map of {}", per_slot.len()));
            };
            family.add_counter(&[("map", map)], *total as f64);
        }
        family.finish()
    }

    /// Counts and logs a failed read; the family is left out rather than reported partly.
    fn failed(&self, err: &dyn std::fmt::Display) -> Option<MetricFamily> {
        self.errors.count(MAP_OVERFLOWS);
        tracing::warn!("reading map {MAP_OVERFLOWS}: {err}");
        None
    }
}

impl Collector for OverflowCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut capacity = MetricBuilder::gauge(FAMILIES[1].0, FAMILIES);
        for (map, entries) in &self.capacities {
            capacity.add_gauge(&[("map", map)], f64::from(*entries));
        }
        [self.overflows(), capacity.finish()]
            .into_iter()
            .flatten()
            .collect()
    }
}
