//! Per-cgroup metrics (opt-in, `[cgroups]`): count and time of sync calls, dirty-throttling
//! pauses and writeback waits by cgroup v2 path, with at most `max_named` cgroups by name.
//!
//! No probes of its own: the sync-call, dirty-throttle and writeback-wait probes add to its map
//! (`probe-ebpf/src/cgroups.rs`) while its global is set. It needs a pure cgroup v2 host with
//! the memory and io controllers: on a v1 or hybrid host every task's v2 cgroup is the root, so
//! the family reports itself skipped with that reason instead of exporting one useless series.

pub mod collect;
pub mod config;
pub mod naming;
pub mod paths;

use aya::{Ebpf, EbpfLoader, maps::PerCpuHashMap};
use probe_common::cgroups::names::{CGROUP_TOTALS, CGROUPS_ENABLED};
use prometheus::core::Collector;

use super::{CollectorContext, Family, KernelInfo};
use crate::{Config, probes::ProbeSpec};
pub use config::{CgroupsConfig, RawCgroups};

/// The per-cgroup family.
#[derive(Default)]
pub struct Cgroups {
    config: CgroupsConfig,
    /// The cgroup2 mount, or why this host cannot attribute by cgroup; `None` before `resolve`.
    hierarchy: Option<Result<paths::Cgroup2Mount, paths::HierarchyError>>,
    /// The value of the probes' `CGROUPS_ENABLED` (1: record), set by `resolve`.
    enabled_global: u32,
}

impl Cgroups {
    /// Whether the probes record per-cgroup totals: enabled and possible here.
    fn recording(&self) -> bool {
        self.config.enabled && matches!(self.hierarchy, Some(Ok(_)))
    }
}

impl Family for Cgroups {
    fn name(&self) -> &'static str {
        "cgroups"
    }

    fn probes(&self) -> &'static [ProbeSpec] {
        &[]
    }

    fn configure(&mut self, config: &Config) {
        self.config = config.cgroups.clone();
        // `[probes] disable = ["cgroups"]` turns the recording off too, not only the export.
        if config.disabled_probes.iter().any(|d| d == self.name()) {
            self.config.enabled = false;
        }
    }

    fn resolve(&mut self, _kernel: &KernelInfo) {
        let hierarchy = paths::usable_hierarchy();
        if self.config.enabled
            && let Err(why) = &hierarchy
        {
            tracing::warn!("cgroups: skipped: per-cgroup metrics need cgroup v2: {why}");
        }
        self.hierarchy = Some(hierarchy);
        self.enabled_global = self.recording().into();
    }

    fn gap(&self, _probe: &ProbeSpec) -> Option<String> {
        None
    }

    fn set_globals<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        loader.override_global(CGROUPS_ENABLED, &self.enabled_global, true);
        if self.enabled_global == 0 {
            // Never written while off: one entry instead of the full map.
            loader.map_max_entries(CGROUP_TOTALS, 1);
        }
    }

    fn describe(&self) -> Vec<String> {
        let state = if self.config.enabled { "on" } else { "off" };
        match &self.hierarchy {
            Some(Ok(mount)) => vec![format!(
                "cgroups: per-cgroup metrics {state} ([cgroups] enabled); cgroup v2 at {} with \
                 memory and io",
                mount.mountpoint.display()
            )],
            Some(Err(why)) if self.config.enabled => vec![format!(
                "cgroups: skipped: per-cgroup metrics need cgroup v2: {why}"
            )],
            Some(Err(why)) => vec![format!(
                "cgroups: per-cgroup metrics need cgroup v2 (off): {why}"
            )],
            None => Vec::new(),
        }
    }

    fn collectors(&self, ebpf: &mut Ebpf, ctx: &CollectorContext) -> Vec<Box<dyn Collector>> {
        let map = self.recording().then(|| {
            ebpf.take_map(CGROUP_TOTALS)
                .and_then(|m| PerCpuHashMap::try_from(m).ok())
        });
        let mount = match &self.hierarchy {
            Some(Ok(mount)) => Some(mount.clone()),
            _ => None,
        };
        vec![Box::new(collect::CgroupCollector::new(
            map,
            self.config.clone(),
            paths::CgroupPaths::new(mount),
            ctx.map_errors.clone(),
        ))]
    }
}
