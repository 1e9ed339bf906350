//! Dirty memory: system-wide dirty and writeback pages against the kernel's thresholds and
//! against RAM, and the same per backing device.

use crate::model::{Panel, Query, Viz};
use crate::scope::{RATE, Scope};

/// The level of pages under writeback, as a share of RAM, above which huge page allocation and
/// reclaim start waiting on them (`wait_on_page_writeback`); also the alert's threshold.
pub const WRITEBACK_RAM_MARK: f64 = 0.001;

/// Dirty and writeback bytes against the background and throttling thresholds.
pub fn dirty_vs_thresholds(s: Scope) -> Panel {
    let h = s.host();
    Panel::series(
        "Dirty and writeback memory vs thresholds",
        "bytes",
        "System-wide page cache waiting to be written (nr_dirty) and under writeback \
         (nr_writeback), against the kernel's global thresholds. Above the background threshold \
         the flusher threads start writing back; at the dirty threshold every task that dirties \
         pages is throttled in balance_dirty_pages. Look for dirty memory pinned at the dirty \
         threshold (writers are being slowed down) and writeback that stays high (the devices \
         cannot keep up).",
        vec![
            Query::new(format!("wbscope_dirty_bytes{{{h}}}"), s.legend("dirty")),
            Query::new(
                format!("wbscope_writeback_bytes{{{h}}}"),
                s.legend("writeback"),
            ),
            Query::new(
                format!("wbscope_dirty_background_threshold_bytes{{{h}}}"),
                s.legend("background threshold"),
            ),
            Query::new(
                format!("wbscope_dirty_threshold_bytes{{{h}}}"),
                s.legend("dirty (throttle) threshold"),
            ),
        ],
    )
}

/// Writeback and dirty memory as a fraction of RAM, with the 0.1 % mark.
pub fn share_of_ram(s: Scope) -> Panel {
    let h = s.host();
    Panel::series(
        "Writeback and dirty memory as a share of RAM",
        "percentunit",
        "nr_writeback and nr_dirty divided by total memory. The red line marks 0.1 %: with more \
         pages than that under writeback, huge page allocation (compaction) and reclaim keep \
         running into pages they must wait for (wait_on_page_writeback), so allocation latency \
         rises everywhere on the host. Writeback that stays above the line means I/O submitted \
         faster than the devices complete it; dirty memory near the dirty_ratio share means \
         writers are about to be throttled.",
        vec![
            Query::new(
                format!("wbscope_writeback_bytes{{{h}}} / wbscope_memory_total_bytes{{{h}}}"),
                s.legend("writeback"),
            ),
            Query::new(
                format!("wbscope_dirty_bytes{{{h}}} / wbscope_memory_total_bytes{{{h}}}"),
                s.legend("dirty"),
            ),
        ],
    )
    .as_viz(Viz::TimeSeries {
        mark: Some(WRITEBACK_RAM_MARK),
    })
}

/// Rate of pages dirtied against rate written back, system-wide.
pub fn dirtied_vs_written(s: Scope) -> Panel {
    let h = s.host();
    Panel::series(
        "Dirtied vs written back",
        "Bps",
        "How fast the system dirties page cache (nr_dirtied) and how fast it writes pages back \
         (nr_written). When dirtying outpaces writing for long, dirty memory grows until the \
         thresholds throttle the writers; a written rate that stays flat while dirtying grows \
         points at a slow device.",
        vec![
            Query::new(
                format!("rate(wbscope_dirtied_bytes_total{{{h}}}[{RATE}])"),
                s.legend("dirtied"),
            ),
            Query::new(
                format!("rate(wbscope_written_bytes_total{{{h}}}[{RATE}])"),
                s.legend("written"),
            ),
        ],
    )
}

/// Per backing device dirty and writeback bytes against the device's dirty threshold.
pub fn per_device(s: Scope) -> Panel {
    let d = s.device();
    Panel::series(
        "Dirty and writeback memory per device",
        "bytes",
        "The same quantities per backing device (bdi): pages of this device waiting to be \
         written, pages under writeback, and the share of the dirty threshold the kernel \
         currently grants the device (it follows the device's write bandwidth). A device whose \
         dirty bytes reach its threshold throttles the tasks writing to it, even when the host \
         as a whole is below the global threshold.",
        vec![
            Query::new(
                format!("wbscope_bdi_dirty_bytes{{{d}}}"),
                s.legend("{{device}} dirty"),
            ),
            Query::new(
                format!("wbscope_bdi_writeback_bytes{{{d}}}"),
                s.legend("{{device}} writeback"),
            ),
            Query::new(
                format!("wbscope_bdi_dirty_threshold_bytes{{{d}}}"),
                s.legend("{{device}} threshold"),
            ),
        ],
    )
}

/// The kernel's estimate of each device's write bandwidth.
pub fn bandwidth(s: Scope) -> Panel {
    let d = s.device();
    Panel::series(
        "Write bandwidth estimate per device",
        "Bps",
        "The kernel's running estimate of each backing device's write bandwidth \
         (avg_write_bandwidth), which sizes the device's share of the dirty threshold and the \
         writers' throttling rate. A sudden drop means the device slowed down (throttling, a \
         failing disk, a saturated network block device) and its writers will be paused sooner.",
        vec![Query::new(
            format!("wbscope_bdi_write_bandwidth_bytes_per_second{{{d}}}"),
            s.legend("{{device}}"),
        )],
    )
}
