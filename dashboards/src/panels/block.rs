//! Block layer: request rates and bytes by op and REQ_SYNC, latency, queue time, flags at bio
//! and request level, errors.

use crate::model::{Panel, Query, Row, Viz};
use crate::scope::Scope;

const LATENCY: &str = "wbscope_block_request_latency_seconds";

/// The "Block layer" row, the same in every dashboard.
pub fn row(s: Scope) -> Row {
    Row::new(
        "Block layer",
        vec![
            requests(s),
            throughput(s),
            heatmap(s),
            latency_quantiles(s),
            queue_latency(s),
            flags(s),
            errors(s),
        ],
    )
}

/// Requests issued per second by op and sync.
pub fn requests(s: Scope) -> Panel {
    Panel::series(
        "Block requests by op and sync",
        "reqps",
        "Requests issued to the driver per second, by operation and by whether they carry \
         REQ_SYNC (sync=true: someone waits for them, e.g. fsync, O_DIRECT, journal commits). \
         Flush requests are the device cache flushes that fsync and journal commits need; a \
         spike of them on a device without a volatile cache is wasted work, on one with a \
         slow cache it is the fsync latency.",
        vec![Query::new(
            s.rate_by("wbscope_block_requests_total", "device, op, sync"),
            s.legend("{{device}} {{op}} sync={{sync}}"),
        )],
    )
}

/// Bytes per second by op.
pub fn throughput(s: Scope) -> Panel {
    Panel::series(
        "Block throughput by op",
        "Bps",
        "Bytes of the issued requests per second, by operation. Compare with the flusher and \
         submission panels to see whose data the device is busy with.",
        vec![Query::new(
            s.rate_by("wbscope_block_request_bytes_total", "device, op"),
            s.legend("{{device}} {{op}}"),
        )],
    )
}

/// Heatmap of request latency.
pub fn heatmap(s: Scope) -> Panel {
    Panel::series(
        "Block request latency heatmap (issue to complete)",
        "s",
        "Time from issuing a request to the driver to its completion, as a distribution over \
         time. This is the device's own service time (queueing in the driver and the device \
         included, the I/O scheduler not). If sync calls are slow but this stays low, the wait \
         is above the block layer: throttling, page writeback waits, the journal.",
        vec![Query::new(s.heatmap(LATENCY), "{{le}}")],
    )
    .as_viz(Viz::Heatmap)
    .wide(24)
}

/// p50 and p99 request latency per device, mean by op and sync.
pub fn latency_quantiles(s: Scope) -> Panel {
    Panel::series(
        "Block request latency p50 / p99, mean by op and sync",
        "s",
        "Median and 99th percentile issue-to-complete latency per device (the histogram), and \
         the mean latency of each operation and REQ_SYNC (summed request time over requests \
         issued). Look for a high flush mean (a slow volatile cache), and for sync writes whose \
         mean rises when non-sync (writeback) writes are heavy: the device does not prioritise \
         them. The histogram is per device at the default `[metrics] detail = basic` (it would \
         cost a histogram per op and sync); `full` adds the op and sync labels to it, for \
         per-kind percentiles in Explore.",
        vec![
            Query::new(
                s.quantile(0.5, LATENCY, "device"),
                s.legend("{{device}} p50"),
            ),
            Query::new(
                s.quantile(0.99, LATENCY, "device"),
                s.legend("{{device}} p99"),
            ),
            Query::new(
                s.mean(
                    "wbscope_block_request_time_seconds_total",
                    "wbscope_block_requests_total",
                    "device, op, sync",
                ),
                s.legend("{{device}} {{op}} sync={{sync}} mean"),
            ),
        ],
    )
}

/// p99 time in the I/O scheduler.
pub fn queue_latency(s: Scope) -> Panel {
    Panel::series(
        "Block queue latency p99 (insert to issue)",
        "s",
        "99th percentile of the time a request waited between allocation or insertion into the \
         I/O scheduler and its issue to the driver. High values with a low service time mean \
         requests queue in the scheduler (or the plug) behind others, e.g. sync writes behind \
         a flood of writeback. Per device at the default `[metrics] detail = basic`; `full` \
         adds the op label.",
        vec![Query::new(
            s.quantile(0.99, "wbscope_block_queue_latency_seconds", "device"),
            s.legend("{{device}}"),
        )],
    )
}

/// Flag counts at bio and request level.
pub fn flags(s: Scope) -> Panel {
    Panel::series(
        "Block flags: bio vs request level",
        "ops",
        "How often each request flag (sync, meta, fua, preflush, idle, background, rahead, \
         nowait) appears per second, at bio level (what the filesystem asked for) and at \
         request level (what reached the driver). On a device without FUA support the kernel \
         turns a preflush+fua bio into flush, write, flush requests, so fua appears only at \
         bio level and flushes multiply: that is the cost of each fsync's journal commit.",
        vec![Query::new(
            s.rate_by("wbscope_block_flags_total", "device, flag, level"),
            s.legend("{{device}} {{flag}} ({{level}})"),
        )],
    )
}

/// Completions with an error.
pub fn errors(s: Scope) -> Panel {
    Panel::series(
        "Block request errors",
        "reqps",
        "Requests completed with an error status per second, by operation. Anything above zero \
         deserves a look at the kernel log: write errors during writeback surface to \
         applications only at their next fsync, as EIO.",
        vec![Query::new(
            s.rate_by("wbscope_block_request_errors_total", "device, op"),
            s.legend("{{device}} {{op}}"),
        )],
    )
}
