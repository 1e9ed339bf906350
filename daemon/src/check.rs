//! `wbscope check`: for every probe the build knows, whether it attaches on this kernel and why
//! not. Loads and attaches for real, then detaches everything.

use std::fmt::Write as _;

use prometheus::{core::Collector, process_collector::ProcessCollector};

use crate::{
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
    pub total: usize,
}

/// The metric family names the daemon registers, from its collectors' descriptors (what
/// dashboards and rules may use). Loads the probes like `run_check`, then detaches.
pub fn metric_names(disabled: &[String]) -> Result<Vec<String>, DaemonError> {
    require_bpf_privileges()?;
    let Loaded {
        kernel: _,
        families,
        probes: mut loaded,
    } = load_families(0, disabled)?;
    let ctx = CollectorContext {
        page_size: kernel::page_size(),
        map_errors: MapErrors::default(),
        stalls: crate::stalls::StallShared::default(),
        scrape_errors: crate::metrics::ScrapeErrors::default(),
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
    collectors.push(Box::new(ProcessCollector::for_self()));
    let mut names: Vec<String> = collectors
        .iter()
        .flat_map(|c| {
            c.desc()
                .into_iter()
                .map(|d| d.fq_name.clone())
                .collect::<Vec<_>>()
        })
        .collect();
    // Not from collectors: the scrape-error counts are appended to each answer, and the HTTP
    // server registers its own counters.
    names.push(crate::metrics::scrape_errors::METRIC.to_owned());
    names.extend(
        crate::web::http_metrics::NAMES
            .iter()
            .map(|n| (*n).to_owned()),
    );
    names.sort();
    names.dedup();
    Ok(names)
}

/// Runs the check (needs the same privileges as the daemon).
pub fn run_check(verbose: bool, disabled: &[String]) -> Result<CheckOutcome, DaemonError> {
    require_bpf_privileges()?;
    let Loaded {
        kernel,
        families,
        probes: loaded,
    } = load_families(0, disabled)?;
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
    for family in &families {
        for line in family.describe() {
            let _ = writeln!(text, "{line}");
        }
    }
    let _ = writeln!(text);
    text.push_str(&format_reports(&loaded.reports, verbose));
    let attached = loaded.attached();
    let total = loaded.reports.len();
    let _ = writeln!(text, "\n{attached} of {total} probes attach on this kernel");
    // Dropping `loaded` detaches everything.
    drop(loaded);
    Ok(CheckOutcome {
        text,
        attached,
        total,
    })
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
            AttachStatus::Failed(why) if verbose => format!("FAILED: {why}"),
            AttachStatus::Failed(why) => {
                format!(
                    "FAILED: {} (--verbose shows the kernel's whole answer)",
                    first_line(why)
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

/// Verifier logs can be hundreds of lines; the table shows the first.
fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}
