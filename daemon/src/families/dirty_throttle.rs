//! Dirty throttling: `writeback:balance_dirty_pages` pauses, and
//! `wbscope_dirty_throttle_pause_seconds{device}`.

use crate::{families::Part, kernel::LayoutError};
use aya::{Ebpf, EbpfLoader};
use probe_common::{
    dirty_throttle::{BdiKey, DirtyThrottleFormat, globals},
    writeback::BDI_NAME_LEN,
};
use prometheus::core::Collector;

use super::{CollectorContext, Family, KernelInfo, gap_of};
use crate::{
    kernel::{
        constants::{Hz, kernel_hz},
        devices,
        layout::field_offset,
    },
    metrics::hist_collector::{KeyLabels, Log2HistCollector},
    probes::ProbeSpec,
};

const PROBES: &[ProbeSpec] = &[ProbeSpec::tracepoint(
    "balance_dirty_pages",
    "writeback",
    "balance_dirty_pages",
)];

// The object names its maps after these (checked by `probes::object_names`).
use probe_common::dirty_throttle::maps::DIRTY_THROTTLE_PAUSE;

/// Nanoseconds per unit of the tracepoint's `pause`: the task sleeps `pause` jiffies, and
/// `TP_fast_assign` records `__entry->pause = pause * 1000 / HZ`, milliseconds, as it has since
/// the event got its current shape (3.2). Nothing in the format file states the unit; a probe
/// reading it as jiffies would report 4× the sleep at HZ=250 (more than a single-threaded
/// writer's wall time, which is how this was caught).
const PAUSE_UNIT_NS: u32 = 1_000_000;

const FAMILIES: &[(&str, &str)] = &[(
    "wbscope_dirty_throttle_pause_seconds",
    "Sleeps of writers throttled in balance_dirty_pages (pause > 0), by backing device. Pauses \
     are whole jiffies.",
)];

/// The dirty-throttling family.
#[derive(Default)]
pub struct DirtyThrottle {
    format: Part<DirtyThrottleFormat>,
    hz: Part<Hz>,
}

fn throttle_format(kernel: &KernelInfo) -> Result<DirtyThrottleFormat, LayoutError> {
    let format = kernel.event_format("writeback", "balance_dirty_pages")?;
    Ok(DirtyThrottleFormat {
        bdi: field_offset(&format, "bdi", |n| n as usize >= BDI_NAME_LEN)?,
        pause: field_offset(&format, "pause", |n| n == 8)?,
        pause_unit_ns: PAUSE_UNIT_NS,
        _reserved: 0,
    })
}

impl Family for DirtyThrottle {
    fn name(&self) -> &'static str {
        "dirty throttling"
    }

    fn probes(&self) -> &'static [ProbeSpec] {
        PROBES
    }

    fn resolve(&mut self, kernel: &KernelInfo) {
        self.format = Some(throttle_format(kernel));
        self.hz = Some(kernel_hz(kernel));
    }

    fn gap(&self, _probe: &ProbeSpec) -> Option<String> {
        gap_of(&self.format)
    }

    fn set_globals<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        if let Some(Ok(format)) = &self.format {
            loader.override_global(globals::DIRTY_THROTTLE_FMT, format, true);
        }
    }

    fn describe(&self) -> Vec<String> {
        match &self.hz {
            // The pause histogram's resolution: the kernel sleeps whole jiffies.
            Some(Ok(hz)) => vec![format!(
                "kernel HZ: {} ({}): throttling pauses are multiples of {:.1} ms",
                hz.hz,
                hz.source,
                1000.0 / f64::from(hz.hz)
            )],
            Some(Err(why)) => vec![format!("kernel HZ unknown: {why}")],
            None => Vec::new(),
        }
    }

    fn collectors(&self, ebpf: &mut Ebpf, ctx: &CollectorContext) -> Vec<Box<dyn Collector>> {
        let labels: KeyLabels<BdiKey> = Box::new(|key: &BdiKey| {
            Some(vec![(
                "device",
                devices::label_for_bdi(&bdi_name(&key.bdi)),
            )])
        });
        vec![Box::new(Log2HistCollector::take(
            ebpf,
            DIRTY_THROTTLE_PAUSE,
            FAMILIES,
            &ctx.map_errors,
            labels,
        ))]
    }
}

/// A NUL-padded bdi name from a map key.
pub fn bdi_name(raw: &[u8]) -> String {
    let end = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
    String::from_utf8_lossy(&raw[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bdi_names_stop_at_nul() {
        assert_eq!(bdi_name(b"7:3\0\0\0\0\0"), "7:3");
        assert_eq!(bdi_name(b"btrfs-12"), "btrfs-12");
        assert_eq!(bdi_name(b""), "");
    }

    /// On a machine with tracefs, the format and HZ resolve.
    #[test]
    fn resolves_on_the_running_kernel() {
        let Ok(kernel) = KernelInfo::discover() else {
            eprintln!("skipped: no tracefs (not root?)");
            return;
        };
        let mut family = DirtyThrottle::default();
        family.resolve(&kernel);
        assert_eq!(family.gap(&PROBES[0]), None);
        assert!(matches!(family.format, Some(Ok(_))), "{:?}", family.format);
        let Some(Ok(hz)) = family.hz else {
            panic!("HZ unresolved: {:?}", family.hz);
        };
        assert!([100, 250, 300, 1000].contains(&hz.hz), "{hz:?}");
    }
}
