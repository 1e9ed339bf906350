//! `wbscope_scrape_errors_total{family}`: sources a collector could not read during a scrape
//! (a /proc or /sys file, the mount table, the process' own stats). Such a scrape still answers
//! with everything else, but it is never silently shorter: the failure is counted here, in the
//! same answer, and logged (rate-limited).

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use prometheus::proto::MetricFamily;

use super::proto::MetricBuilder;
use crate::web::rate_log::RateLog;

pub const METRIC: &str = "wbscope_scrape_errors_total";

/// The help text of [`METRIC`].
pub const HELP_TEXT: &str = "Sources a collector could not read during a scrape (that family's \
     series are missing or incomplete in that scrape), by family.";

const HELP: &[(&str, &str)] = &[(METRIC, HELP_TEXT)];

#[derive(Default)]
struct Inner {
    counts: Mutex<BTreeMap<&'static str, u64>>,
    log: RateLog,
}

/// Shared scrape-error counts, one per family.
#[derive(Clone, Default)]
pub struct ScrapeErrors(Arc<Inner>);

impl ScrapeErrors {
    /// Exports `family`'s counter (at 0) before any error.
    pub fn register(&self, family: &'static str) {
        if let Ok(mut counts) = self.0.counts.lock() {
            counts.entry(family).or_insert(0);
        }
    }

    /// Counts one source of `family` that could not be read, and logs why.
    pub fn count(&self, family: &'static str, source: &str, err: &dyn std::fmt::Display) {
        if let Ok(mut counts) = self.0.counts.lock() {
            *counts.entry(family).or_insert(0) += 1;
        }
        self.0.log.warn(|| {
            format!("scrape: {family}: cannot read {source}: {err}; its series are missing")
        });
    }

    /// The counter family, for appending to a gathered scrape.
    pub fn family(&self) -> Option<MetricFamily> {
        let counts = self.0.counts.lock().ok()?.clone();
        let mut family = MetricBuilder::counter(METRIC, HELP);
        for (name, count) in counts {
            family.add_counter(&[("family", name)], count as f64);
        }
        family.finish()
    }

    /// The count for `family` (tests).
    pub fn get(&self, family: &str) -> u64 {
        self.0
            .counts
            .lock()
            .ok()
            .and_then(|c| c.get(family).copied())
            .unwrap_or(0)
    }
}
