//! The daemon's own metrics: build info, which probes are attached, failed map reads.

use std::collections::BTreeMap;

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
    (
        "wbscope_bpf_program_run_seconds_total",
        "Time the kernel spent running the program (BPF run-time stats, enabled while wbscope runs).",
    ),
    (
        "wbscope_bpf_program_runs_total",
        "Times the kernel ran the program (BPF run-time stats).",
    ),
];

/// An attached program: its name and its kernel id (for run-time stats).
#[derive(Clone, Debug)]
pub struct AttachedProgram {
    pub name: &'static str,
    pub id: u32,
}

/// Exports `wbscope_build_info`, `wbscope_probe_attached`, `wbscope_map_read_errors_total`.
pub struct SelfCollector {
    version: String,
    kernel: String,
    probes: Vec<ProbeReport>,
    map_errors: MapErrors,
    programs: Vec<AttachedProgram>,
    descs: Vec<Desc>,
}

impl SelfCollector {
    pub fn new(
        kernel: String,
        probes: Vec<ProbeReport>,
        map_errors: MapErrors,
        programs: Vec<AttachedProgram>,
    ) -> SelfCollector {
        SelfCollector {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            kernel,
            probes,
            map_errors,
            programs,
            descs: describe(FAMILIES),
        }
    }

    /// Run time and run count of our programs, from the kernel's program info.
    fn program_stats(&self) -> [MetricBuilder; 2] {
        let mut seconds = MetricBuilder::counter("wbscope_bpf_program_run_seconds_total", FAMILIES);
        let mut runs = MetricBuilder::counter("wbscope_bpf_program_runs_total", FAMILIES);
        let mut stats: BTreeMap<u32, (f64, f64)> = BTreeMap::new();
        for info in aya::programs::loaded_programs() {
            match info {
                Ok(info) => {
                    stats.insert(
                        info.id(),
                        (info.run_time().as_secs_f64(), info.run_count() as f64),
                    );
                }
                Err(err) => {
                    tracing::warn!("listing BPF programs: {err}");
                    break;
                }
            }
        }
        for program in &self.programs {
            let (secs, count) = stats.get(&program.id).copied().unwrap_or((0.0, 0.0));
            seconds.add_counter(&[("program", program.name)], secs);
            runs.add_counter(&[("program", program.name)], count);
        }
        [seconds, runs]
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
        let [seconds, runs] = self.program_stats();
        [info, attached, errors, seconds, runs]
            .into_iter()
            .filter_map(MetricBuilder::finish)
            .collect()
    }
}
