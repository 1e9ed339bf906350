//! The standard `process_*` metrics, with failures counted: the prometheus crate's collector
//! returns fewer families (none at all when /proc/self cannot be opened, e.g. out of file
//! descriptors) without saying so.

use prometheus::{
    core::{Collector, Desc},
    process_collector::ProcessCollector,
    proto::MetricFamily,
};

use super::ScrapeErrors;

/// The family name in `wbscope_scrape_errors_total`.
const FAMILY: &str = "process";

/// [`ProcessCollector`] for this process, counting a short answer as a scrape error.
pub struct Accounted {
    inner: ProcessCollector,
    errors: ScrapeErrors,
}

impl Accounted {
    pub fn for_self(errors: ScrapeErrors) -> Accounted {
        errors.register(FAMILY);
        Accounted {
            inner: ProcessCollector::for_self(),
            errors,
        }
    }
}

impl Collector for Accounted {
    fn desc(&self) -> Vec<&Desc> {
        self.inner.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let families = self.inner.collect();
        let expected = self.inner.desc().len();
        if families.len() < expected {
            self.errors.count(
                FAMILY,
                "/proc/self/stat",
                &format!("{} of {expected} process_* families", families.len()),
            );
        }
        families
    }
}
