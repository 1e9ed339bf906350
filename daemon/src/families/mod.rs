//! Probe families: each owns its probes, the kernel layout they need, their load-time globals and
//! the collectors that turn their maps (or /proc files) into metrics. Adding a signal means adding
//! a family here, not editing the loader or the HTTP side.

use aya::{Ebpf, EbpfLoader};
use prometheus::core::Collector;

use crate::{metrics::MapErrors, probes::ProbeSpec};

pub mod block;
pub mod cgroups;
pub mod device_writes;
pub mod dirty_memory;
pub mod dirty_throttle;
pub mod filesystems;
pub mod flusher_work;
pub mod journal;
pub mod nfs;
pub mod stall_events;
pub mod submissions;
pub mod sync_calls;
pub mod top_processes;
pub mod writeback;
pub mod writeback_wait;

pub use crate::kernel::{KernelInfo, LayoutError};

/// Facts every collector may label with, fixed at start-up.
#[derive(Clone)]
pub struct CollectorContext {
    pub page_size: u64,
    /// Failed map reads by map name, exported as `wbscope_map_read_errors_total`.
    pub map_errors: MapErrors,
    /// Stall counters, shared with the stall service that counts them.
    pub stalls: crate::families::stall_events::StallShared,
    /// Sources a collector could not read, exported as `wbscope_scrape_errors_total`.
    pub scrape_errors: crate::metrics::ScrapeErrors,
    /// The device-writes reader, for the stall context (set by its family's collectors).
    pub device_writes: device_writes::ReaderSlot,
    /// The bio counters, which the block and device-writes families share.
    pub bio_counts: block::bio_counts::BioCountsSlot,
}

/// A layout part a family resolves: `None` before `resolve`, else the part or why it is missing.
pub type Part<T> = Option<Result<T, LayoutError>>;

/// Why a probe needing `part` cannot work, if it cannot (for [`Family::gap`]).
pub fn gap_of<T>(part: &Part<T>) -> Option<String> {
    match part {
        Some(Ok(_)) => None,
        Some(Err(why)) => Some(why.to_string()),
        None => Some("layout not resolved".into()),
    }
}

/// One family of probes and metrics.
pub trait Family: Send {
    /// Short name for logs and `wbscope check`.
    fn name(&self) -> &'static str;

    /// The family's probes, in attach order. Userspace-only families return none.
    fn probes(&self) -> &'static [ProbeSpec];

    /// Takes the family's settings from the configuration. Called once, before `resolve`.
    fn configure(&mut self, _config: &crate::Config) {}

    /// Resolves what the family needs from the running kernel. Called once, before loading.
    fn resolve(&mut self, kernel: &KernelInfo);

    /// Why `probe` cannot work with the resolved layout, if it cannot.
    fn gap(&self, probe: &ProbeSpec) -> Option<String>;

    /// Why `probe` is not needed on this kernel, if another probe of the family does its work
    /// here (one of two alternatives for different kernels). Checked before `gap`.
    fn replaced(&self, _probe: &ProbeSpec) -> Option<String> {
        None
    }

    /// Why `probe`'s fentry program cannot work with the resolved layout, if it cannot.
    fn fentry_gap(&self, _probe: &ProbeSpec) -> Option<String> {
        None
    }

    /// Sets the family's load-time globals (resolved parts only).
    fn set_globals<'a>(&'a self, loader: &mut EbpfLoader<'a>);

    /// Fills maps that the probes read from their first event on. Called once, after loading
    /// and before any probe is attached; returns what could not be done, for the log.
    fn prepare_maps(&self, _ebpf: &mut Ebpf) -> Vec<String> {
        Vec::new()
    }

    /// Extra lines for `wbscope check` (what was resolved, what degrades).
    fn describe(&self) -> Vec<String> {
        Vec::new()
    }

    /// Collectors for the family's metrics; they take the family's maps out of `ebpf`.
    fn collectors(&self, ebpf: &mut Ebpf, ctx: &CollectorContext) -> Vec<Box<dyn Collector>>;
}

/// Every family this build knows, in report order.
pub fn all() -> Vec<Box<dyn Family>> {
    vec![
        Box::new(writeback::WritebackWork::default()),
        Box::new(sync_calls::SyncCalls::default()),
        Box::new(journal::Journal::default()),
        Box::new(filesystems::Filesystems),
        Box::new(submissions::Submissions::default()),
        Box::new(block::Block::default()),
        Box::new(device_writes::DeviceWrites::default()),
        Box::new(flusher_work::FlusherWork::default()),
        Box::new(nfs::Nfs::default()),
        Box::new(dirty_memory::DirtyMemory::default()),
        Box::new(dirty_throttle::DirtyThrottle::default()),
        Box::new(writeback_wait::WritebackWait::default()),
        Box::new(stall_events::StallEvents::default()),
        Box::new(cgroups::Cgroups::default()),
    ]
}
