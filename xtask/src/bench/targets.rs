//! The headline table: each overhead target beside what this run measured. Nothing here is
//! asserted; a missed target is reported, not failed.

use super::ab::Pairs;
use super::cost::Cost;
use super::daemon::Probe;
use super::daemon_cost::DaemonCost;
use super::floor::{floor_ns_for, floor_per_op, same_hooks_per_op};
use super::report::Section;
use super::stats::{fmt_mib, fmt_ns, median, min_max, percentile, ratio, sign_test_p};
use super::workloads::Workload;

/// Results of the phases that ran (`None` for one that failed).
pub struct Inputs<'a> {
    pub costs: &'a [Cost],
    pub ab: &'a [Pairs],
    pub daemon: Option<&'a DaemonCost>,
    pub probes: &'a [Probe],
}

fn fio_cost<'a>(costs: &'a [Cost], tool: &str) -> Option<&'a Cost> {
    costs
        .iter()
        .find(|c| c.tool == tool && c.workload == Workload::Fio)
}

/// The mean ns/event of wbscope's hot programs: those that ran at least once per fio operation.
fn hottest(costs: &[Cost]) -> Option<(String, f64)> {
    let fio = fio_cost(costs, "wbscope")?;
    fio.programs
        .iter()
        .filter(|p| p.delta.runs as f64 >= fio.ops && p.delta.runs > 0)
        .map(|p| {
            (
                p.program.clone(),
                p.delta.run_ns as f64 / p.delta.runs as f64,
            )
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

fn met(ok: Option<bool>) -> String {
    match ok {
        Some(true) => "yes",
        Some(false) => "NO",
        None => "n/a",
    }
    .to_owned()
}

/// The loss a run may show and still count as "none": well inside the run-to-run spread.
const NO_LOSS: f64 = 0.98;

/// The A/B verdict from the per-pair throughput ratios: `NO` when a one-sided sign test
/// resolves a loss (p < 0.05), `yes` when it does not and the median pair ratio is within 2% of
/// 1 or above, `inconclusive` when the pairs are too noisy to tell either way.
fn ab_row(ab: &[Pairs], workload: Workload) -> (String, String) {
    let Some(p) = ab.iter().find(|p| p.workload == workload) else {
        return ("not measured".into(), "n/a".into());
    };
    let ratios: Vec<f64> = p
        .pairs
        .iter()
        .filter_map(|(a, b)| ratio(b.throughput, a.throughput))
        .collect();
    let (Some(m), Some((lo, hi))) = (median(&ratios), min_max(&ratios)) else {
        return ("not measured".into(), "n/a".into());
    };
    let below = ratios.iter().filter(|r| **r < 1.0).count();
    let p_loss = sign_test_p(below, ratios.len());
    let text = format!(
        "median pair ratio {m:.3} (min {lo:.3}, max {hi:.3}; {below} of {} below 1, \
         sign test p = {p_loss:.2})",
        ratios.len()
    );
    let verdict = if ratios.len() < 2 {
        "n/a (one pair)"
    } else if p_loss < 0.05 {
        "NO"
    } else if m >= NO_LOSS {
        "yes"
    } else {
        "inconclusive"
    };
    (text, verdict.to_owned())
}

/// target | measured | met.
pub fn section(i: &Inputs) -> Section {
    let mut s = Section::new("targets", "Targets", &["target", "measured", "met"]);
    let wb = fio_cost(i.costs, "wbscope");
    let per_op = wb.map(Cost::per_op_ns);
    let floor = floor_per_op(i.costs, Workload::Fio)
        .map_or_else(String::new, |f| format!(" (floor: {})", fmt_ns(f)));
    s.row(
        "per-op",
        vec![
            "BPF time per fio write+fsync ≤ 2 µs (every probe attached)".into(),
            per_op.map_or_else(
                || "not measured".into(),
                |v| format!("{}{floor}", fmt_ns(v)),
            ),
            met(per_op.map(|v| v <= 2000.0)),
        ],
    );
    for alt in ["bpftrace", "biolatency"] {
        let r = fio_cost(i.costs, alt).and_then(|a| ratio(a.per_op_ns(), per_op?));
        let (target, ok) = if alt == "bpftrace" {
            ("≥ 7x below the bpftrace script", r.map(|r| r >= 7.0))
        } else {
            ("below biolatency (block only)", r.map(|r| r > 1.0))
        };
        s.row(
            format!("vs-{alt}"),
            vec![
                target.into(),
                r.map_or_else(
                    || "not measured".into(),
                    |r| {
                        let same = fio_cost(i.costs, alt).and_then(|a| {
                            ratio(a.per_op_ns(), same_hooks_per_op(i.costs, i.probes, alt)?)
                        });
                        let same = same.map_or_else(String::new, |s| {
                            format!("; on the events {alt} hooks too: {s:.2}")
                        });
                        format!("{alt} / wbscope = {r:.2}{same}")
                    },
                ),
                met(ok),
            ],
        );
    }
    let hot = hottest(i.costs);
    s.row(
        "hot-hooks",
        vec![
            "hot hooks ≤ 150 ns/event mean (programs run ≥ once per fio op)".into(),
            hot.as_ref().map_or_else(
                || "no program runs once per op".into(),
                |(name, ns)| {
                    let floor = floor_ns_for(i.costs, i.probes, name)
                        .map_or_else(String::new, |f| format!(" (floor on its hook: {f:.0} ns)"));
                    format!("slowest: {name} {ns:.0} ns{floor}")
                },
            ),
            met(hot.map(|(_, ns)| ns <= 150.0)),
        ],
    );
    for w in Workload::ALL {
        let (text, verdict) = ab_row(i.ab, w);
        s.row(
            format!("ab-{}", w.key()),
            vec![
                format!("no measurable throughput loss, {} A/B", w.key()),
                text,
                verdict,
            ],
        );
    }
    daemon_rows(&mut s, i.daemon);
    s
}

fn daemon_rows(s: &mut Section, d: Option<&DaemonCost>) {
    let rss = d.map(|d| d.idle.peak_rss.max(d.load.peak_rss));
    s.row(
        "rss",
        vec![
            "daemon RSS ≤ 30 MiB (peak over the idle and loaded phases)".into(),
            rss.map_or_else(|| "not measured".into(), |b| fmt_mib(b as f64)),
            met(rss.map(|b| b <= 30 << 20)),
        ],
    );
    let idle = d.map(|d| 100.0 * d.idle.cpu_secs / d.idle.secs.max(1e-9));
    s.row(
        "idle-cpu",
        vec![
            "idle CPU ≤ 0.5% of a core".into(),
            idle.map_or_else(|| "not measured".into(), |p| format!("{p:.2}%")),
            met(idle.map(|p| p <= 0.5)),
        ],
    );
    let p99 = d.and_then(|d| percentile(&d.single.ns, 99.0));
    s.row(
        "scrape-p99",
        vec![
            "scrape p99 ≤ 10 ms (one scraper)".into(),
            p99.map_or_else(|| "not measured".into(), fmt_ns),
            met(p99.map(|ns| ns <= 10e6)),
        ],
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::workloads::Outcome;

    fn pairs(ratios: &[f64]) -> Vec<Pairs> {
        let o = |throughput| Outcome {
            ops: 1.0,
            throughput,
            flush_ns: 1.0,
            secs: 1.0,
        };
        vec![Pairs {
            workload: Workload::Fio,
            pairs: ratios.iter().map(|r| (o(100.0), o(100.0 * r))).collect(),
        }]
    }

    #[test]
    fn ab_verdicts() {
        let verdict = |r: &[f64]| ab_row(&pairs(r), Workload::Fio).1;
        assert_eq!(verdict(&[0.9; 8]), "NO");
        assert_eq!(
            verdict(&[0.99, 1.01, 0.995, 1.02, 0.98, 1.0, 1.03, 0.97]),
            "yes"
        );
        assert_eq!(
            verdict(&[0.1, 0.2, 0.7, 0.97, 1.3, 0.4, 0.66, 1.1]),
            "inconclusive"
        );
        assert_eq!(verdict(&[0.5]), "n/a (one pair)");
        assert_eq!(ab_row(&pairs(&[1.0]), Workload::Buffered).1, "n/a");
    }
}
