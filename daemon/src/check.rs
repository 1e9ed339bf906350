//! `wbscope check`: for every probe the build knows, whether it attaches on this kernel and why
//! not. Loads and attaches for real, then detaches everything.

use std::fmt::Write as _;

mod hooks;

use prometheus::core::Collector;

use crate::{
    Config,
    daemon::{DaemonError, Loaded, load_families},
    families::CollectorContext,
    kernel::{self, VMLINUX_BTF},
    metrics::{MapErrors, SelfCollector},
    privileges::require_bpf_privileges,
    probes::{AttachStatus, ProbeReport},
};

/// The result of a check: the report text and how many probes attached.
pub struct CheckOutcome {
    pub text: String,
    pub attached: usize,
    /// Probes the kernel refused although nothing says it cannot support them (not skipped,
    /// not disabled): what `check --strict` fails on.
    pub failed: usize,
    pub total: usize,
}

/// One metric family as the daemon's collectors describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricDoc {
    pub name: String,
    pub help: String,
    /// The labels its series carry, in the collector's order.
    pub labels: Vec<String>,
}

/// The metric families the daemon registers, from its collectors' descriptors (what
/// dashboards and rules may use), sorted by name. Loads the probes like `run_check`, then
/// detaches.
pub fn metric_docs(config: &Config) -> Result<Vec<MetricDoc>, DaemonError> {
    require_bpf_privileges()?;
    let Loaded {
        kernel: _,
        families,
        probes: mut loaded,
    } = load_families(0, config)?;
    let ctx = CollectorContext {
        page_size: kernel::page_size(),
        map_errors: MapErrors::default(),
        stalls: crate::families::stall_events::StallShared::default(),
        scrape_errors: crate::metrics::ScrapeErrors::default(),
        device_writes: Default::default(),
        bio_counts: Default::default(),
    };
    let mut collectors: Vec<Box<dyn Collector>> = families
        .iter()
        .flat_map(|f| f.collectors(&mut loaded.ebpf, &ctx))
        .collect();
    collectors.push(Box::new(
        crate::metrics::map_overflow::OverflowCollector::take(
            &mut loaded.ebpf,
            loaded.map_sizes.clone(),
            ctx.map_errors.clone(),
        ),
    ));
    collectors.push(Box::new(SelfCollector::new(
        String::new(),
        Vec::new(),
        ctx.map_errors,
        Vec::new(),
    )));
    collectors.push(Box::new(crate::metrics::process::ProcessCollector::for_self(
        crate::metrics::ScrapeErrors::default(),
    )));
    let mut docs: Vec<MetricDoc> = collectors
        .iter()
        .flat_map(|c| {
            c.desc()
                .into_iter()
                .map(|d| MetricDoc {
                    name: d.fq_name.clone(),
                    help: d.help.clone(),
                    labels: d.variable_labels.clone(),
                })
                .collect::<Vec<_>>()
        })
        .collect();
    // Not from collectors: the scrape-error counts are appended to each answer, and the HTTP
    // server registers its own counters (every label value is created up front, so a gather
    // shows their labels).
    docs.push(MetricDoc {
        name: crate::metrics::scrape_errors::METRIC.to_owned(),
        help: crate::metrics::scrape_errors::HELP_TEXT.to_owned(),
        labels: vec!["family".to_owned()],
    });
    let http = prometheus::Registry::new();
    if crate::web::http_metrics::HttpMetrics::register(&http).is_ok() {
        docs.extend(http.gather().iter().map(|family| {
            MetricDoc {
                name: family.name().to_owned(),
                help: family.help().to_owned(),
                labels: family
                    .get_metric()
                    .first()
                    .map(|m| m.get_label().iter().map(|l| l.name().to_owned()).collect())
                    .unwrap_or_default(),
            }
        }));
    }
    docs.sort_by(|a, b| a.name.cmp(&b.name));
    docs.dedup_by(|a, b| a.name == b.name);
    Ok(docs)
}

/// The metric family names the daemon registers (see [`metric_docs`]).
pub fn metric_names(config: &Config) -> Result<Vec<String>, DaemonError> {
    Ok(metric_docs(config)?.into_iter().map(|d| d.name).collect())
}

/// Runs the check (needs the same privileges as the daemon).
pub fn run_check(verbose: bool, config: &Config) -> Result<CheckOutcome, DaemonError> {
    require_bpf_privileges()?;
    let Loaded {
        kernel,
        families,
        probes: loaded,
    } = load_families(0, config)?;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "wbscope {} on kernel {}",
        env!("CARGO_PKG_VERSION"),
        kernel.release
    );
    match kernel.tracefs.unavailable() {
        None => {
            let _ = writeln!(text, "tracefs: {}", kernel.tracefs.root().display());
        }
        Some(why) => {
            let _ = writeln!(
                text,
                "tracefs: unavailable, classic tracepoints skipped: {why}"
            );
        }
    }
    let _ = writeln!(
        text,
        "btf: {}",
        match &loaded.fd_dev {
            Ok(_) => format!("{VMLINUX_BTF} (fd → device resolution in the kernel: yes)"),
            Err(why) => format!("fd → device resolution unavailable: {why}"),
        }
    );
    let _ = writeln!(
        text,
        "{}",
        kernel::task_access::describe_current_task(loaded.current_task)
    );
    for family in &families {
        for line in family.describe() {
            let _ = writeln!(text, "{line}");
        }
    }
    for line in hooks::describe(&loaded.reports, config.sync_call_hook) {
        let _ = writeln!(text, "{line}");
    }
    let _ = writeln!(text);
    text.push_str(&format_reports(&loaded.reports, verbose));
    let (attached, failed) = attached_and_failed(&loaded.reports);
    let skipped = count(&loaded.reports, |s| matches!(s, AttachStatus::Skipped(_)));
    let disabled = count(&loaded.reports, |s| matches!(s, AttachStatus::Disabled));
    let replaced = count(&loaded.reports, |s| matches!(s, AttachStatus::Replaced(_)));
    let total = loaded.applicable();
    // The first line's shape is parsed by the vm tier and the benchmark: keep it.
    let _ = writeln!(text, "\n{attached} of {total} probes attach on this kernel");
    let _ = writeln!(
        text,
        "{skipped} skipped (this kernel cannot support them), {replaced} not needed (another \
         probe does their work here), {disabled} disabled by config, {failed} failed"
    );
    let (family_names, _) = crate::config::probe_names();
    let _ = writeln!(
        text,
        "[probes] disable takes a PROBE above or a family: {}",
        family_names
            .iter()
            .map(|n| format!("\"{n}\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // Dropping `loaded` detaches everything.
    drop(loaded);
    Ok(CheckOutcome {
        text,
        attached,
        failed,
        total,
    })
}

/// Probes attached and probes the kernel refused (not skipped, not disabled).
fn attached_and_failed(reports: &[ProbeReport]) -> (usize, usize) {
    (
        count(reports, AttachStatus::is_attached),
        count(reports, |s| matches!(s, AttachStatus::Failed(_))),
    )
}

impl CheckOutcome {
    /// Whether `check` exits 0: one attached probe is enough, unless `strict`, which also wants
    /// no failed probe (skipped by the kernel and disabled by config are fine).
    pub fn passes(&self, strict: bool) -> bool {
        self.attached > 0 && !(strict && self.failed > 0)
    }
}

fn count(reports: &[ProbeReport], status: impl Fn(&AttachStatus) -> bool) -> usize {
    reports.iter().filter(|r| status(&r.status)).count()
}

/// The per-probe table.
pub fn format_reports(reports: &[ProbeReport], verbose: bool) -> String {
    let width = reports
        .iter()
        .map(|r| r.spec.program.len())
        .max()
        .unwrap_or(5)
        .max(5);
    let hook_width = reports
        .iter()
        .map(|r| r.hook.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut out = format!("{:<width$}  {:<hook_width$}  STATUS\n", "PROBE", "HOOK");
    for r in reports {
        let status = match &r.status {
            AttachStatus::Attached => "attached".to_owned(),
            AttachStatus::Disabled => "disabled by config".to_owned(),
            AttachStatus::Skipped(why) => format!("skipped: {why}"),
            AttachStatus::Replaced(why) => format!("not needed: {why}"),
            AttachStatus::Failed(why) if verbose => format!("FAILED: {why}"),
            AttachStatus::Failed(why) => {
                format!(
                    "FAILED: {} (--verbose shows the kernel's whole answer)",
                    failure_summary(why)
                )
            }
        };
        let _ = writeln!(
            out,
            "{:<width$}  {:<hook_width$}  {status}",
            r.spec.program, r.hook
        );
    }
    out
}

/// Verifier logs can be hundreds of lines; the table shows the first (the syscall's error) and,
/// for a verifier log, the line that says why it refused: the last one before the statistics the
/// verifier appends. The log's first line is whatever the verifier printed first, often a
/// harmless note.
fn failure_summary(text: &str) -> String {
    let first = text.lines().next().unwrap_or(text);
    let Some((head, _)) = first.split_once(VERIFIER_OUTPUT) else {
        return first.to_owned();
    };
    let reason = text.lines().rev().map(str::trim).find(|l| {
        !l.is_empty()
            && !l.starts_with(':')
            && !l.starts_with("verification time")
            && !l.starts_with("stack depth")
            && !l.starts_with("processed ")
    });
    match reason {
        Some(reason) => format!("{head}{VERIFIER_OUTPUT}… {reason}"),
        None => first.to_owned(),
    }
}

/// How aya introduces the verifier's log in a load error.
const VERIFIER_OUTPUT: &str = "Verifier output: ";

#[cfg(test)]
mod strict_tests {
    use super::*;
    use crate::probes::ProbeSpec;

    fn report(program: &'static str, status: AttachStatus) -> ProbeReport {
        ProbeReport {
            family: "block",
            spec: ProbeSpec::tracepoint(program, "block", program),
            hook: program.to_owned(),
            status,
            fentry_not_used: None,
        }
    }

    fn outcome(reports: &[ProbeReport]) -> CheckOutcome {
        let (attached, failed) = attached_and_failed(reports);
        CheckOutcome {
            text: String::new(),
            attached,
            failed,
            total: reports.len(),
        }
    }

    #[test]
    fn strict_fails_on_a_refused_probe_but_not_on_skipped_or_disabled_ones() {
        let by_design = [
            report("a", AttachStatus::Attached),
            report("b", AttachStatus::Skipped("no such tracepoint".into())),
            report("c", AttachStatus::Disabled),
        ];
        let o = outcome(&by_design);
        assert!(o.passes(false) && o.passes(true));
        let mut refused = by_design.to_vec();
        refused.push(report("d", AttachStatus::Failed("EPERM".into())));
        let o = outcome(&refused);
        assert_eq!((o.attached, o.failed), (1, 1));
        assert!(
            o.passes(false),
            "one attached probe is enough without --strict"
        );
        assert!(!o.passes(true), "--strict passed with a refused probe");
        let none = outcome(&[report("e", AttachStatus::Disabled)]);
        assert!(!none.passes(false) && !none.passes(true));
    }
}

#[cfg(test)]
mod failure_summary_tests {
    use super::failure_summary;

    #[test]
    fn shows_the_verifiers_reason_rather_than_its_first_note() {
        let why = "the BPF_PROG_LOAD syscall returned Invalid argument (os error 22). Verifier \
                   output: arg#0 type is not a struct\nUnrecognized arg#0 type PTR\n\
                   40: (85) call unknown#158\ninvalid func unknown#158\n\
                   verification time 4990 usec\nstack depth 112+0\n\
                   processed 37 insns (limit 1000000)\n: Invalid argument (os error 22)";
        assert_eq!(
            failure_summary(why),
            "the BPF_PROG_LOAD syscall returned Invalid argument (os error 22). Verifier \
             output: … invalid func unknown#158"
        );
        assert_eq!(
            failure_summary("attach failed: EBUSY\nmore"),
            "attach failed: EBUSY"
        );
    }
}
