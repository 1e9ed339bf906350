//! Small statistics over measured samples (medians, percentiles, spread) and the number formats
//! the report uses.

/// `values` sorted ascending; NaNs (never produced by the measurements) sort last.
fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// The median (mean of the middle two for an even count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let v = sorted(values);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// The `p`-th percentile (0–100) by nearest rank, the definition that never invents a value
/// that was not observed; `None` when empty.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    let v = sorted(values);
    if v.is_empty() {
        return None;
    }
    let rank = (p / 100.0 * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

/// Smallest and largest value; `None` when empty.
pub fn min_max(values: &[f64]) -> Option<(f64, f64)> {
    let v = sorted(values);
    Some((*v.first()?, *v.last()?))
}

/// `a / b`, or `None` when `b` is zero (a ratio against nothing measured is meaningless).
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (b != 0.0).then(|| a / b)
}

/// One-sided sign test: the probability of at least `k` of `n` pairs falling on one side if
/// each side were equally likely (Binomial(n, 1/2) upper tail).
pub fn sign_test_p(k: usize, n: usize) -> f64 {
    let mut tail = 0.0;
    let mut choose = 1.0; // C(n, 0)
    for j in 0..=n {
        if j >= k {
            tail += choose;
        }
        choose = choose * (n - j) as f64 / (j + 1) as f64;
    }
    tail / 2f64.powi(n as i32)
}

/// The central `level` (e.g. 0.9) interval of `statistic` over samples split in `groups`, by the
/// percentile bootstrap: each of `resamples` draws replaces every group by as many of its own
/// samples drawn with replacement. It says how far the figure could move with other rounds of
/// the same noise. The generator has a fixed seed, so the same rounds always give the same
/// interval. `None` when a group is empty or the statistic is undefined on every draw.
pub fn bootstrap_interval(
    groups: &[Vec<f64>],
    statistic: impl Fn(&[Vec<f64>]) -> Option<f64>,
    resamples: usize,
    level: f64,
) -> Option<(f64, f64)> {
    if groups.iter().any(Vec::is_empty) {
        return None;
    }
    // xorshift64*: plenty for resampling a few rounds, and no dependency.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = |n: usize| {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    };
    let draws: Vec<f64> = (0..resamples)
        .filter_map(|_| {
            let drawn: Vec<Vec<f64>> = groups
                .iter()
                .map(|g| (0..g.len()).map(|_| g[next(g.len())]).collect())
                .collect();
            statistic(&drawn)
        })
        .collect();
    let tail = (1.0 - level) / 2.0 * 100.0;
    Some((percentile(&draws, tail)?, percentile(&draws, 100.0 - tail)?))
}

/// A duration in nanoseconds with a unit that keeps three significant digits readable:
/// `812 ns`, `14.6 µs`, `3.21 ms`, `1.50 s`.
pub fn fmt_ns(ns: f64) -> String {
    let abs = ns.abs();
    if abs < 1e3 {
        format!("{ns:.0} ns")
    } else if abs < 1e6 {
        format!("{} µs", sig3(ns / 1e3))
    } else if abs < 1e9 {
        format!("{} ms", sig3(ns / 1e6))
    } else {
        format!("{} s", sig3(ns / 1e9))
    }
}

/// Bytes as MiB with one decimal.
pub fn fmt_mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1024.0 * 1024.0))
}

/// A plain number with three significant digits (no exponent for the magnitudes we print).
pub fn sig3(x: f64) -> String {
    let abs = x.abs();
    if abs >= 100.0 {
        format!("{x:.0}")
    } else if abs >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// A ratio with three decimals, or `n/a`.
pub fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".to_owned(), |r| format!("{r:.3}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_interval_brackets_the_figure_and_widens_with_noise() {
        let mean_of_medians = |g: &[Vec<f64>]| Some((median(&g[0])? + median(&g[1])?) / 2.0);
        let quiet = vec![vec![40.0, 41.0, 42.0, 43.0], vec![10.0, 11.0, 12.0, 13.0]];
        let noisy = vec![vec![0.0, 30.0, 55.0, 80.0], vec![-30.0, 0.0, 25.0, 50.0]];
        let (lo, hi) = bootstrap_interval(&quiet, mean_of_medians, 2000, 0.9).unwrap();
        let figure = mean_of_medians(&quiet).unwrap();
        assert!(lo <= figure && figure <= hi, "{lo} {figure} {hi}");
        assert!(hi - lo <= 3.0, "quiet rounds: {lo} … {hi}");
        let (nlo, nhi) = bootstrap_interval(&noisy, mean_of_medians, 2000, 0.9).unwrap();
        assert!(nhi - nlo > 20.0, "noisy rounds: {nlo} … {nhi}");
        // The same rounds give the same interval.
        assert_eq!(
            bootstrap_interval(&noisy, mean_of_medians, 2000, 0.9),
            Some((nlo, nhi))
        );
        assert_eq!(
            bootstrap_interval(&[vec![], vec![1.0]], mean_of_medians, 10, 0.9),
            None
        );
    }

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn spread_and_ratio() {
        assert_eq!(min_max(&[2.0, -1.0, 5.0]), Some((-1.0, 5.0)));
        assert_eq!(ratio(1.0, 4.0), Some(0.25));
        assert_eq!(ratio(1.0, 0.0), None);
    }

    #[test]
    fn sign_test_tails() {
        assert_eq!(sign_test_p(0, 8), 1.0);
        assert!((sign_test_p(8, 8) - 1.0 / 256.0).abs() < 1e-12);
        assert!((sign_test_p(7, 8) - 9.0 / 256.0).abs() < 1e-12);
        assert!((sign_test_p(6, 8) - 37.0 / 256.0).abs() < 1e-12);
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_ns(812.4), "812 ns");
        assert_eq!(fmt_ns(14_612.0), "14.6 µs");
        assert_eq!(fmt_ns(3_214_000.0), "3.21 ms");
        assert_eq!(fmt_ns(1.5e9), "1.50 s");
        assert_eq!(fmt_mib(31_772.0 * 1024.0), "31.0 MiB");
        assert_eq!(fmt_ratio(Some(0.8951)), "0.895");
        assert_eq!(fmt_ratio(None), "n/a");
    }
}
