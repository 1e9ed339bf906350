//! The daemon's own metrics: build info, which probes are attached, failed map reads.

use std::{os::fd::AsFd as _, sync::Arc, time::Instant};

use prometheus::{
    core::{Collector, Desc},
    proto::MetricFamily,
};

use super::{
    MapErrors, describe, program_info, proto::MetricBuilder, run_stats_cache::RunStatsCache,
};
use crate::probes::{AttachStatus, ProbeReport};

const FAMILIES: &[(&str, &str)] = &[
    (
        "wbscope_build_info",
        "wbscope version, the source revision it was built from, and the kernel it runs on.",
    ),
    (
        "wbscope_probe_unsupported",
        "1 for a probe that is not attached on purpose: `reason` is kernel (this kernel cannot \
         support it: a missing hook or layout, see wbscope check) or config (probes.disable). \
         Alerts leave these alone; a probe with wbscope_probe_attached 0 and no series here failed.",
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
        "Time the kernel spent running the program (BPF run-time stats: 0 unless `[metrics] bpf_stats = true` or kernel.bpf_stats_enabled = 1; read in full when the busiest program's count moved, else at least every 30 s).",
    ),
    (
        "wbscope_bpf_program_runs_total",
        "Times the kernel ran the program (BPF run-time stats).",
    ),
];

/// An attached program: its name and our own descriptor of it, through which the kernel's
/// program info gives the run-time stats (`program_info`). Reading them that way needs no
/// capability, unlike listing the kernel's programs (`BPF_PROG_GET_NEXT_ID` needs
/// CAP_SYS_ADMIN, which the service drops).
#[derive(Clone, Debug)]
pub struct AttachedProgram {
    pub name: &'static str,
    pub fd: Arc<aya::programs::ProgramFd>,
}

/// Exports `wbscope_build_info`, `wbscope_probe_attached`, `wbscope_probe_unsupported`,
/// `wbscope_map_read_errors_total` and the programs' run-time stats.
pub struct SelfCollector {
    version: String,
    kernel: String,
    probes: Vec<ProbeReport>,
    map_errors: MapErrors,
    programs: Vec<AttachedProgram>,
    descs: Vec<Desc>,
    /// Where unreadable program stats are counted, when set.
    scrape_errors: Option<super::ScrapeErrors>,
    run_stats: RunStatsCache,
}

/// The family name in `wbscope_scrape_errors_total`.
const SCRAPE_FAMILY: &str = "bpf_program_stats";

impl SelfCollector {
    /// Counts program stats that cannot be read (the program info call failed) in `errors`.
    pub fn counting(mut self, errors: super::ScrapeErrors) -> SelfCollector {
        errors.register(SCRAPE_FAMILY);
        self.scrape_errors = Some(errors);
        self
    }

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
            scrape_errors: None,
            run_stats: RunStatsCache::default(),
        }
    }

    /// Run time and run count of our programs, from the kernel's program info (read in full
    /// only when they may have moved: `run_stats_cache`).
    fn program_stats(&self) -> [MetricBuilder; 2] {
        let mut seconds = MetricBuilder::counter("wbscope_bpf_program_run_seconds_total", FAMILIES);
        let mut runs = MetricBuilder::counter("wbscope_bpf_program_runs_total", FAMILIES);
        let stats = self
            .run_stats
            .read(self.programs.len(), Instant::now(), |i| {
                program_info::run_stats(self.programs[i].fd.as_fd())
            });
        for (program, stats) in self.programs.iter().zip(stats) {
            let (ns, count) = match stats {
                Ok(stats) => stats,
                Err(err) => {
                    // Its counters are left out rather than reported as 0.
                    if let Some(errors) = &self.scrape_errors {
                        errors.count(SCRAPE_FAMILY, program.name, &err);
                    }
                    continue;
                }
            };
            seconds.add_counter(&[("program", program.name)], ns as f64 / 1e9);
            runs.add_counter(&[("program", program.name)], count as f64);
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
        info.add_gauge(
            &[
                ("version", &self.version),
                ("revision", crate::build_info::REVISION),
                ("kernel", &self.kernel),
            ],
            1.0,
        );
        let mut attached = MetricBuilder::gauge("wbscope_probe_attached", FAMILIES);
        let mut unsupported = MetricBuilder::gauge("wbscope_probe_unsupported", FAMILIES);
        for report in &self.probes {
            let up = matches!(report.status, AttachStatus::Attached);
            attached.add_gauge(
                &[("probe", report.spec.program)],
                if up { 1.0 } else { 0.0 },
            );
            let reason = match report.status {
                AttachStatus::Skipped(_) => Some("kernel"),
                AttachStatus::Disabled => Some("config"),
                // Not a gap: its family's other end does the work.
                AttachStatus::Attached | AttachStatus::Replaced(_) | AttachStatus::Failed(_) => {
                    None
                }
            };
            if let Some(reason) = reason {
                unsupported.add_gauge(&[("probe", report.spec.program), ("reason", reason)], 1.0);
            }
        }
        let mut errors = MetricBuilder::counter("wbscope_map_read_errors_total", FAMILIES);
        for (map, count) in self.map_errors.snapshot() {
            errors.add_counter(&[("map", map)], count as f64);
        }
        let [seconds, runs] = self.program_stats();
        [info, attached, unsupported, errors, seconds, runs]
            .into_iter()
            .filter_map(MetricBuilder::finish)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_not_attached_on_purpose_have_their_own_metric() {
        use crate::probes::ProbeSpec;
        let report = |program, status| ProbeReport {
            family: "f",
            spec: ProbeSpec::tracepoint(program, "c", "e"),
            hook: String::new(),
            status,
            fentry_not_used: None,
        };
        let collector = SelfCollector::new(
            "6.1".into(),
            vec![
                report("up", AttachStatus::Attached),
                report("nokernel", AttachStatus::Skipped("no wbc".into())),
                report("off", AttachStatus::Disabled),
                report("broken", AttachStatus::Failed("verifier".into())),
            ],
            MapErrors::default(),
            Vec::new(),
        );
        let families = collector.collect();
        let family = |name: &str| {
            families
                .iter()
                .find(|f| f.name() == name)
                .unwrap_or_else(|| panic!("no {name}"))
        };
        let labels = |m: &prometheus::proto::Metric| {
            m.get_label()
                .iter()
                .map(|l| format!("{}={}", l.name(), l.value()))
                .collect::<Vec<_>>()
                .join(",")
        };
        let unsupported: Vec<String> = family("wbscope_probe_unsupported")
            .get_metric()
            .iter()
            .map(labels)
            .collect();
        assert_eq!(
            unsupported,
            ["probe=nokernel,reason=kernel", "probe=off,reason=config"]
        );
        let attached: Vec<(String, f64)> = family("wbscope_probe_attached")
            .get_metric()
            .iter()
            .map(|m| (labels(m), m.get_gauge().value()))
            .collect();
        assert_eq!(attached.len(), 4);
        assert!(attached.contains(&("probe=broken".into(), 0.0)));
        let info = labels(&family("wbscope_build_info").get_metric()[0]);
        assert!(
            info.contains(&format!("revision={}", crate::build_info::REVISION)),
            "{info}"
        );
    }
}
