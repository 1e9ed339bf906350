//! Flusher work records for the stall context: who queued each work item, when it ran and what
//! it wrote (`probe-ebpf/src/flusher_work.rs`, called from the writeback family's probes and
//! `sys_enter_sync`). No probe and no metric of its own: pids stay out of metric labels; the
//! records reach stall events only (`families::stall_events::context`).

use aya::{Ebpf, EbpfLoader};
use probe_common::flusher_work::{WorkQueuerLayout, globals};
use prometheus::core::Collector;

use super::{CollectorContext, Family, KernelInfo, LayoutError, Part, writeback::reason_names};
use crate::probes::ProbeSpec;

#[derive(Default)]
pub struct FlusherWork {
    layout: Part<WorkQueuerLayout>,
}

/// `WB_REASON_SYNC`'s raw value, from the kernel's own reason table.
fn layout(kernel: &KernelInfo) -> Result<WorkQueuerLayout, LayoutError> {
    let reason_sync = reason_names(kernel)
        .into_iter()
        .find(|(_, name)| name == "sync")
        .map(|(raw, _)| raw)
        .ok_or_else(|| {
            LayoutError::Unhandled("the kernel's wb_reason table has no `sync`".to_owned())
        })?;
    Ok(WorkQueuerLayout {
        reason_sync,
        resolved: 1,
    })
}

impl Family for FlusherWork {
    fn name(&self) -> &'static str {
        "flusher work records"
    }

    fn probes(&self) -> &'static [ProbeSpec] {
        &[]
    }

    fn resolve(&mut self, kernel: &KernelInfo) {
        self.layout = Some(layout(kernel));
    }

    fn gap(&self, _probe: &ProbeSpec) -> Option<String> {
        None
    }

    fn describe(&self) -> Vec<String> {
        match &self.layout {
            Some(Ok(l)) => vec![format!(
                "work items with their queuer, for stall context (WB_REASON_SYNC = {})",
                l.reason_sync
            )],
            Some(Err(why)) => vec![format!("no work records: {why}")],
            None => Vec::new(),
        }
    }

    fn set_globals<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        if let Some(Ok(l)) = &self.layout {
            loader.override_global(globals::WORK_QUEUER_LAYOUT, l, true);
        }
    }

    fn collectors(&self, _ebpf: &mut Ebpf, _ctx: &CollectorContext) -> Vec<Box<dyn Collector>> {
        Vec::new()
    }
}
