//! Prometheus exposition: maps are read only when Prometheus scrapes, through a `Collector` that
//! turns in-kernel log2 histograms into real Prometheus histograms.

pub mod collector;
pub mod families;
pub mod source;

pub use collector::{CollectorContext, WbscopeCollector};
pub use source::{AyaMaps, MapReadError, MapSource};
