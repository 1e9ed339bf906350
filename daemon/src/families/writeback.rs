//! Flusher writeback work: `writeback_queue/exec/start/written/pages_written` tracepoints, and
//! `wbscope_writeback_{work_total,work_duration_seconds,work_time_seconds_total,
//! written_bytes_total,queued_total}`.

use crate::{families::Part, kernel::LayoutError};
use std::collections::BTreeMap;

use aya::{
    Ebpf, EbpfLoader,
    maps::{MapData, PerCpuHashMap},
};
use probe_common::{
    hist::Log2Hist,
    writeback::{WB_SYNC_ALL, WbKey, WbStats, WbWorkFormat, globals},
};
use prometheus::{
    core::{Collector, Desc},
    proto::MetricFamily,
};

use super::{CollectorContext, Family, KernelInfo, gap_of};
use crate::{
    kernel::{btf::Btf, devices, layout::field_offset},
    metrics::detail::Detail,
    metrics::{self, MapErrors, describe, proto::MetricBuilder, read_per_cpu_hash},
    probes::ProbeSpec,
};

/// The events of `writeback_work_class` whose records the probes read.
const WORK_EVENTS: [&str; 4] = [
    "writeback_queue",
    "writeback_exec",
    "writeback_start",
    "writeback_written",
];

const PROBES: &[ProbeSpec] = &[
    ProbeSpec::tracepoint("writeback_queue", "writeback", "writeback_queue"),
    ProbeSpec::tracepoint("writeback_exec", "writeback", "writeback_exec"),
    ProbeSpec::tracepoint("writeback_start", "writeback", "writeback_start"),
    ProbeSpec::tracepoint("writeback_written", "writeback", "writeback_written"),
    ProbeSpec::tracepoint(
        "writeback_pages_written",
        "writeback",
        "writeback_pages_written",
    ),
];

// The object names its maps after these (checked by `probes::object_names`).
use probe_common::writeback::maps::WB_WORK_STATS;

/// The flusher-work family.
#[derive(Default)]
pub struct WritebackWork {
    format: Part<WbWorkFormat>,
    reasons: BTreeMap<u32, String>,
}

impl Family for WritebackWork {
    fn name(&self) -> &'static str {
        "writeback work"
    }

    fn probes(&self) -> &'static [ProbeSpec] {
        PROBES
    }

    fn resolve(&mut self, kernel: &KernelInfo) {
        self.format = Some(work_format(kernel));
        self.reasons = reason_names(kernel);
    }

    fn gap(&self, probe: &ProbeSpec) -> Option<String> {
        // writeback_pages_written reads no record fields.
        if probe.program == "writeback_pages_written" {
            return None;
        }
        gap_of(&self.format)
    }

    fn set_globals<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        if let Some(Ok(format)) = &self.format {
            loader.override_global(globals::WB_WORK_FMT, format, true);
        }
    }

    fn describe(&self) -> Vec<String> {
        let names: Vec<&str> = self.reasons.values().map(String::as_str).collect();
        vec![format!(
            "wb_reason names (from the kernel): {}",
            names.join(", ")
        )]
    }

    fn collectors(&self, ebpf: &mut Ebpf, ctx: &CollectorContext) -> Vec<Box<dyn Collector>> {
        ctx.map_errors.register(WB_WORK_STATS);
        let map = ebpf
            .take_map(WB_WORK_STATS)
            .and_then(|m| PerCpuHashMap::try_from(m).ok());
        vec![Box::new(WorkCollector {
            map,
            reasons: self.reasons.clone(),
            page_size: ctx.page_size,
            errors: ctx.map_errors.clone(),
            descs: describe(FAMILIES),
        })]
    }
}

fn work_format(kernel: &KernelInfo) -> Result<WbWorkFormat, LayoutError> {
    let mut resolved: Option<WbWorkFormat> = None;
    for event in WORK_EVENTS {
        let format = kernel.event_format("writeback", event)?;
        let int = |n: u32| n == 4;
        let this = WbWorkFormat {
            name: field_offset(&format, "name", |n| n >= 16)?,
            nr_pages: field_offset(&format, "nr_pages", |n| n == 8)?,
            sb_dev: field_offset(&format, "sb_dev", int)?,
            sync_mode: field_offset(&format, "sync_mode", int)?,
            for_kupdate: field_offset(&format, "for_kupdate", int)?,
            range_cyclic: field_offset(&format, "range_cyclic", int)?,
            for_background: field_offset(&format, "for_background", int)?,
            reason: field_offset(&format, "reason", int)?,
        };
        // The probes share one set of offsets for the whole event class.
        match resolved {
            None => resolved = Some(this),
            Some(first) if first != this => {
                return Err(LayoutError::LayoutsDiffer {
                    event: format!("writeback/{event}"),
                    reference: format!("writeback/{}", WORK_EVENTS[0]),
                });
            }
            Some(_) => {}
        }
    }
    resolved.ok_or_else(|| LayoutError::Unhandled("no writeback work events".to_owned()))
}

/// `wb_reason` names from the tracepoint's own `__print_symbolic` table, or else from BTF
/// `enum wb_reason`. Never from a built-in table: the numbering changed in 5.8.
pub(crate) fn reason_names(kernel: &KernelInfo) -> BTreeMap<u32, String> {
    if let Ok(format) = kernel.tracefs.event_format("writeback", "writeback_start")
        && let Some(table) = format.symbolic_table("reason")
        && !table.is_empty()
    {
        return table
            .into_iter()
            .filter_map(|(v, name)| Some((u32::try_from(v).ok()?, name)))
            .collect();
    }
    kernel
        .btf
        .as_ref()
        .ok()
        .and_then(|btf: &Btf| btf.enum_variants("wb_reason").ok())
        .map(|variants| reason_names_from_enum(&variants))
        .unwrap_or_default()
}

/// Turns `enum wb_reason` enumerators into label values, skipping the `WB_REASON_MAX` sentinel.
pub fn reason_names_from_enum(variants: &[(String, i64)]) -> BTreeMap<u32, String> {
    variants
        .iter()
        .filter(|(name, _)| name != "WB_REASON_MAX")
        .filter_map(|(name, value)| {
            let label = name.strip_prefix("WB_REASON_")?.to_ascii_lowercase();
            Some((u32::try_from(*value).ok()?, label))
        })
        .collect()
}

/// Names and help texts (documented in docs/metrics.md, generated from them).
const FAMILIES: &[(&str, &str); 5] = &[
    (
        "wbscope_writeback_work_total",
        "Flusher writeback work items executed.",
    ),
    (
        "wbscope_writeback_work_duration_seconds",
        "Time from a flusher work item's first writeback_start to its last writeback_written.",
    ),
    (
        "wbscope_writeback_work_time_seconds_total",
        "Flusher work item durations summed, by sync mode and reason (the duration histogram's \
         sum at every detail level): divided by the rate of wbscope_writeback_work_total, the \
         mean duration of each kind of work.",
    ),
    (
        "wbscope_writeback_written_bytes_total",
        "Bytes written back by flusher work (per-iteration page deltas times the page size).",
    ),
    (
        "wbscope_writeback_queued_total",
        "Work items queued for the flusher.",
    ),
];

struct WorkCollector {
    map: Option<PerCpuHashMap<MapData, WbKey, WbStats>>,
    reasons: BTreeMap<u32, String>,
    page_size: u64,
    errors: MapErrors,
    descs: Vec<Desc>,
}

impl Collector for WorkCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Some(entries) = read_per_cpu_hash(
            WB_WORK_STATS,
            self.map.as_ref(),
            &self.errors,
            |acc: &mut WbStats, v| acc.merge(v),
            WbStats::ZERO,
        ) else {
            return Vec::new();
        };
        let [works, duration, time, written, queued] = FAMILIES.map(|(name, _)| name);
        let mut works = MetricBuilder::counter(works, FAMILIES);
        let mut duration = MetricBuilder::histogram(duration, FAMILIES);
        let mut time = MetricBuilder::counter(time, FAMILIES);
        let mut written = MetricBuilder::counter(written, FAMILIES);
        let mut queued = MetricBuilder::counter(queued, FAMILIES);
        // With `detail = basic` the duration histogram is per device only (the work counters
        // and the summed time keep sync mode and reason): per mode and reason it is a fifth of
        // a device's series.
        let per_work_kind = metrics::detail::get() == Detail::Full;
        let mut durations: BTreeMap<[String; 3], Log2Hist> = BTreeMap::new();
        for (key, stats) in entries {
            let device = devices::label_for_bdi(&bdi_name(&key));
            let sync_mode = sync_mode_label(key.sync_mode);
            let reason = self
                .reasons
                .get(&key.reason)
                .cloned()
                .unwrap_or_else(|| key.reason.to_string());
            let labels = [
                ("device", device.as_str()),
                ("sync_mode", sync_mode.as_str()),
                ("reason", reason.as_str()),
            ];
            works.add_counter(&labels, stats.works as f64);
            time.add_counter(&labels, stats.duration.sum_ns as f64 / 1e9);
            let duration_key = if per_work_kind {
                [device.clone(), sync_mode.clone(), reason.clone()]
            } else {
                [device.clone(), String::new(), String::new()]
            };
            durations
                .entry(duration_key)
                .or_insert(Log2Hist::ZERO)
                .merge(&stats.duration);
            written.add_counter(&labels, (stats.written_pages * self.page_size) as f64);
            queued.add_counter(&labels, stats.queued as f64);
        }
        for ([device, sync_mode, reason], hist) in &durations {
            let labels = [
                ("device", device.as_str()),
                ("sync_mode", sync_mode.as_str()),
                ("reason", reason.as_str()),
            ];
            duration.add_log2_histogram(&labels, hist);
        }
        [works, duration, time, written, queued]
            .into_iter()
            .filter_map(MetricBuilder::finish)
            .collect()
    }
}

/// The bdi name in a key, up to its NUL padding.
pub fn bdi_name(key: &WbKey) -> String {
    let end = key
        .bdi
        .iter()
        .position(|b| *b == 0)
        .unwrap_or(key.bdi.len());
    String::from_utf8_lossy(&key.bdi[..end]).into_owned()
}

/// `none` / `all` for WB_SYNC_NONE / WB_SYNC_ALL; the raw number for anything else.
pub fn sync_mode_label(raw: u32) -> String {
    match raw {
        0 => "none".into(),
        WB_SYNC_ALL => "all".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_names_strip_prefix_and_sentinel() {
        let v = vec![
            ("WB_REASON_BACKGROUND".to_string(), 0),
            ("WB_REASON_FS_FREE_SPACE".to_string(), 5),
            ("WB_REASON_MAX".to_string(), 8),
        ];
        let names = reason_names_from_enum(&v);
        assert_eq!(names.get(&0).map(String::as_str), Some("background"));
        assert_eq!(names.get(&5).map(String::as_str), Some("fs_free_space"));
        assert_eq!(names.len(), 2);
    }

    #[test]
    fn labels() {
        let mut key = WbKey {
            bdi: [0; 16],
            sync_mode: 1,
            reason: 2,
        };
        key.bdi[..3].copy_from_slice(b"7:3");
        assert_eq!(bdi_name(&key), "7:3");
        assert_eq!(sync_mode_label(0), "none");
        assert_eq!(sync_mode_label(1), "all");
        assert_eq!(sync_mode_label(7), "7");
    }

    /// On a machine with tracefs, the work format and reason names resolve.
    #[test]
    fn resolves_on_the_running_kernel() {
        let Ok(kernel) = KernelInfo::discover() else {
            eprintln!("skipped: no tracefs (not root?)");
            return;
        };
        let mut family = WritebackWork::default();
        family.resolve(&kernel);
        for probe in PROBES {
            assert_eq!(family.gap(probe), None, "{}", probe.program);
        }
        assert!(
            family.reasons.values().any(|n| n == "sync"),
            "{:?}",
            family.reasons
        );
    }
}
