//! Block layer: tp_btf `block_rq_issue`, `block_rq_requeue`, `block_rq_complete` and
//! `block_bio_queue`, and the `wbscope_block_*` metrics.

pub mod bio_counts;
mod collector;
mod layout;

use aya::{Ebpf, EbpfLoader, Pod};
use probe_common::block::{
    DISK_IN_REQUEST, FLAGS, HAS_IO_START_TIME, HAS_START_TIME, HAS_STATS_FLAG, globals,
};
use prometheus::core::Collector;

use super::{CollectorContext, Family, KernelInfo, Part};
use crate::probes::ProbeSpec;

const PROBES: &[ProbeSpec] = &[
    ProbeSpec::btf_tracepoint("block_rq_issue", "block_rq_issue"),
    ProbeSpec::btf_tracepoint("block_rq_requeue", "block_rq_requeue"),
    ProbeSpec::btf_tracepoint("block_rq_complete", "block_rq_complete"),
    ProbeSpec::btf_tracepoint("block_bio_queue", "block_bio_queue"),
];

/// The block-layer family.
#[derive(Default)]
pub struct Block {
    resolved: Part<layout::Resolved>,
}

impl Family for Block {
    fn name(&self) -> &'static str {
        "block"
    }

    fn probes(&self) -> &'static [ProbeSpec] {
        PROBES
    }

    fn resolve(&mut self, kernel: &KernelInfo) {
        self.resolved = Some(kernel.btf().map(layout::resolve));
    }

    fn gap(&self, probe: &ProbeSpec) -> Option<String> {
        let resolved = match &self.resolved {
            Some(Ok(r)) => r,
            Some(Err(why)) => return Some(why.to_string()),
            None => return Some("layout not resolved".into()),
        };
        let part = if probe.program == "block_bio_queue" {
            &resolved.bio
        } else {
            &resolved.rq
        };
        part.as_ref().err().map(ToString::to_string)
    }

    fn set_globals<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        if let Some(Ok(r)) = &self.resolved {
            loader.override_global(globals::BLOCK_LAYOUT, &r.layout, true);
            if let Some(disk) = &r.bio_disk {
                loader.override_global(globals::BIO_DISK_LAYOUT, disk, true);
            }
        }
    }

    fn describe(&self) -> Vec<String> {
        let Some(Ok(r)) = &self.resolved else {
            return Vec::new();
        };
        let l = &r.layout;
        let on = |bit: u32| l.features & bit != 0;
        let latency = if on(HAS_IO_START_TIME) && on(HAS_STATS_FLAG) {
            "rq->io_start_time_ns where QUEUE_FLAG_STATS is set, in-flight map otherwise"
        } else {
            "in-flight map (the kernel's io_start_time_ns is not usable here)"
        };
        let flags: Vec<String> = FLAGS
            .iter()
            .zip(l.flag_masks)
            .map(|((label, _), mask)| match mask {
                0 => format!("{label}=absent"),
                m => format!("{label}={}", m.trailing_zeros()),
            })
            .collect();
        vec![
            format!(
                "block: request device from {}, issue→complete latency from {latency}, queue \
                 latency {}; request argument #{} of block_rq_issue",
                if on(DISK_IN_REQUEST) {
                    "rq->rq_disk"
                } else {
                    "rq->q->disk"
                },
                if on(HAS_START_TIME) {
                    "from rq->start_time_ns"
                } else {
                    "unavailable"
                },
                l.issue_arg,
            ),
            format!(
                "block: op mask {:#x}, flag bits (from BTF) {}; bio device from {}",
                l.op_mask,
                flags.join(" "),
                if r.bio_disk.is_some() {
                    "bio->bi_disk + bi_partno (no bi_bdev before 5.12)"
                } else {
                    "bio->bi_bdev"
                }
            ),
        ]
    }

    fn collectors(&self, ebpf: &mut Ebpf, ctx: &CollectorContext) -> Vec<Box<dyn Collector>> {
        let op_labels = match &self.resolved {
            Some(Ok(r)) => r.op_labels.clone(),
            _ => Default::default(),
        };
        let maps = collector::Maps {
            rq_stats: slotted(ebpf, ctx, collector::RQ_SLOTS, collector::RQ_STATS),
            bio_counts: ctx.bio_counts.get(ebpf, &ctx.map_errors),
        };
        vec![Box::new(collector::BlockCollector::new(
            maps,
            op_labels,
            ctx.map_errors.clone(),
        ))]
    }
}

/// Takes a per-CPU hash map out of the object, registering it for read-error counting.
fn slotted<K: Pod + PartialEq, V: Pod>(
    ebpf: &mut Ebpf,
    ctx: &CollectorContext,
    slots: &'static str,
    name: &'static str,
) -> crate::metrics::Slotted<K, V>
where
    probe_common::slots::Slot<V>: Pod,
{
    ctx.map_errors.register(name);
    crate::metrics::Slotted::take(ebpf, slots, name)
}
