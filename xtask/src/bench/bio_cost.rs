//! What the device-writes family (write bytes by writeback source) adds to every bio: the mean
//! cost per event of `block_bio_queue` with the family on and with `[probes] disable = ["device
//! writes by source"]`, measured on the same bios. Each round starts both daemon configurations
//! side by side, so both programs run on every bio of one fio run, and the difference is free of
//! what varies from run to run (the workload, the host's other load, where the maps landed).
//! The program attached first meets the bio's cache lines cold, so the attach order alternates
//! between rounds and the addition is the mean of the two orders' medians. The block family's
//! own counting of every bio is in both figures.

use std::collections::BTreeMap;

use anyhow::{Context, Result};

use super::bpfstats::{Counters, StatsEnabled};
use super::cost::{Cost, measure};
use super::daemon::Daemon;
use super::report::Section;
use super::stats::{bootstrap_interval, median};
use super::workloads::Workload;
use super::{Ctx, interrupt};

/// The program whose events are compared.
const PROGRAM: &str = "block_bio_queue";

/// The family's name in `[probes] disable`.
const FAMILY: &str = "device writes by source";

/// One fio run under both daemons.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Round {
    /// Whether the daemon with the family on attached (and so runs) first.
    pub on_first: bool,
    /// Mean ns per `block_bio_queue` event of the daemon with the family on.
    pub with: f64,
    /// The same for the daemon with the family disabled.
    pub without: f64,
}

/// Per-bio figures of the rounds.
#[derive(Debug, Clone, Default)]
pub struct BioCost {
    pub rounds: Vec<Round>,
    /// The other build compared with (`--bio-cost-against`), where it was not the family off.
    pub against: Option<String>,
}

impl BioCost {
    /// Mean ns per event with the family on, one per round.
    pub fn with(&self) -> Vec<f64> {
        self.rounds.iter().map(|r| r.with).collect()
    }

    /// Mean ns per event with the family off, one per round.
    pub fn without(&self) -> Vec<f64> {
        self.rounds.iter().map(|r| r.without).collect()
    }

    /// The median addition of the rounds in which the family's daemon attached first
    /// (`on_first`) or second.
    pub fn addition_in_order(&self, on_first: bool) -> Option<f64> {
        median(&self.additions_in_order(on_first))
    }

    /// The per-round additions of the rounds in which the family's daemon attached first
    /// (`on_first`) or second.
    fn additions_in_order(&self, on_first: bool) -> Vec<f64> {
        self.rounds
            .iter()
            .filter(|r| r.on_first == on_first)
            .map(|r| r.with - r.without)
            .collect()
    }

    /// ns per bio the family adds: the mean of the two attach orders' median additions, which
    /// cancels the cold-cache share the first program pays (one order alone where only one was
    /// measured).
    pub fn addition_ns(&self) -> Option<f64> {
        mean_of_order_medians(&self.additions_by_order())
    }

    /// The 90 % bootstrap interval of [`Self::addition_ns`] over the rounds (each order's rounds
    /// resampled on their own): how far the figure could move with other rounds on this host.
    /// `None` unless both orders were measured.
    pub fn addition_interval(&self) -> Option<(f64, f64)> {
        bootstrap_interval(
            &self.additions_by_order(),
            mean_of_order_medians,
            BOOTSTRAP_DRAWS,
            0.9,
        )
    }

    /// The per-round additions with the family attached first, then second.
    fn additions_by_order(&self) -> Vec<Vec<f64>> {
        vec![
            self.additions_in_order(true),
            self.additions_in_order(false),
        ]
    }
}

/// Resamples behind [`BioCost::addition_interval`].
const BOOTSTRAP_DRAWS: usize = 4000;

/// The mean of the median addition of each order that has rounds (one order alone where only
/// one was measured).
fn mean_of_order_medians(groups: &[Vec<f64>]) -> Option<f64> {
    let medians: Vec<f64> = groups.iter().filter_map(|g| median(g)).collect();
    (!medians.is_empty()).then(|| medians.iter().sum::<f64>() / medians.len() as f64)
}

/// What the daemon with the family on is compared with on the same bios.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Baseline<'a> {
    /// The same binary with `[probes] disable = ["device writes by source"]`.
    FamilyOff,
    /// Another build, family on (`--bio-cost-against`).
    Build(&'a std::path::Path),
}

impl Baseline<'_> {
    fn of(ctx: &Ctx) -> Baseline<'_> {
        ctx.bio_cost_against
            .as_deref()
            .map_or(Baseline::FamilyOff, Baseline::Build)
    }

    /// The two sides in progress lines: (this one, the baseline).
    fn labels(self) -> (&'static str, &'static str) {
        match self {
            Baseline::FamilyOff => ("with device writes", "without"),
            Baseline::Build(_) => ("this build", "the other build"),
        }
    }
}

/// Runs `rounds` fio runs, each under both daemon configurations at once, alternating which
/// attaches first.
pub fn run(ctx: &Ctx, rounds: usize) -> Result<BioCost> {
    let baseline = Baseline::of(ctx);
    let (this, other) = baseline.labels();
    let on_config = ctx.log_path("bio-cost-with-device-writes.toml");
    let off_config = ctx.log_path("bio-cost-without-device-writes.toml");
    // No stall socket: two daemons side by side must not both bind the default one.
    let no_socket = "[stalls]\nsocket = \"\"\n";
    std::fs::write(&on_config, no_socket)
        .with_context(|| format!("writing {}", on_config.display()))?;
    std::fs::write(
        &off_config,
        format!("{no_socket}[probes]\ndisable = [\"{FAMILY}\"]\n"),
    )
    .with_context(|| format!("writing {}", off_config.display()))?;
    let mut cost = BioCost {
        against: match baseline {
            Baseline::FamilyOff => None,
            Baseline::Build(other) => Some(other.display().to_string()),
        },
        ..BioCost::default()
    };
    for round in 0..rounds {
        interrupt::check()?;
        let on_first = round % 2 == 0;
        let r = one_round(ctx, baseline, on_first, &on_config, &off_config)?;
        println!(
            "[bench] {PROGRAM} on the same bios, {} attached first: {:.0} ns/event {this}, \
             {:.0} {other} ({:+.0})",
            if on_first { this } else { other },
            r.with,
            r.without,
            r.with - r.without
        );
        cost.rounds.push(r);
    }
    Ok(cost)
}

/// One fio run under both daemons, the one with the family on started first if `on_first`.
fn one_round(
    ctx: &Ctx,
    baseline: Baseline<'_>,
    on_first: bool,
    on_config: &std::path::Path,
    off_config: &std::path::Path,
) -> Result<Round> {
    let start = |on: bool| match (on, baseline) {
        (true, _) => Daemon::start_with(
            &ctx.binary,
            &ctx.log_path("daemon-bio-cost-on.log"),
            Some(on_config),
        ),
        (false, Baseline::FamilyOff) => Daemon::start_with(
            &ctx.binary,
            &ctx.log_path("daemon-bio-cost-off.log"),
            Some(off_config),
        ),
        (false, Baseline::Build(other)) => Daemon::start_with(
            other,
            &ctx.log_path("daemon-bio-cost-other-build.log"),
            Some(on_config),
        ),
    };
    let first = start(on_first)?;
    let second = start(!on_first)?;
    let (on, off) = if on_first {
        (&first, &second)
    } else {
        (&second, &first)
    };
    let cost = {
        let _stats = StatsEnabled::on()?;
        measure(ctx, "block_bio_queue of both", Workload::Fio, || {
            let mut both = BTreeMap::new();
            for (daemon, tag) in [(on, "on"), (off, "off")] {
                if let Some(c) = daemon.program_stats()?.remove(PROGRAM) {
                    both.insert(tag.to_owned(), c);
                }
            }
            Ok::<_, anyhow::Error>(both)
        })
    };
    second.stop()?;
    first.stop()?;
    let cost = cost?;
    Ok(Round {
        on_first,
        with: per_event(&cost, "on")?,
        without: per_event(&cost, "off")?,
    })
}

/// Mean ns per `block_bio_queue` event of the daemon tagged `tag` in `cost`.
fn per_event(cost: &Cost, tag: &str) -> Result<f64> {
    let p = cost
        .programs
        .iter()
        .find(|p| p.program == tag)
        .with_context(|| format!("no {PROGRAM} program in the {tag} daemon's statistics"))?;
    let Counters { run_ns, runs } = p.delta;
    if runs == 0 {
        anyhow::bail!("{PROGRAM} of the {tag} daemon did not run during the fio workload");
    }
    Ok(run_ns as f64 / runs as f64)
}

/// The section: medians of each configuration, the addition in each attach order and overall.
pub fn section(cost: &BioCost) -> Section {
    let mut s = Section::new(
        "bio-cost",
        "What device writes by source add per bio",
        &["figure", "ns per bio (median)", "rounds"],
    );
    let fmt = |v: Option<f64>| v.map_or("n/a".to_owned(), |m| format!("{m:.0}"));
    let (with, without) = (cost.with(), cost.without());
    // Row labels: (this side, the baseline, the order rows' prefix, the total's).
    let (this, baseline, added_in_order, added) = match &cost.against {
        None => (
            format!("{PROGRAM}, family on"),
            format!("{PROGRAM}, `[probes] disable = [\"{FAMILY}\"]`"),
            "added, family's",
            "added by the family",
        ),
        Some(other) => (
            format!("{PROGRAM}, this build"),
            format!("{PROGRAM}, `{other}` (family on in both)"),
            "added by this build, this build's",
            "added by this build",
        ),
    };
    s.row(
        "with",
        vec![this, fmt(median(&with)), with.len().to_string()],
    );
    s.row(
        "without",
        vec![baseline, fmt(median(&without)), without.len().to_string()],
    );
    for (key, on_first, order) in [
        ("addition-on-first", true, "first"),
        ("addition-on-second", false, "second"),
    ] {
        let text = format!("{added_in_order} program attached {order}");
        let n = cost.additions_in_order(on_first).len();
        s.row(
            key,
            vec![text, fmt(cost.addition_in_order(on_first)), n.to_string()],
        );
    }
    s.row(
        "addition",
        vec![
            format!("{added} (mean of the two orders)"),
            fmt(cost.addition_ns()),
            cost.rounds.len().to_string(),
        ],
    );
    s.row(
        "addition-interval",
        vec![
            "90 % interval of that figure (bootstrap over the rounds)".to_owned(),
            cost.addition_interval()
                .map_or("n/a".to_owned(), |(lo, hi)| format!("{lo:.0} … {hi:.0}")),
            cost.rounds.len().to_string(),
        ],
    );
    s.note(
        "Each round is one fio run (4 KiB writes + fsync) under two daemons at once, one with \
         the family and one without (or two builds, below), so both programs count the same \
         bios; the attach order alternates because the first program meets the bio's cache \
         lines cold. The block \
         family's own counting of every bio is in both figures. The interval resamples each \
         order's rounds (4000 draws, fixed seed): on a host whose rounds spread widely it is \
         wide, and a figure inside ±(half its width) of the target is not told apart from it.",
    );
    if let Some(other) = &cost.against {
        s.note(format!(
            "Compared with another build (`--bio-cost-against {other}`): both daemons have the \
             family on, so the figure is what this build's per-bio path costs more (negative: \
             less) than that build's on the same bios, not what the family adds."
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(on_first: bool, with: f64, without: f64) -> Round {
        Round {
            on_first,
            with,
            without,
        }
    }

    #[test]
    fn addition_cancels_the_attach_order() {
        // The first program pays 30 ns of cold lines; the family adds 10 ns.
        let cost = BioCost {
            against: None,
            rounds: vec![
                round(true, 140.0, 100.0),
                round(false, 110.0, 130.0),
                round(true, 142.0, 100.0),
                round(false, 112.0, 130.0),
            ],
        };
        assert_eq!(cost.addition_in_order(true), Some(41.0));
        assert_eq!(cost.addition_in_order(false), Some(-19.0));
        assert_eq!(cost.addition_ns(), Some(11.0));
        // Each order's additions differ by 2 ns: the interval is that narrow around 11.
        let (lo, hi) = cost.addition_interval().unwrap();
        assert!(lo <= 11.0 && 11.0 <= hi && hi - lo <= 2.0, "{lo} … {hi}");
    }

    /// Against another build the rows keep their keys (the expected-row check) but say which
    /// builds they compare, and a note says the figure is not the family's addition.
    #[test]
    fn against_another_build_names_both_builds() {
        let rounds = vec![round(true, 150.0, 140.0), round(false, 130.0, 135.0)];
        let family = section(&BioCost {
            against: None,
            rounds: rounds.clone(),
        });
        let builds = section(&BioCost {
            against: Some("/tmp/old-wbscope".to_owned()),
            rounds,
        });
        let keys = |s: &Section| s.rows.iter().map(|r| r.key.clone()).collect::<Vec<_>>();
        assert_eq!(keys(&family), keys(&builds));
        let cell = |s: &Section, key: &str| {
            s.rows
                .iter()
                .find(|r| r.key == key)
                .map(|r| r.cells[0].clone())
                .unwrap_or_default()
        };
        assert!(cell(&family, "without").contains("disable"));
        assert!(cell(&builds, "without").contains("/tmp/old-wbscope"));
        assert!(cell(&builds, "addition").contains("this build"));
        assert!(
            builds
                .notes
                .iter()
                .any(|n| n.contains("not what the family adds"))
        );
        assert!(
            !family
                .notes
                .iter()
                .any(|n| n.contains("--bio-cost-against"))
        );
    }

    #[test]
    fn one_order_alone_has_a_figure_but_no_interval() {
        let cost = BioCost {
            against: None,
            rounds: vec![round(true, 140.0, 100.0), round(true, 150.0, 100.0)],
        };
        assert_eq!(cost.addition_ns(), Some(45.0));
        assert_eq!(cost.addition_interval(), None);
    }

    #[test]
    fn one_order_alone_is_its_own_median() {
        let cost = BioCost {
            against: None,
            rounds: vec![round(true, 150.0, 120.0)],
        };
        assert_eq!(cost.addition_ns(), Some(30.0));
        assert_eq!(BioCost::default().addition_ns(), None);
    }
}
