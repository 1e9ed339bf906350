//! Workload A/B: interleaved pairs of runs without and with wbscope attached, in alternating
//! order (ABBA) so that a drift of the host over the run does not favour one side.

use anyhow::Result;

use super::daemon::Daemon;
use super::report::Section;
use super::stats::{fmt_ns, fmt_ratio, median, min_max, ratio, sig3};
use super::workloads::{self, Outcome, Workload};
use super::{Ctx, interrupt};

/// The runs of one workload: `pairs[i] = (without, with)`.
pub struct Pairs {
    pub workload: Workload,
    pub pairs: Vec<(Outcome, Outcome)>,
}

/// Runs `ctx.plan.pairs` pairs of `workload`.
pub fn run(ctx: &Ctx, workload: Workload) -> Result<Pairs> {
    interrupt::check()?;
    let mut pairs = Vec::new();
    for i in 0..ctx.plan.pairs {
        // Even pairs run "without" first, odd pairs "with" first.
        let with_first = i % 2 == 1;
        let first = one(ctx, workload, with_first, i)?;
        let second = one(ctx, workload, !with_first, i)?;
        let (without, with) = if with_first {
            (second, first)
        } else {
            (first, second)
        };
        println!(
            "[bench] A/B {} pair {}/{}: without {} with {} (ratio {})",
            workload.key(),
            i + 1,
            ctx.plan.pairs,
            sig3(without.throughput),
            sig3(with.throughput),
            fmt_ratio(ratio(with.throughput, without.throughput))
        );
        pairs.push((without, with));
    }
    Ok(Pairs { workload, pairs })
}

/// One run, with the daemon started before and stopped after it when `with_wbscope`.
fn one(ctx: &Ctx, workload: Workload, with_wbscope: bool, pair: usize) -> Result<Outcome> {
    interrupt::check()?;
    workloads::prepare(workload, &ctx.work_dir, ctx.plan.sizes)?;
    let side = if with_wbscope { "with" } else { "without" };
    let log = ctx.log_path(&format!("ab-{}-{pair}-{side}.json", workload.key()));
    let daemon = if with_wbscope {
        Some(Daemon::start(
            &ctx.binary,
            &ctx.log_path(&format!("ab-{}-{pair}.log", workload.key())),
        )?)
    } else {
        None
    };
    let outcome = workloads::run(workload, &ctx.work_dir, ctx.plan.sizes, &log)?;
    if let Some(daemon) = daemon {
        daemon.stop()?;
    }
    Ok(outcome)
}

/// A row of the table: key, label, the value taken from each run, and its format.
type Metric = (
    &'static str,
    &'static str,
    fn(&Outcome) -> f64,
    fn(f64) -> String,
);

/// Median of each side, the ratio of medians, and the spread of the per-pair ratios.
struct Summary {
    without: f64,
    with: f64,
    ratio: Option<f64>,
    spread: Option<(f64, f64)>,
    below_one: usize,
}

fn summarize(pairs: &[(Outcome, Outcome)], value: fn(&Outcome) -> f64) -> Summary {
    let without: Vec<f64> = pairs.iter().map(|(a, _)| value(a)).collect();
    let with: Vec<f64> = pairs.iter().map(|(_, b)| value(b)).collect();
    let ratios: Vec<f64> = pairs
        .iter()
        .filter_map(|(a, b)| ratio(value(b), value(a)))
        .collect();
    let (m_without, m_with) = (
        median(&without).unwrap_or(0.0),
        median(&with).unwrap_or(0.0),
    );
    Summary {
        without: m_without,
        with: m_with,
        ratio: ratio(m_with, m_without),
        spread: min_max(&ratios),
        below_one: ratios.iter().filter(|r| **r < 1.0).count(),
    }
}

/// One row per workload and metric: throughput and flush latency.
pub fn section(results: &[Pairs]) -> Section {
    let mut s = Section::new(
        "ab",
        "Workload A/B (without / with wbscope)",
        &[
            "workload",
            "metric",
            "pairs",
            "median without",
            "median with",
            "ratio with/without",
            "per-pair ratio min – max",
            "pairs with ratio < 1",
        ],
    );
    for r in results {
        let (flush_key, flush_label) = match r.workload {
            Workload::Fio => ("fsync-p99", "fsync p99"),
            Workload::Buffered => ("sync-time", "sync(2) duration"),
        };
        let tput_label = match r.workload {
            Workload::Fio => "IOPS",
            Workload::Buffered => "MiB/s (write + sync)",
        };
        let metrics: [Metric; 2] = [
            ("throughput", tput_label, |o| o.throughput, sig3),
            (flush_key, flush_label, |o| o.flush_ns, fmt_ns),
        ];
        for (key, label, value, fmt) in metrics {
            let sum = summarize(&r.pairs, value);
            s.row(
                format!("{}/{key}", r.workload.key()),
                vec![
                    r.workload.key().to_owned(),
                    label.to_owned(),
                    r.pairs.len().to_string(),
                    fmt(sum.without),
                    fmt(sum.with),
                    fmt_ratio(sum.ratio),
                    sum.spread
                        .map_or_else(|| "n/a".to_owned(), |(lo, hi)| format!("{lo:.3} – {hi:.3}")),
                    format!("{} of {}", sum.below_one, r.pairs.len()),
                ],
            );
        }
    }
    s.note(
        "Throughput ratio < 1 means slower with wbscope; latency ratio > 1 means slower with \
         wbscope. Pairs alternate their order. The daemon runs with its default configuration \
         (BPF run-time stats off), as it would in production.",
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(throughput: f64) -> Outcome {
        Outcome {
            ops: 1.0,
            throughput,
            flush_ns: 1.0,
            secs: 1.0,
        }
    }

    #[test]
    fn summarizes_medians_ratios_and_spread() {
        let pairs = vec![
            (o(100.0), o(90.0)),
            (o(100.0), o(110.0)),
            (o(80.0), o(76.0)),
        ];
        let s = summarize(&pairs, |o| o.throughput);
        assert_eq!(s.without, 100.0);
        assert_eq!(s.with, 90.0);
        assert_eq!(s.ratio, Some(0.9));
        assert_eq!(s.spread, Some((0.9, 1.1)));
        assert_eq!(s.below_one, 2);
    }
}
