//! Quantiles of the observations that fell into a histogram between two scrapes, from the
//! difference of its cumulative `_bucket` series (the same linear interpolation as PromQL's
//! `histogram_quantile`).

/// Cumulative bucket counts by upper bound (`le`), the `+Inf` bucket included.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Buckets(Vec<(f64, f64)>);

impl Buckets {
    /// Adds `count` to the bucket with bound `le` (merging series of one group).
    pub fn add(&mut self, le: f64, count: f64) {
        match self.0.iter_mut().find(|(b, _)| *b == le) {
            Some((_, c)) => *c += count,
            None => self.0.push((le, count)),
        }
    }

    /// Observations in the window (the `+Inf` bucket, or the largest one).
    pub fn total(&self) -> f64 {
        self.sorted().last().map_or(0.0, |(_, c)| *c)
    }

    fn sorted(&self) -> Vec<(f64, f64)> {
        let mut b = self.0.clone();
        b.sort_by(|x, y| x.0.total_cmp(&y.0));
        b
    }

    /// The `q` quantile (0..=1), or `None` without observations. Within a bucket observations
    /// are assumed spread evenly; a rank in the `+Inf` bucket answers the largest finite bound.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let buckets = self.sorted();
        let total = buckets.last()?.1;
        if total <= 0.0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * total;
        let (mut lower, mut below) = (0.0, 0.0);
        for (le, count) in buckets {
            if count >= rank && count > below {
                if le.is_infinite() {
                    return Some(lower);
                }
                return Some(lower + (le - lower) * (rank - below) / (count - below));
            }
            if le.is_finite() {
                lower = le;
            }
            below = count;
        }
        Some(lower)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buckets(pairs: &[(f64, f64)]) -> Buckets {
        let mut b = Buckets::default();
        for &(le, c) in pairs {
            b.add(le, c);
        }
        b
    }

    #[test]
    fn interpolates_within_the_bucket() {
        // 10 observations in (0, 1], 10 in (1, 2].
        let b = buckets(&[(2.0, 20.0), (1.0, 10.0), (f64::INFINITY, 20.0)]);
        assert_eq!(b.total(), 20.0);
        assert_eq!(b.quantile(0.5), Some(1.0));
        assert_eq!(b.quantile(0.75), Some(1.5));
        assert!((b.quantile(0.99).unwrap() - 1.98).abs() < 1e-9);
    }

    #[test]
    fn empty_window_has_no_quantile() {
        assert_eq!(
            buckets(&[(1.0, 0.0), (f64::INFINITY, 0.0)]).quantile(0.5),
            None
        );
        assert_eq!(Buckets::default().quantile(0.5), None);
    }

    #[test]
    fn rank_in_inf_bucket_answers_largest_bound() {
        let b = buckets(&[(1.0, 1.0), (f64::INFINITY, 10.0)]);
        assert_eq!(b.quantile(0.99), Some(1.0));
    }

    #[test]
    fn merging_series_adds_counts() {
        let mut b = buckets(&[(0.5, 1.0), (f64::INFINITY, 1.0)]);
        b.add(0.5, 0.0);
        b.add(f64::INFINITY, 3.0);
        assert_eq!(b.total(), 4.0);
        // Rank 2 of 4 lies in (0.5, +Inf]: the largest finite bound.
        assert_eq!(b.quantile(0.5), Some(0.5));
        assert_eq!(b.quantile(0.25), Some(0.5));
        assert_eq!(b.quantile(0.1), Some(0.2));
    }
}
