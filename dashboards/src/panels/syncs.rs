//! Sync calls: latency heatmap, p50/p99 per device and syscall, call rates, sync_file_range
//! flags.

use crate::model::{Panel, Query, Viz};
use crate::scope::Scope;

const SYNC: &str = "wbscope_sync_call_duration_seconds";

/// Heatmap of every sync call's latency.
pub fn heatmap(s: Scope) -> Panel {
    Panel::series(
        "Sync-call latency heatmap",
        "s",
        "How long fsync, fdatasync, sync_file_range, syncfs, sync, msync and their io_uring \
         forms took, as a distribution over time (all selected devices and syscalls). Each \
         cell counts calls per second in one power-of-two latency bucket. A healthy disk keeps \
         the mass in the millisecond rows; a band that climbs into whole seconds while the \
         rest stays put is the stall you are looking for.",
        vec![Query::new(s.heatmap(SYNC), "{{le}}")],
    )
    .as_viz(Viz::Heatmap)
    .wide(24)
}

/// p50 and p99 per device and syscall.
pub fn quantiles(s: Scope) -> Panel {
    Panel::series(
        "Sync-call latency p50 / p99 by device and syscall",
        "s",
        "Median and 99th percentile latency of each sync call per device (the device of the \
         file's filesystem; sync(2) is device 'all'). A p99 far above the p50 means a few calls \
         stall while most are fast: look at the flusher, throttling and block panels at the \
         same time for what they waited on. The fsync p99 alert fires above 1 s.",
        vec![
            Query::new(
                s.quantile(0.5, SYNC, "device, syscall"),
                s.legend("{{device}} {{syscall}} p50"),
            ),
            Query::new(
                s.quantile(0.99, SYNC, "device, syscall"),
                s.legend("{{device}} {{syscall}} p99"),
            ),
        ],
    )
}

/// Calls per second by syscall.
pub fn rates(s: Scope) -> Panel {
    Panel::series(
        "Sync calls per second by syscall",
        "ops",
        "How often each sync call completes, per device. A jump in fsync or sync_file_range \
         rate is often the cause of a latency change, not its effect: every call forces the \
         filesystem's journal and the device's cache flush.",
        vec![Query::new(
            s.rate_by(&format!("{SYNC}_count"), "device, syscall"),
            s.legend("{{device}} {{syscall}}"),
        )],
    )
}

/// sync_file_range calls by their flags.
pub fn sync_file_range_flags(s: Scope) -> Panel {
    Panel::series(
        "sync_file_range calls by flags",
        "ops",
        "sync_file_range(2) calls per second by flag combination. 'write' alone only starts \
         writeback (WB_SYNC_NONE) and returns; any 'wait_before' or 'wait_after' makes the call \
         wait for pages under writeback, which is how checkpoints used to stall for seconds. \
         Look for wait flags on a busy device.",
        vec![Query::new(
            s.rate_by("wbscope_sync_file_range_calls_total", "device, flags"),
            s.legend("{{device}} {{flags}}"),
        )],
    )
}
