//! The stall-events family: no probes of its own (the other families' probes report stalls),
//! the BTF facts the stall code needs, and the stall metrics.
//!
//! Stall investigation: the probes report operations over a threshold to a ring buffer; the
//! daemon keeps them in a flight recorder (`GET /stalls`), counts them
//! (`wbscope_stalls_total`) and streams them to `wbscope trace` over a Unix socket.

pub mod busy_slots;
pub mod config;
pub mod context;
pub mod duration;
pub mod event;
pub mod format;
pub mod http;
pub mod log_record;
pub mod metrics;
pub mod recorder;
pub mod service;
pub mod source;
pub mod stream;
pub mod summary;
pub mod trace;

pub use config::StallsConfig;
pub use metrics::StallShared;
pub use service::StallService;
pub use source::StallError;

use aya::{Ebpf, EbpfLoader};
use probe_common::stall_events::{StallLayout, globals};
use prometheus::core::Collector;

use super::{CollectorContext, Family, KernelInfo, Part};
use crate::{
    families::stall_events::{metrics::DropsCollector, source::take_drops},
    kernel::{
        LayoutError,
        btf::Btf,
        layout::{member_offset, request_op_enum},
    },
    probes::ProbeSpec,
};

/// The stall-events family.
#[derive(Default)]
pub struct StallEvents {
    layout: Part<StallLayout>,
}

fn resolve_layout(btf: &Btf) -> Result<StallLayout, LayoutError> {
    let op_flush = btf.enum_value(request_op_enum(btf), "REQ_OP_FLUSH")?;
    Ok(StallLayout {
        op_flush: u32::try_from(op_flush).map_err(|_| LayoutError::OutOfRange {
            what: "REQ_OP_FLUSH".to_owned(),
            value: op_flush,
        })?,
        task_comm: member_offset(btf, "task_struct", "comm", 16)?,
        task_tgid: member_offset(btf, "task_struct", "tgid", 4)?,
        resolved: 1,
    })
}

impl Family for StallEvents {
    fn name(&self) -> &'static str {
        "stall events"
    }

    fn probes(&self) -> &'static [ProbeSpec] {
        &[]
    }

    fn resolve(&mut self, kernel: &KernelInfo) {
        self.layout = Some(kernel.btf().and_then(resolve_layout));
    }

    fn gap(&self, _probe: &ProbeSpec) -> Option<String> {
        None
    }

    fn set_globals<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        if let Some(Ok(layout)) = &self.layout {
            loader.override_global(globals::STALL_LAYOUT, layout, true);
        }
    }

    fn prepare_maps(&self, ebpf: &mut Ebpf) -> Vec<String> {
        match busy_slots::assign(ebpf) {
            Ok((placed, devices)) if placed < devices => vec![format!(
                "busy-clock slots for {placed} of {devices} block devices; the others' clocks \
                 are in the {} hash",
                probe_common::stall_events::maps::DEV_BUSY
            )],
            Ok(_) => Vec::new(),
            Err(err) => vec![format!(
                "busy-clock slots not written, every device's clocks are in the hash: {}",
                crate::error_chain::error_chain(&err)
            )],
        }
    }

    fn describe(&self) -> Vec<String> {
        match &self.layout {
            Some(Ok(_)) => vec![
                "stall events: inode numbers, flush time and writeback waiters' names resolved"
                    .into(),
                "stall events: the device's dirty/writeback state at completion is not recorded"
                    .into(),
            ],
            Some(Err(why)) => vec![format!(
                "stall events without inode numbers, flush time and waiters' names: {why}"
            )],
            None => Vec::new(),
        }
    }

    fn collectors(&self, ebpf: &mut Ebpf, ctx: &CollectorContext) -> Vec<Box<dyn Collector>> {
        vec![
            Box::new(ctx.stalls.stalls_total.clone()),
            Box::new(DropsCollector::new(
                take_drops(ebpf),
                ctx.stalls.clone(),
                ctx.map_errors.clone(),
            )),
        ]
    }
}
