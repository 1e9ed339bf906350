//! What the device-writes family (write bytes by writeback source) adds to every bio: the mean
//! cost per event of `block_bio_queue` over the fio workload, with the family on and with
//! `[probes] disable = ["device writes by source"]`, in alternating runs of one daemon
//! configuration after the other. The block family's own counting is in both.

use anyhow::{Context, Result};

use super::bpfstats::StatsEnabled;
use super::cost::measure;
use super::daemon::Daemon;
use super::report::Section;
use super::stats::median;
use super::workloads::Workload;
use super::{Ctx, interrupt};

/// The program whose events are compared.
const PROGRAM: &str = "block_bio_queue";

/// The family's name in `[probes] disable`.
const FAMILY: &str = "device writes by source";

/// Per-bio figures of the alternating runs.
#[derive(Debug, Clone)]
pub struct BioCost {
    /// Mean ns per `block_bio_queue` event in each run with the family on.
    pub with: Vec<f64>,
    /// The same with the family disabled.
    pub without: Vec<f64>,
}

impl BioCost {
    /// Median with the family on minus median without, in ns per bio.
    pub fn addition_ns(&self) -> Option<f64> {
        Some(median(&self.with)? - median(&self.without)?)
    }
}

/// Runs the fio workload `rounds` times in each configuration, alternating which goes first.
pub fn run(ctx: &Ctx, rounds: usize) -> Result<BioCost> {
    let config = ctx.log_path("bio-cost-without-device-writes.toml");
    std::fs::write(&config, format!("[probes]\ndisable = [\"{FAMILY}\"]\n"))
        .with_context(|| format!("writing {}", config.display()))?;
    let mut cost = BioCost {
        with: Vec::new(),
        without: Vec::new(),
    };
    for round in 0..rounds {
        for family_on in [round % 2 == 0, round % 2 != 0] {
            interrupt::check()?;
            let ns = one_run(ctx, if family_on { None } else { Some(&config) })?;
            println!(
                "[bench] {PROGRAM} with device writes {}: {ns:.0} ns/event",
                if family_on { "on" } else { "off" }
            );
            if family_on {
                cost.with.push(ns);
            } else {
                cost.without.push(ns);
            }
        }
    }
    Ok(cost)
}

/// One fio run under a daemon started with `config` (`None`: the default); the mean ns per
/// `block_bio_queue` event.
fn one_run(ctx: &Ctx, config: Option<&std::path::PathBuf>) -> Result<f64> {
    let log = ctx.log_path(if config.is_some() {
        "daemon-bio-cost-off.log"
    } else {
        "daemon-bio-cost-on.log"
    });
    let daemon = Daemon::start_with(&ctx.binary, &log, config.map(|c| c.as_path()))?;
    let cost = {
        let _stats = StatsEnabled::on()?;
        measure(ctx, "wbscope", Workload::Fio, || daemon.program_stats())
    };
    daemon.stop()?;
    let cost = cost?;
    let p = cost
        .programs
        .iter()
        .find(|p| p.program == PROGRAM)
        .with_context(|| format!("no {PROGRAM} program in the daemon's statistics"))?;
    if p.delta.runs == 0 {
        anyhow::bail!("{PROGRAM} did not run during the fio workload");
    }
    Ok(p.delta.run_ns as f64 / p.delta.runs as f64)
}

/// The section: medians and the difference.
pub fn section(cost: &BioCost) -> Section {
    let mut s = Section::new(
        "bio-cost",
        "What device writes by source add per bio",
        &["figure", "ns per bio (median)", "runs"],
    );
    let cell = |v: &[f64]| median(v).map_or("n/a".to_owned(), |m| format!("{m:.0}"));
    s.row(
        "with",
        vec![
            format!("{PROGRAM}, family on"),
            cell(&cost.with),
            cost.with.len().to_string(),
        ],
    );
    s.row(
        "without",
        vec![
            format!("{PROGRAM}, `[probes] disable = [\"{FAMILY}\"]`"),
            cell(&cost.without),
            cost.without.len().to_string(),
        ],
    );
    s.row(
        "addition",
        vec![
            "added by the family".to_owned(),
            cost.addition_ns()
                .map_or("n/a".to_owned(), |a| format!("{a:.0}")),
            "-".to_owned(),
        ],
    );
    s.note(
        "Alternating fio runs (4 KiB writes + fsync), one daemon start per run; the block \
         family's own counting of every bio is in both figures.",
    );
    s
}
