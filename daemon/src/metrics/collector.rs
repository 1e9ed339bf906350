//! The `Collector` that reads the probes' maps at scrape time.

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use probe_common::{sync_call::SyncSyscall, writeback::WbKey};
use prometheus::{
    core::{Collector, Desc},
    proto::MetricFamily,
};

use super::{families::Family, source::MapSource};
use crate::{
    kernel::devices,
    probes::{AttachStatus, ProbeReport},
};

/// Static facts the collector labels with, fixed at start-up.
pub struct CollectorContext {
    /// `enum wb_reason` value → label, from the running kernel.
    pub wb_reasons: BTreeMap<u32, String>,
    pub page_size: u64,
    pub version: String,
    pub kernel: String,
    pub probes: Vec<ProbeReport>,
}

/// Emits every `wbscope_*` family from the maps and the start-up context.
pub struct WbscopeCollector {
    source: Arc<dyn MapSource>,
    ctx: CollectorContext,
    descs: Vec<Desc>,
    wb_read_errors: AtomicU64,
    sync_read_errors: AtomicU64,
}

/// Names and help texts (METRICS.md is the contract).
const FAMILIES: &[(&str, &str)] = &[
    (
        "wbscope_writeback_work_total",
        "Flusher writeback work items executed.",
    ),
    (
        "wbscope_writeback_work_duration_seconds",
        "Time from a flusher work item's first writeback_start to its last writeback_written.",
    ),
    (
        "wbscope_writeback_written_bytes_total",
        "Bytes written back by flusher work (per-iteration page deltas times the page size).",
    ),
    (
        "wbscope_writeback_queued_total",
        "Work items queued for the flusher.",
    ),
    (
        "wbscope_sync_call_duration_seconds",
        "Latency of sync-family calls by the device of the file's filesystem.",
    ),
    (
        "wbscope_build_info",
        "wbscope version and the kernel it runs on.",
    ),
    (
        "wbscope_probe_attached",
        "1 if the probe is attached, 0 if it was skipped on this kernel.",
    ),
    (
        "wbscope_map_read_errors_total",
        "Failed reads of a probe map at scrape time.",
    ),
];

impl WbscopeCollector {
    /// A collector over `source`.
    pub fn new(source: Arc<dyn MapSource>, ctx: CollectorContext) -> WbscopeCollector {
        let descs = FAMILIES
            .iter()
            .filter_map(|(name, help)| {
                Desc::new((*name).into(), (*help).into(), vec![], Default::default()).ok()
            })
            .collect();
        WbscopeCollector {
            source,
            ctx,
            descs,
            wb_read_errors: AtomicU64::new(0),
            sync_read_errors: AtomicU64::new(0),
        }
    }

    fn help(name: &str) -> &'static str {
        FAMILIES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, h)| *h)
            .unwrap_or("")
    }

    fn reason_label(&self, raw: u32) -> String {
        self.ctx
            .wb_reasons
            .get(&raw)
            .cloned()
            .unwrap_or_else(|| raw.to_string())
    }

    fn writeback(&self, out: &mut Vec<MetricFamily>) {
        let entries = match self.source.writeback_stats() {
            Ok(entries) => entries,
            Err(err) => {
                tracing::warn!("{err}");
                self.wb_read_errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let name = |n| (n, Self::help(n));
        let (n, h) = name("wbscope_writeback_work_total");
        let mut works = Family::counter(n, h);
        let (n, h) = name("wbscope_writeback_work_duration_seconds");
        let mut duration = Family::histogram(n, h);
        let (n, h) = name("wbscope_writeback_written_bytes_total");
        let mut written = Family::counter(n, h);
        let (n, h) = name("wbscope_writeback_queued_total");
        let mut queued = Family::counter(n, h);
        for (key, stats) in entries {
            let device = devices::label_for_bdi(&bdi_name(&key));
            let sync_mode = sync_mode_label(key.sync_mode);
            let reason = self.reason_label(key.reason);
            let labels = [
                ("device", device.as_str()),
                ("sync_mode", sync_mode.as_str()),
                ("reason", reason.as_str()),
            ];
            works.add_counter(&labels, stats.works as f64);
            duration.add_log2_histogram(&labels, &stats.duration);
            written.add_counter(&labels, (stats.written_pages * self.ctx.page_size) as f64);
            queued.add_counter(&labels, stats.queued as f64);
        }
        out.extend(
            [works, duration, written, queued]
                .into_iter()
                .filter_map(Family::finish),
        );
    }

    fn sync_calls(&self, out: &mut Vec<MetricFamily>) {
        let entries = match self.source.sync_call_latency() {
            Ok(entries) => entries,
            Err(err) => {
                tracing::warn!("{err}");
                self.sync_read_errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let n = "wbscope_sync_call_duration_seconds";
        let mut family = Family::histogram(n, Self::help(n));
        for (key, hist) in entries {
            let Some(syscall) = SyncSyscall::from_raw(key.syscall) else {
                continue;
            };
            let device = if syscall == SyncSyscall::Sync {
                "all".to_owned()
            } else {
                devices::label_for_kernel_dev(key.dev)
            };
            family.add_log2_histogram(
                &[("syscall", syscall.label()), ("device", device.as_str())],
                &hist,
            );
        }
        out.extend(family.finish());
    }

    fn self_metrics(&self, out: &mut Vec<MetricFamily>) {
        let n = "wbscope_build_info";
        let mut info = Family::gauge(n, Self::help(n));
        info.add_gauge(
            &[("version", &self.ctx.version), ("kernel", &self.ctx.kernel)],
            1.0,
        );
        let n = "wbscope_probe_attached";
        let mut attached = Family::gauge(n, Self::help(n));
        for report in &self.ctx.probes {
            let up = matches!(report.status, AttachStatus::Attached);
            attached.add_gauge(
                &[("probe", report.spec.program)],
                if up { 1.0 } else { 0.0 },
            );
        }
        let n = "wbscope_map_read_errors_total";
        let mut errors = Family::counter(n, Self::help(n));
        for (map, count) in [
            (super::source::WB_WORK_STATS, &self.wb_read_errors),
            (super::source::SYNC_CALL_LATENCY, &self.sync_read_errors),
        ] {
            errors.add_counter(&[("map", map)], count.load(Ordering::Relaxed) as f64);
        }
        out.extend(
            [info, attached, errors]
                .into_iter()
                .filter_map(Family::finish),
        );
    }
}

impl Collector for WbscopeCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut out = Vec::with_capacity(FAMILIES.len());
        self.writeback(&mut out);
        self.sync_calls(&mut out);
        self.self_metrics(&mut out);
        out
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
        probe_common::writeback::WB_SYNC_ALL => "all".into(),
        other => other.to_string(),
    }
}
