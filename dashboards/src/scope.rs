//! Label selectors and PromQL building blocks shared by every panel, so that a panel is written
//! once and drawn on both dashboards: fleet-wide (regex matchers over multi-value variables) and
//! for one device (exact matchers).

use crate::model::Selection;

/// The window every `rate()` in a panel uses; Grafana sizes it to the scrape interval and the
/// panel's resolution so that it always spans at least four scrapes.
pub const RATE: &str = "$__rate_interval";

/// Which hosts and devices a dashboard's queries select.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope {
    pub selection: Selection,
}

impl Scope {
    /// The scope of a dashboard with `selection` variables.
    pub fn new(selection: Selection) -> Self {
        Self { selection }
    }

    fn op(self) -> &'static str {
        match self.selection {
            Selection::Multi => "=~",
            Selection::Single => "=",
        }
    }

    /// Matchers for series with only target labels (host-wide gauges, self metrics). `job`
    /// and `cluster` are multi-value on both dashboards (their "All" is `.*`, which also
    /// matches targets without a `cluster` label).
    pub fn host(self) -> String {
        format!(
            "job=~\"$job\",cluster=~\"$cluster\",instance{}\"$instance\"",
            self.op()
        )
    }

    /// Matchers for per-device series.
    pub fn device(self) -> String {
        format!("{},device{}\"$device\"", self.host(), self.op())
    }

    /// The labels every aggregation keeps besides the panel's own: the host, when several hosts
    /// can be on screen. Returns a list to prepend to `by (...)`.
    pub fn keep(self, labels: &str) -> String {
        match self.selection {
            Selection::Multi => format!("instance, {labels}"),
            Selection::Single => labels.to_owned(),
        }
    }

    /// A legend template, prefixed with the host when several can be on screen.
    pub fn legend(self, template: &str) -> String {
        match self.selection {
            Selection::Multi => format!("{{{{instance}}}} {template}"),
            Selection::Single => template.to_owned(),
        }
    }

    /// `sum by (<keep>) (rate(metric{device matchers}[$__rate_interval]))`.
    pub fn rate_by(self, metric: &str, labels: &str) -> String {
        format!(
            "sum by ({}) (rate({metric}{{{}}}[{RATE}]))",
            self.keep(labels),
            self.device()
        )
    }

    /// `histogram_quantile(q, ...)` over a histogram's buckets, per device and `labels`.
    pub fn quantile(self, q: f64, histogram: &str, labels: &str) -> String {
        format!(
            "histogram_quantile({q}, sum by ({}, le) (rate({histogram}_bucket{{{}}}[{RATE}])))",
            self.keep(labels),
            self.device()
        )
    }

    /// The mean of a summed time per event, per device and `labels`: the rate of `time` over
    /// the rate of `count` (both counters with the same `labels`).
    pub fn mean(self, time: &str, count: &str, labels: &str) -> String {
        format!(
            "{} / {}",
            self.rate_by(time, labels),
            self.rate_by(count, labels)
        )
    }

    /// The bucket rates of a histogram summed over everything but `le`, for a heatmap.
    pub fn heatmap(self, histogram: &str) -> String {
        format!(
            "sum by (le) (rate({histogram}_bucket{{{}}}[{RATE}]))",
            self.device()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fleet_scope_uses_regexes_and_keeps_the_host() {
        let s = Scope::new(Selection::Multi);
        assert_eq!(
            s.rate_by("wbscope_block_requests_total", "device, op"),
            "sum by (instance, device, op) (rate(wbscope_block_requests_total\
             {job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",device=~\"$device\"}\
             [$__rate_interval]))"
        );
        assert_eq!(s.legend("{{op}}"), "{{instance}} {{op}}");
    }

    #[test]
    fn single_scope_uses_exact_matchers() {
        let s = Scope::new(Selection::Single);
        assert_eq!(
            s.quantile(0.99, "wbscope_sync_call_duration_seconds", "syscall"),
            "histogram_quantile(0.99, sum by (syscall, le) (rate(\
             wbscope_sync_call_duration_seconds_bucket{job=~\"$job\",cluster=~\"$cluster\",\
             instance=\"$instance\",device=\"$device\"}[$__rate_interval])))"
        );
        assert_eq!(
            s.host(),
            "job=~\"$job\",cluster=~\"$cluster\",instance=\"$instance\""
        );
    }
}
