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

/// Runs `rounds` fio runs, each under both daemon configurations at once, alternating which
/// attaches first.
pub fn run(ctx: &Ctx, rounds: usize) -> Result<BioCost> {
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
    let mut cost = BioCost::default();
    for round in 0..rounds {
        interrupt::check()?;
        let on_first = round % 2 == 0;
        let r = one_round(ctx, on_first, &on_config, &off_config)?;
        println!(
            "[bench] {PROGRAM} on the same bios, family {} attached first: {:.0} ns/event with \
             device writes, {:.0} without ({:+.0})",
            if on_first { "on" } else { "off" },
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
    on_first: bool,
    on_config: &std::path::Path,
    off_config: &std::path::Path,
) -> Result<Round> {
    let start = |on: bool| {
        let (log, config) = if on {
            ("daemon-bio-cost-on.log", on_config)
        } else {
            ("daemon-bio-cost-off.log", off_config)
        };
        Daemon::start_with(&ctx.binary, &ctx.log_path(log), Some(config))
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
    s.row(
        "with",
        vec![
            format!("{PROGRAM}, family on"),
            fmt(median(&with)),
            with.len().to_string(),
        ],
    );
    s.row(
        "without",
        vec![
            format!("{PROGRAM}, `[probes] disable = [\"{FAMILY}\"]`"),
            fmt(median(&without)),
            without.len().to_string(),
        ],
    );
    for (key, on_first, text) in [
        (
            "addition-on-first",
            true,
            "added, family's program attached first",
        ),
        (
            "addition-on-second",
            false,
            "added, family's program attached second",
        ),
    ] {
        let n = cost.additions_in_order(on_first).len();
        s.row(
            key,
            vec![
                text.to_owned(),
                fmt(cost.addition_in_order(on_first)),
                n.to_string(),
            ],
        );
    }
    s.row(
        "addition",
        vec![
            "added by the family (mean of the two orders)".to_owned(),
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
         the family and one without, so both programs count the same bios; the attach order \
         alternates because the first program meets the bio's cache lines cold. The block \
         family's own counting of every bio is in both figures. The interval resamples each \
         order's rounds (4000 draws, fixed seed): on a host whose rounds spread widely it is \
         wide, and a figure inside ±(half its width) of the target is not told apart from it.",
    );
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

    #[test]
    fn one_order_alone_has_a_figure_but_no_interval() {
        let cost = BioCost {
            rounds: vec![round(true, 140.0, 100.0), round(true, 150.0, 100.0)],
        };
        assert_eq!(cost.addition_ns(), Some(45.0));
        assert_eq!(cost.addition_interval(), None);
    }

    #[test]
    fn one_order_alone_is_its_own_median() {
        let cost = BioCost {
            rounds: vec![round(true, 150.0, 120.0)],
        };
        assert_eq!(cost.addition_ns(), Some(30.0));
        assert_eq!(BioCost::default().addition_ns(), None);
    }
}
