//! The daemon's own metrics: build info, which probes are attached, failed map reads.

use prometheus::{
    core::{Collector, Desc},
    proto::MetricFamily,
};

use super::{MapErrors, describe, proto::MetricBuilder};
use crate::probes::{AttachStatus, ProbeReport};

const FAMILIES: &[(&str, &str)] = &[
    (
        "wbscope_build_info",
        "wbscope version and the kernel it runs on.",
    ),
    (
        "wbscope_probe_attached",
        "1 if the probe is attached, 0 if it was skipped, disabled or refused on this kernel.",
    ),
    (
        "wbscope_map_read_errors_total",
        "Failed reads of a probe map at scrape time.",
    ),
];

/// Exports `wbscope_build_info`, `wbscope_probe_attached`, `wbscope_map_read_errors_total`.
pub struct SelfCollector {
    version: String,
    kernel: String,
    probes: Vec<ProbeReport>,
    map_errors: MapErrors,
    descs: Vec<Desc>,
}

impl SelfCollector {
    pub fn new(kernel: String, probes: Vec<ProbeReport>, map_errors: MapErrors) -> SelfCollector {
        SelfCollector {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            kernel,
            probes,
            map_errors,
            descs: describe(FAMILIES),
        }
    }
}

impl Collector for SelfCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut info = MetricBuilder::gauge("wbscope_build_info", FAMILIES);
        info.add_gauge(&[("version", &self.version), ("kernel", &self.kernel)], 1.0);
        let mut attached = MetricBuilder::gauge("wbscope_probe_attached", FAMILIES);
        for report in &self.probes {
            let up = matches!(report.status, AttachStatus::Attached);
            attached.add_gauge(
                &[("probe", report.spec.program)],
                if up { 1.0 } else { 0.0 },
            );
        }
        let mut errors = MetricBuilder::counter("wbscope_map_read_errors_total", FAMILIES);
        for (map, count) in self.map_errors.snapshot() {
            errors.add_counter(&[("map", map)], count as f64);
        }
        [info, attached, errors]
            .into_iter()
            .filter_map(MetricBuilder::finish)
            .collect()
    }
}
