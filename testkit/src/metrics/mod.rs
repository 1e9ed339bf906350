//! Reading the daemon's Prometheus endpoint: fetching, parsing and waiting for values.

mod http;
mod parse;
#[cfg(test)]
mod parse_tests;
mod wait;

pub use http::{SCRAPE_TIMEOUT, http_get, scrape};
pub use parse::{Family, Sample, Scrape};
pub use wait::wait_until;
