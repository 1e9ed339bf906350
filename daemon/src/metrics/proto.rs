//! Building Prometheus metric families (protobuf model) by hand, for values that live in maps.

use probe_common::hist::{Log2Hist, MAX_SLOT, MIN_SLOT, upper_bound_seconds};

use crate::metrics::detail::Detail;
use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType,
};

/// A metric family under construction.
pub struct MetricBuilder {
    inner: MetricFamily,
}

impl MetricBuilder {
    fn new(name: &str, help: &str, kind: MetricType) -> MetricBuilder {
        let mut inner = MetricFamily::default();
        inner.set_name(name.to_owned());
        inner.set_help(help.to_owned());
        inner.set_field_type(kind);
        MetricBuilder { inner }
    }

    /// A counter family; its help text is looked up in `helps` (name, help) pairs.
    pub fn counter(name: &str, helps: &[(&str, &str)]) -> MetricBuilder {
        MetricBuilder::new(name, help_for(name, helps), MetricType::COUNTER)
    }

    /// A gauge family.
    pub fn gauge(name: &str, helps: &[(&str, &str)]) -> MetricBuilder {
        MetricBuilder::new(name, help_for(name, helps), MetricType::GAUGE)
    }

    /// A histogram family.
    pub fn histogram(name: &str, helps: &[(&str, &str)]) -> MetricBuilder {
        MetricBuilder::new(name, help_for(name, helps), MetricType::HISTOGRAM)
    }

    /// Adds a counter sample.
    pub fn add_counter(&mut self, labels: &[(&str, &str)], value: f64) {
        let mut counter = Counter::default();
        counter.set_value(value);
        let mut metric = Metric::from_label(label_pairs(labels));
        metric.set_counter(counter);
        self.inner.mut_metric().push(metric);
    }

    /// Adds a gauge sample.
    pub fn add_gauge(&mut self, labels: &[(&str, &str)], value: f64) {
        let mut gauge = Gauge::default();
        gauge.set_value(value);
        let mut metric = Metric::from_label(label_pairs(labels));
        metric.set_gauge(gauge);
        self.inner.mut_metric().push(metric);
    }

    /// Adds a histogram sample built from an in-kernel log2 histogram.
    pub fn add_log2_histogram(&mut self, labels: &[(&str, &str)], hist: &Log2Hist) {
        let mut metric = Metric::from_label(label_pairs(labels));
        metric.set_histogram(log2_to_histogram(hist, super::detail::get()));
        self.inner.mut_metric().push(metric);
    }

    /// The finished family, or `None` when it has no samples (the text encoder rejects empty
    /// families).
    pub fn finish(self) -> Option<MetricFamily> {
        (!self.inner.get_metric().is_empty()).then_some(self.inner)
    }
}

fn help_for<'a>(name: &str, helps: &[(&str, &'a str)]) -> &'a str {
    helps
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, h)| *h)
        .unwrap_or("")
}

/// The pairs with a value: an empty value is how a collector leaves a label out at a lower
/// detail level (Prometheus treats `name=""` as no label, so the exposition omits it).
fn label_pairs(labels: &[(&str, &str)]) -> Vec<LabelPair> {
    labels
        .iter()
        .filter(|(_, value)| !value.is_empty())
        .map(|(name, value)| {
            let mut pair = LabelPair::default();
            pair.set_name((*name).to_owned());
            pair.set_value((*value).to_owned());
            pair
        })
        .collect()
}

/// The lowest bound `Detail::Basic` exports: 2^15 ns = 32.8 µs. Faster calls and requests all
/// fall into it.
pub const BASIC_LOWEST_SLOT: usize = 15;
/// The highest bound `Detail::Basic` exports: 2^33 ns = 8.6 s. Slower ones are counted in
/// `+Inf` only (a quantile that falls there reads 8.6 s); the fleet budget (README, "Series per
/// device") leaves 7 bounds per histogram, spent on the range where stalls and their causes
/// show.
pub const BASIC_HIGHEST_SLOT: usize = 33;

/// Converts per-slot counts into cumulative buckets `le = 2^i ns` in seconds: for every i in
/// MIN_SLOT..=MAX_SLOT (`Detail::Full`, 27 bounds from 1 µs to 68.7 s), or every third one from
/// [`BASIC_LOWEST_SLOT`] to [`BASIC_HIGHEST_SLOT`] (`Detail::Basic`, a factor of 8 apart, 7
/// bounds from 32.8 µs to 8.6 s). The counts stay exact: a coarser bucket is the sum of the
/// finer ones below its bound. The encoder adds `+Inf` from the sample count, which includes
/// the overflow slot.
pub fn log2_to_histogram(hist: &Log2Hist, detail: Detail) -> Histogram {
    let mut cumulative = 0u64;
    let mut buckets = Vec::with_capacity(MAX_SLOT - MIN_SLOT + 1);
    for (slot, count) in hist.buckets.iter().enumerate().take(MAX_SLOT + 1) {
        cumulative += count;
        let exported = match detail {
            Detail::Full => true,
            Detail::Basic => {
                (BASIC_LOWEST_SLOT..=BASIC_HIGHEST_SLOT).contains(&slot)
                    && (slot - BASIC_LOWEST_SLOT).is_multiple_of(3)
            }
        };
        if slot >= MIN_SLOT && exported {
            let mut bucket = Bucket::default();
            bucket.set_cumulative_count(cumulative);
            bucket.set_upper_bound(upper_bound_seconds(slot));
            buckets.push(bucket);
        }
    }
    let mut out = Histogram::default();
    out.set_sample_count(hist.count());
    out.set_sample_sum(hist.sum_ns as f64 / 1e9);
    out.set_bucket(buckets);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use probe_common::hist::OVERFLOW_SLOT;

    #[test]
    fn buckets_are_cumulative_and_count_includes_overflow() {
        let mut h = Log2Hist::ZERO;
        h.record(500); // slot 10
        h.record(3_000); // slot 12
        h.record(3_000);
        h.record(1 << 40); // overflow
        let p = log2_to_histogram(&h, Detail::Full);
        let buckets = p.get_bucket();
        assert_eq!(buckets.len(), MAX_SLOT - MIN_SLOT + 1);
        assert_eq!(buckets[0].upper_bound(), 1.024e-6);
        assert_eq!(buckets[0].cumulative_count(), 1);
        assert_eq!(buckets[1].cumulative_count(), 1);
        assert_eq!(buckets[2].cumulative_count(), 3);
        assert_eq!(buckets.last().map(|b| b.cumulative_count()), Some(3));
        assert_eq!(p.get_sample_count(), 4);
        assert_eq!(h.buckets[OVERFLOW_SLOT], 1);
        let expected_sum = (500.0 + 6_000.0 + (1u64 << 40) as f64) / 1e9;
        assert!((p.get_sample_sum() - expected_sum).abs() < 1e-9);
    }

    #[test]
    fn basic_detail_keeps_every_third_bound_from_32_us_to_8_s_with_exact_counts() {
        let mut h = Log2Hist::ZERO;
        h.record(500); // slot 10 (le 1.024 µs): below the lowest basic bound, counted there
        h.record(20_000); // slot 15 (le 32.8 µs)
        h.record(40_000); // slot 16: counted at the next exported bound, slot 18 (262 µs)
        h.record(20_000_000_000); // slot 35 (le 34.4 s): above the highest basic bound
        h.record(1 << 40); // overflow
        let full = log2_to_histogram(&h, Detail::Full);
        let basic = log2_to_histogram(&h, Detail::Basic);
        let bounds: Vec<f64> = basic.get_bucket().iter().map(|b| b.upper_bound()).collect();
        assert_eq!(bounds.len(), 7);
        assert_eq!(bounds[0], 32.768e-6);
        assert_eq!(bounds[1], 262.144e-6);
        assert_eq!(bounds.last(), Some(&8.589934592));
        // The 34 s call is only in the count (+Inf), like the overflow.
        assert_eq!(
            basic.get_bucket().last().map(|b| b.cumulative_count()),
            Some(3)
        );
        let counts: Vec<u64> = basic
            .get_bucket()
            .iter()
            .map(|b| b.cumulative_count())
            .collect();
        assert_eq!(&counts[..3], [2, 3, 3]);
        // Every exported bound has the same cumulative count as in the full histogram.
        for b in basic.get_bucket() {
            let same = full
                .get_bucket()
                .iter()
                .find(|f| f.upper_bound() == b.upper_bound())
                .unwrap();
            assert_eq!(same.cumulative_count(), b.cumulative_count());
        }
        assert_eq!(basic.get_sample_count(), full.get_sample_count());
        assert_eq!(basic.get_sample_sum(), full.get_sample_sum());
    }

    #[test]
    fn empty_family_is_dropped() {
        let helps = [("x_total", "h"), ("x", "h")];
        assert!(MetricBuilder::counter("x_total", &helps).finish().is_none());
        let mut f = MetricBuilder::gauge("x", &helps);
        f.add_gauge(&[("a", "b")], 1.0);
        assert!(f.finish().is_some());
    }
}
