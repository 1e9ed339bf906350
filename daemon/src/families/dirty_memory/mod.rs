//! Dirty memory, read when Prometheus scrapes (no probes): system dirty/writeback pages and
//! thresholds from /proc/vmstat and /proc/meminfo, per-device dirty state from debugfs
//! `bdi/MAJ:MIN/stats` (block devices with a medium, as /proc/partitions lists them, and every
//! other bdi), and I/O pressure from /proc/pressure/io.

use crate::{families::Part, kernel::LayoutError};
use std::path::{Path, PathBuf};

use aya::{Ebpf, EbpfLoader};
use prometheus::{
    core::{Collector, Desc},
    proto::MetricFamily,
};

use super::{CollectorContext, Family, KernelInfo};
use crate::{
    kernel::{debugfs, devices, text_file},
    metrics::{describe, proto::MetricBuilder},
    probes::ProbeSpec,
};

pub mod parse;

const VMSTAT: &str = "/proc/vmstat";
const MEMINFO: &str = "/proc/meminfo";
const PSI_IO: &str = "/proc/pressure/io";
const PARTITIONS: &str = "/proc/partitions";

/// System gauges and counters: metric, /proc/vmstat field (pages).
const VMSTAT_METRICS: [(&str, &str); 6] = [
    ("wbscope_dirty_bytes", "nr_dirty"),
    ("wbscope_writeback_bytes", "nr_writeback"),
    ("wbscope_dirty_threshold_bytes", "nr_dirty_threshold"),
    (
        "wbscope_dirty_background_threshold_bytes",
        "nr_dirty_background_threshold",
    ),
    ("wbscope_dirtied_bytes_total", "nr_dirtied"),
    ("wbscope_written_bytes_total", "nr_written"),
];

/// Per-device gauges: metric, debugfs bdi stats field (already in bytes, from its kB unit).
const BDI_METRICS: [(&str, &str); 4] = [
    ("wbscope_bdi_dirty_bytes", "BdiReclaimable"),
    ("wbscope_bdi_writeback_bytes", "BdiWriteback"),
    ("wbscope_bdi_dirty_threshold_bytes", "BdiDirtyThresh"),
    (
        "wbscope_bdi_write_bandwidth_bytes_per_second",
        "BdiWriteBandwidth",
    ),
];

/// node_exporter's names: `waiting` for PSI's "some" line (at least one task waited on I/O),
/// `stalled` for "full" (every non-idle task did).
const PSI_SOME: &str = "wbscope_pressure_io_waiting_seconds_total";
const PSI_FULL: &str = "wbscope_pressure_io_stalled_seconds_total";
const MEMORY_TOTAL: &str = "wbscope_memory_total_bytes";

/// Names and help texts (documented in docs/metrics.md, generated from them).
const FAMILIES: &[(&str, &str)] = &[
    ("wbscope_dirty_bytes", "System dirty page cache (nr_dirty)."),
    (
        "wbscope_writeback_bytes",
        "System page cache under writeback (nr_writeback).",
    ),
    (
        "wbscope_dirty_threshold_bytes",
        "Global dirty threshold: writers are throttled above it (nr_dirty_threshold).",
    ),
    (
        "wbscope_dirty_background_threshold_bytes",
        "Global background threshold: the flushers start above it (nr_dirty_background_threshold).",
    ),
    (
        "wbscope_dirtied_bytes_total",
        "Page cache dirtied since boot (nr_dirtied).",
    ),
    (
        "wbscope_written_bytes_total",
        "Page cache written back since boot (nr_written).",
    ),
    ("wbscope_memory_total_bytes", "Usable RAM (MemTotal)."),
    (
        "wbscope_bdi_dirty_bytes",
        "Dirty page cache of a backing device (debugfs BdiReclaimable). The wbscope_bdi_ \
         families leave out block devices without a medium (a detached loop device).",
    ),
    (
        "wbscope_bdi_writeback_bytes",
        "Page cache under writeback on a backing device (debugfs BdiWriteback).",
    ),
    (
        "wbscope_bdi_dirty_threshold_bytes",
        "A backing device's share of the dirty threshold (debugfs BdiDirtyThresh).",
    ),
    (
        "wbscope_bdi_write_bandwidth_bytes_per_second",
        "The kernel's estimate of a backing device's write bandwidth (debugfs BdiWriteBandwidth).",
    ),
    (
        "wbscope_pressure_io_waiting_seconds_total",
        "Time at least one non-idle task was waiting on I/O (/proc/pressure/io, some total).",
    ),
    (
        "wbscope_pressure_io_stalled_seconds_total",
        "Time all non-idle tasks were stalled on I/O at once (/proc/pressure/io, full total).",
    ),
];

/// The dirty-memory family.
#[derive(Default)]
pub struct DirtyMemory {
    /// Where the bdi statistics are, or why they are not available.
    bdi_root: Part<debugfs::Debugfs>,
    psi: bool,
}

impl Family for DirtyMemory {
    fn name(&self) -> &'static str {
        "dirty memory"
    }

    fn probes(&self) -> &'static [ProbeSpec] {
        &[]
    }

    fn resolve(&mut self, _kernel: &KernelInfo) {
        self.bdi_root = Some(debugfs::locate_or_mount().map_err(LayoutError::from));
        // With CONFIG_PSI but psi=0 on the command line the file exists and reading it fails.
        self.psi = std::fs::read_to_string(PSI_IO).is_ok();
    }

    fn gap(&self, _probe: &ProbeSpec) -> Option<String> {
        None
    }

    fn set_globals<'a>(&'a self, _loader: &mut EbpfLoader<'a>) {}

    fn describe(&self) -> Vec<String> {
        let bdi = match &self.bdi_root {
            Some(Ok(d)) if d.mounted_by_us => format!(
                "per-device dirty state: {}/bdi/*/stats (debugfs mounted by wbscope)",
                d.root.display()
            ),
            Some(Ok(d)) => format!("per-device dirty state: {}/bdi/*/stats", d.root.display()),
            Some(Err(why)) => format!("per-device dirty state (wbscope_bdi_*) unavailable: {why}"),
            None => "per-device dirty state: not resolved".to_owned(),
        };
        let psi = if self.psi {
            format!("I/O pressure: {PSI_IO}")
        } else {
            format!(
                "I/O pressure unavailable: no readable {PSI_IO} (kernel without CONFIG_PSI, or \
                 booted with psi=0); {PSI_SOME} and {PSI_FULL} are not exported"
            )
        };
        vec![bdi, psi]
    }

    fn collectors(&self, _ebpf: &mut Ebpf, ctx: &CollectorContext) -> Vec<Box<dyn Collector>> {
        let bdi_dir = match &self.bdi_root {
            Some(Ok(d)) => Some(d.root.join("bdi")),
            _ => None,
        };
        ctx.scrape_errors.register(SCRAPE_FAMILY);
        vec![Box::new(DirtyCollector {
            page_size: ctx.page_size,
            bdi_dir,
            psi: self.psi,
            descs: describe(FAMILIES),
            errors: ctx.scrape_errors.clone(),
        })]
    }
}

/// The family name in `wbscope_scrape_errors_total`.
const SCRAPE_FAMILY: &str = "dirty_memory";

struct DirtyCollector {
    page_size: u64,
    bdi_dir: Option<PathBuf>,
    /// Whether the PSI file was readable at start (else it is not expected).
    psi: bool,
    descs: Vec<Desc>,
    errors: crate::metrics::ScrapeErrors,
}

impl DirtyCollector {
    /// Reads a kernel text file that was there at start and parses it; a failure costs only
    /// that file's series and is counted and logged as a scrape error.
    fn read<R>(&self, path: &Path, parse: impl FnOnce(&str) -> R) -> Option<R> {
        text_file::with_text(path, parse)
            .map_err(|e| {
                self.errors
                    .count(SCRAPE_FAMILY, &path.display().to_string(), &e)
            })
            .ok()
    }

    fn system(&self, out: &mut Vec<MetricFamily>) {
        let fields = VMSTAT_METRICS.map(|(_, field)| field);
        if let Some(pages) = self.read(Path::new(VMSTAT), |t| parse::name_values(t, fields)) {
            for ((metric, _), pages) in VMSTAT_METRICS.iter().zip(pages) {
                let Some(pages) = pages else {
                    continue;
                };
                let bytes = pages.saturating_mul(self.page_size) as f64;
                let family = if metric.ends_with("_total") {
                    let mut f = MetricBuilder::counter(metric, FAMILIES);
                    f.add_counter(&[], bytes);
                    f
                } else {
                    let mut f = MetricBuilder::gauge(metric, FAMILIES);
                    f.add_gauge(&[], bytes);
                    f
                };
                out.extend(family.finish());
            }
        }
        if let Some([Some(total)]) =
            self.read(Path::new(MEMINFO), |t| parse::byte_values(t, ["MemTotal"]))
        {
            let mut f = MetricBuilder::gauge(MEMORY_TOTAL, FAMILIES);
            f.add_gauge(&[], total as f64);
            out.extend(f.finish());
        }
    }

    fn per_device(&self, out: &mut Vec<MetricFamily>) {
        let Some(dir) = &self.bdi_dir else {
            return;
        };
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(err) => {
                self.errors
                    .count(SCRAPE_FAMILY, &dir.display().to_string(), &err);
                return;
            }
        };
        let mut families: Vec<MetricBuilder> = BDI_METRICS
            .iter()
            .map(|(metric, _)| MetricBuilder::gauge(metric, FAMILIES))
            .collect();
        let mut bdis: Vec<(String, PathBuf)> = entries
            .filter_map(Result::ok)
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
            .collect();
        bdis.sort();
        // A block device without a medium (a detached loop device: a host has eight of them
        // by default) has nothing to write back: its bdi is left out, and one read of
        // /proc/partitions saves a debugfs read per such device. Unreadable, nothing is left out.
        let with_medium = self.read(Path::new(PARTITIONS), parse::partitions);
        let fields = BDI_METRICS.map(|(_, field)| field);
        for (bdi, path) in bdis {
            if let (Some(devices), Some(dev)) = (&with_medium, devices::parse_bdi_dev(&bdi))
                && !devices.contains(&dev)
            {
                continue;
            }
            let stats_path = path.join("stats");
            let stats = match text_file::with_text(&stats_path, |t| parse::byte_values(t, fields)) {
                Ok(stats) => stats,
                // A device removed between the listing and the read is not an error.
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
                Err(err) => {
                    let source = stats_path.display().to_string();
                    self.errors.count(SCRAPE_FAMILY, &source, &err);
                    continue;
                }
            };
            let device = devices::label_for_bdi(&bdi);
            for (value, family) in stats.into_iter().zip(families.iter_mut()) {
                if let Some(v) = value {
                    family.add_gauge(&[("device", device.as_str())], v as f64);
                }
            }
        }
        out.extend(families.into_iter().filter_map(MetricBuilder::finish));
    }

    fn pressure(&self, out: &mut Vec<MetricFamily>) {
        if !self.psi {
            return;
        }
        let Some((some, full)) = self.read(Path::new(PSI_IO), parse::psi_totals) else {
            return;
        };
        for (metric, total_us) in [(PSI_SOME, some), (PSI_FULL, full)] {
            if let Some(us) = total_us {
                let mut f = MetricBuilder::counter(metric, FAMILIES);
                f.add_counter(&[], us as f64 / 1e6);
                out.extend(f.finish());
            }
        }
    }
}

impl Collector for DirtyCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut out = Vec::new();
        self.system(&mut out);
        self.per_device(&mut out);
        self.pressure(&mut out);
        out
    }
}
