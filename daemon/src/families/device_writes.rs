//! Device write I/O by writeback source: who the device is busy for. Every write bio is counted
//! at `block_bio_queue` (a probe of the block family, which calls `probe-ebpf/src/
//! device_writes.rs`) by the flusher work or the task call that submitted it, in the block
//! family's bio counters, whose key carries the attribution (`block::bio_counts`). Exports
//! `wbscope_device_write_bytes_total` and `wbscope_device_write_bios_total`; the stall context
//! samples the same counters (`families::stall_events::context`).

use std::collections::BTreeMap;

use aya::{Ebpf, EbpfLoader};
use probe_common::{
    block::{BioCounts, BioKey, NOT_ATTRIBUTED},
    device_writes::{
        DevWriteKey, DevWriteLayout, DevWriteStats, NO_OP, NO_WORK, WriteSource, globals,
    },
};
use prometheus::{
    core::{Collector, Desc},
    proto::MetricFamily,
};

use super::{
    CollectorContext, Family, KernelInfo, LayoutError, Part,
    block::bio_counts::{self, BioCountMaps, Freshness},
    writeback::{reason_names, sync_mode_label},
};
use crate::{
    kernel::{
        devices,
        layout::{member_offset, request_op_enum},
    },
    metrics::{
        MapErrors, describe,
        detail::{self, Detail},
        proto::MetricBuilder,
    },
    probes::ProbeSpec,
};

/// The device-writes family: no probe of its own (see the module comment).
#[derive(Default)]
pub struct DeviceWrites {
    layout: Part<DevWriteLayout>,
    reasons: BTreeMap<u32, String>,
    /// `[probes] disable` names the family: block_bio_queue then returns from the family's
    /// part at its first check (the layout global stays unresolved), which is also how the
    /// benchmark measures what the family adds per bio.
    disabled: bool,
}

fn layout(kernel: &KernelInfo) -> Result<DevWriteLayout, LayoutError> {
    let btf = kernel.btf()?;
    let iter = btf.member_offset("bio", "bi_iter")?;
    Ok(DevWriteLayout {
        bio_bi_size: iter + member_offset(btf, "bvec_iter", "bi_size", 4)?,
        task_flags: member_offset(btf, "task_struct", "flags", 4)?,
        op_discard: request_op(btf, "REQ_OP_DISCARD")?,
        // Secure erase is not on every kernel.
        op_secure_erase: request_op(btf, "REQ_OP_SECURE_ERASE").unwrap_or(NO_OP),
        task_comm: member_offset(btf, "task_struct", "comm", 16)?,
        bio_bi_flags: member_offset(btf, "bio", "bi_flags", 2)?,
        // An anonymous enum in include/linux/blk_types.h (since 5.19; BIO_THROTTLED before,
        // which also marked bios that were never held back).
        bps_throttled_bit: btf
            .enumerator_value("BIO_BPS_THROTTLED")
            .ok()
            .and_then(|v| u32::try_from(v).ok())
            .filter(|bit| *bit < 16)
            .unwrap_or(NO_OP),
        resolved: 1,
        task_bpf_storage: member_offset(btf, "task_struct", "bpf_storage", 8).unwrap_or(0),
        _reserved: 0,
    })
}

/// The value of `enum req_op` (`req_opf` on older kernels) enumerator `variant`.
fn request_op(btf: &crate::kernel::btf::Btf, variant: &str) -> Result<u32, LayoutError> {
    let name = request_op_enum(btf);
    let value = btf.enum_value(name, variant)?;
    u32::try_from(value).map_err(|_| LayoutError::OutOfRange {
        what: format!("{name}::{variant}"),
        value,
    })
}

impl Family for DeviceWrites {
    fn name(&self) -> &'static str {
        "device writes by source"
    }

    fn probes(&self) -> &'static [ProbeSpec] {
        &[]
    }

    fn configure(&mut self, config: &crate::Config) {
        self.disabled = config.disabled_probes.iter().any(|d| d == self.name());
    }

    fn resolve(&mut self, kernel: &KernelInfo) {
        self.layout = Some(layout(kernel));
        self.reasons = reason_names(kernel);
    }

    fn gap(&self, _probe: &ProbeSpec) -> Option<String> {
        None
    }

    fn describe(&self) -> Vec<String> {
        if self.disabled {
            return vec![format!(
                "not counted: disabled by `[probes] disable = [\"{}\"]`",
                self.name()
            )];
        }
        match &self.layout {
            Some(Ok(_)) => vec!["counted at block_bio_queue (block family)".into()],
            Some(Err(why)) => vec![format!("not counted: {why}")],
            None => Vec::new(),
        }
    }

    fn set_globals<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        if self.disabled {
            return;
        }
        if let Some(Ok(l)) = &self.layout {
            loader.override_global(globals::DEV_WRITE_LAYOUT, l, true);
        }
    }

    fn collectors(&self, ebpf: &mut Ebpf, ctx: &CollectorContext) -> Vec<Box<dyn Collector>> {
        let reader = DeviceWriteReader {
            maps: ctx.bio_counts.get(ebpf, &ctx.map_errors),
            errors: ctx.map_errors.clone(),
            reasons: self.reasons.clone(),
        };
        let reader = std::sync::Arc::new(reader);
        let _ = ctx.device_writes.set(reader.clone());
        vec![Box::new(DeviceWriteCollector {
            reader,
            descs: describe(FAMILIES),
        })]
    }
}

const FAMILIES: &[(&str, &str); 2] = &[
    (
        "wbscope_device_write_bytes_total",
        "Bytes of bios queued on the device that it counts as written in /sys/block/*/stat \
         (write, write-zeroes, zone-append; not discards), by whom they were submitted \
         for: source flusher (with the work item's sync_mode and reason), a task's own sync call \
         (fsync, fdatasync, sync_file_range, syncfs, sync, msync), io_uring (io-wq workers), \
         direct (a user task outside sync calls: O_DIRECT, O_SYNC), journal (jbd2), kworker \
         (other workqueue workers), throttled (bios a blk-throttle rule held back, dispatched by \
         its worker: the submitter is not known) or other. sync_mode and reason are empty unless source is flusher.",
    ),
    (
        "wbscope_device_write_bios_total",
        "Write bios counted in wbscope_device_write_bytes_total.",
    ),
];

/// Where the collector leaves its reader for the stall context.
pub type ReaderSlot = std::sync::Arc<std::sync::OnceLock<std::sync::Arc<DeviceWriteReader>>>;

/// A total order of raw keys (the key type is plain shared data without `Ord`).
pub fn raw_order(key: &DevWriteKey) -> (u32, u8, u8, u8) {
    (key.dev, key.source, key.sync_mode, key.reason)
}

/// Labels of one series: device, source, sync mode, reason.
pub type SourceLabels = (String, &'static str, String, String);

/// Reads and labels the device writes out of the bio counters; shared by the collector and the
/// stall context.
pub struct DeviceWriteReader {
    maps: BioCountMaps,
    errors: MapErrors,
    reasons: BTreeMap<u32, String>,
}

impl DeviceWriteReader {
    /// Totals since load by labels (distinct raw keys with the same labels merged).
    pub fn read(&self) -> Option<BTreeMap<SourceLabels, DevWriteStats>> {
        let entries = self.read_totals(Freshness::Scrape)?;
        let mut series = BTreeMap::new();
        for (key, stats) in entries {
            series
                .entry(self.labels(&key))
                .or_insert(DevWriteStats::ZERO)
                .merge(&stats);
        }
        Some(series)
    }

    /// Bytes since load by raw key, sorted by key, with no labels made: the stall-context
    /// sampler reads this ten times a second and labels only the few keys a context needs.
    pub fn read_bytes(&self) -> Option<Vec<(DevWriteKey, u64)>> {
        // `read_totals` is already in raw order.
        let entries = self
            .read_totals(Freshness::Now)?
            .into_iter()
            .map(|(key, stats)| (key, stats.bytes))
            .collect();
        Some(entries)
    }

    /// Every raw key's totals, CPUs, slots and hash added up, in [`raw_order`].
    fn read_totals(&self, freshness: Freshness) -> Option<Vec<(DevWriteKey, DevWriteStats)>> {
        Some(attributed(bio_counts::read(
            &self.maps,
            &self.errors,
            freshness,
        )?))
    }

    /// The labels of one raw key (the device's name is read from sysfs).
    pub fn labels(&self, key: &DevWriteKey) -> SourceLabels {
        let source = WriteSource::from_raw(key.source).unwrap_or(WriteSource::Other);
        let (sync_mode, reason) = if source == WriteSource::Flusher {
            let reason = self
                .reasons
                .get(&u32::from(key.reason))
                .cloned()
                .unwrap_or_else(|| key.reason.to_string());
            (sync_mode_label(u32::from(key.sync_mode)), reason)
        } else {
            (String::new(), String::new())
        };
        debug_assert!(source != WriteSource::Flusher || key.sync_mode != NO_WORK);
        (
            devices::label_for_kernel_dev(key.dev),
            source.label(),
            sync_mode,
            reason,
        )
    }
}

/// The attributed bio counts by source key, in [`raw_order`], the ops (write, write-zeroes…) of
/// one source added up; bios the family did not attribute (reads, discards, or every bio while
/// it is off) left out.
fn attributed(counts: Vec<(BioKey, BioCounts)>) -> Vec<(DevWriteKey, DevWriteStats)> {
    let mut by_source: BTreeMap<(u32, u8, u8, u8), (DevWriteKey, DevWriteStats)> = BTreeMap::new();
    for (key, c) in counts {
        if key.source == NOT_ATTRIBUTED {
            continue;
        }
        let source_key = DevWriteKey {
            dev: key.dev,
            source: key.source,
            sync_mode: key.sync_mode,
            reason: key.reason,
            _reserved: 0,
        };
        by_source
            .entry(raw_order(&source_key))
            .or_insert((source_key, DevWriteStats::ZERO))
            .1
            .merge(&DevWriteStats {
                bytes: c.bytes,
                bios: c.bios,
            });
    }
    by_source.into_values().collect()
}

struct DeviceWriteCollector {
    reader: std::sync::Arc<DeviceWriteReader>,
    descs: Vec<Desc>,
}

impl Collector for DeviceWriteCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Some(series) = self.reader.read() else {
            return Vec::new();
        };
        let [bytes, bios] = FAMILIES.map(|(name, _)| name);
        let mut bytes = MetricBuilder::counter(bytes, FAMILIES);
        let mut bios = MetricBuilder::counter(bios, FAMILIES);
        for ((device, source, sync_mode, reason), stats) in &series {
            let labels = [
                ("device", device.as_str()),
                ("source", *source),
                ("sync_mode", sync_mode.as_str()),
                ("reason", reason.as_str()),
            ];
            bytes.add_counter(&labels, stats.bytes as f64);
            // Bios double the family's series for what is, per source, mostly the bytes'
            // shape: only the full detail level keeps them (`[metrics] detail`).
            if detail::get() == Detail::Full {
                bios.add_counter(&labels, stats.bios as f64);
            }
        }
        [bytes, bios]
            .into_iter()
            .filter_map(MetricBuilder::finish)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bio_key(dev: u32, op: u8, source: u8, sync_mode: u8, reason: u8) -> BioKey {
        BioKey {
            dev,
            op,
            source,
            sync_mode,
            reason,
        }
    }

    fn counts(bios: u64, bytes: u64) -> BioCounts {
        BioCounts {
            bios,
            bytes,
            ..BioCounts::ZERO
        }
    }

    /// The ops of one source add up, keys differing in sync mode or reason stay apart, and
    /// bios without an attribution (reads, discards) are left out.
    #[test]
    fn attributed_bios_are_summed_by_source_across_ops() {
        let fsync = WriteSource::Fsync as u8;
        let flusher = WriteSource::Flusher as u8;
        let out = attributed(vec![
            (bio_key(7, 1, fsync, NO_WORK, NO_WORK), counts(3, 12288)),
            (bio_key(7, 9, fsync, NO_WORK, NO_WORK), counts(1, 4096)),
            (bio_key(7, 1, flusher, 0, 4), counts(2, 8192)),
            (bio_key(7, 1, flusher, 1, 4), counts(5, 20480)),
            (bio_key(7, 0, NOT_ATTRIBUTED, 0, 0), counts(9, 0)),
        ]);
        type Row = ((u8, u8, u8), (u64, u64));
        let got: Vec<Row> = out
            .iter()
            .map(|(k, s)| ((k.source, k.sync_mode, k.reason), (s.bios, s.bytes)))
            .collect();
        assert_eq!(
            got,
            vec![
                ((flusher, 0, 4), (2, 8192)),
                ((flusher, 1, 4), (5, 20480)),
                ((fsync, NO_WORK, NO_WORK), (4, 16384)),
            ]
        );
    }

    /// On a machine with BTF, the layout resolves to offsets inside `struct bio`.
    #[test]
    fn resolves_on_the_running_kernel() {
        let Ok(kernel) = KernelInfo::discover() else {
            eprintln!("skipped: no tracefs (not root?)");
            return;
        };
        if kernel.btf.is_ok() {
            let l = layout(&kernel).expect("layout");
            // bi_iter follows bi_next, bi_bdev, bi_opf and a few flags: well inside the first
            // cache lines of the struct.
            assert!(l.bio_bi_size >= 16 && l.bio_bi_size < 128, "{l:?}");
            assert!(l.task_flags > 0, "{l:?}");
        }
    }
}
