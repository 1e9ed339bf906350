//! Where tasks wait: dirty throttling, pages under writeback, journal commits, PSI io, and the
//! stalls over the configured threshold.

use crate::model::{Panel, Query, Viz};
use crate::scope::{RATE, Scope};

const PAUSE: &str = "wbscope_dirty_throttle_pause_seconds";
const WAIT: &str = "wbscope_writeback_wait_duration_seconds";
const JOURNAL: &str = "wbscope_journal_commit_duration_seconds";

/// Share of time writers spend paused in balance_dirty_pages.
pub fn throttle_share(s: Scope) -> Panel {
    Panel::series(
        "Time writers spent throttled (balance_dirty_pages)",
        "percentunit",
        "Seconds of balance_dirty_pages sleep per second of wall time, per device: 50 % means \
         that on average half a task was paused for dirtying pages faster than the device \
         writes them; over 100 % means several tasks at once. Throttling is the kernel working \
         as designed, but an application whose writes (not fsyncs) are slow is usually here. \
         The throttling alert fires above 10 %.",
        vec![Query::new(
            s.rate_by(&format!("{PAUSE}_sum"), "device"),
            s.legend("{{device}}"),
        )],
    )
}

/// p99 of single throttling pauses.
pub fn throttle_p99(s: Scope) -> Panel {
    Panel::series(
        "Dirty throttle pause p99",
        "s",
        "99th percentile of a single balance_dirty_pages pause. The kernel caps one pause at \
         200 ms; many pauses in a row are what a writer experiences as a stall.",
        vec![Query::new(
            s.quantile(0.99, PAUSE, "device"),
            s.legend("{{device}}"),
        )],
    )
}

/// Share of time tasks wait on pages under writeback.
pub fn writeback_wait_share(s: Scope) -> Panel {
    Panel::series(
        "Time spent waiting on pages under writeback",
        "percentunit",
        "Seconds tasks slept per second waiting for pages under writeback to complete \
         (folio_wait_writeback), per device: an fsync or a write to a page that is being \
         written, truncation, reclaim and compaction all wait here. It rises when writeback \
         is slow and pages stay under writeback for long (see the share of RAM panel).",
        vec![Query::new(
            s.rate_by(&format!("{WAIT}_sum"), "device"),
            s.legend("{{device}}"),
        )],
    )
}

/// p99 of single writeback waits.
pub fn writeback_wait_p99(s: Scope) -> Panel {
    Panel::series(
        "Writeback wait p99",
        "s",
        "99th percentile of one wait on a page under writeback. Waits of seconds mean the \
         device (or a throttle in front of it) completes writeback that slowly; every task \
         touching those pages inherits the delay.",
        vec![Query::new(
            s.quantile(0.99, WAIT, "device"),
            s.legend("{{device}}"),
        )],
    )
}

/// Journal commits per second.
pub fn journal_rate(s: Scope) -> Panel {
    Panel::series(
        "Journal commits per second",
        "ops",
        "jbd2 transaction commits (ext4) and log writes (xfs) per second. Each fsync of a file \
         with new metadata forces one; a commit rate close to the fsync rate means every fsync \
         pays a full journal commit and its cache flushes.",
        vec![Query::new(
            s.rate_by(&format!("{JOURNAL}_count"), "device, fs"),
            s.legend("{{device}} {{fs}}"),
        )],
    )
}

/// p50 and p99 commit latency.
pub fn journal_quantiles(s: Scope) -> Panel {
    Panel::series(
        "Journal commit latency p50 / p99",
        "s",
        "Median and 99th percentile duration of a journal commit (ext4's jbd2 commit, xfs log \
         write). In ext4's ordered mode a commit waits for the transaction's data writeback, \
         so one large writer makes every other fsync on the filesystem wait for its data.",
        vec![
            Query::new(
                s.quantile(0.5, JOURNAL, "device, fs"),
                s.legend("{{device}} {{fs}} p50"),
            ),
            Query::new(
                s.quantile(0.99, JOURNAL, "device, fs"),
                s.legend("{{device}} {{fs}} p99"),
            ),
        ],
    )
}

/// PSI io totals as a share of time.
pub fn pressure(s: Scope) -> Panel {
    let h = s.host();
    Panel::series(
        "I/O pressure (PSI)",
        "percentunit",
        "Share of wall time in which some task (some) or all non-idle tasks (full) were stalled \
         on I/O, from /proc/pressure/io. It tells whether the host as a whole suffers, whatever \
         the device: a device-level stall that does not move 'some' hurts few tasks; 'full' \
         above a few percent means the host is doing nothing but waiting for storage.",
        vec![
            Query::new(
                format!("rate(wbscope_pressure_io_waiting_seconds_total{{{h}}}[{RATE}])"),
                s.legend("some (waiting)"),
            ),
            Query::new(
                format!("rate(wbscope_pressure_io_stalled_seconds_total{{{h}}}[{RATE}])"),
                s.legend("full (stalled)"),
            ),
        ],
    )
}

/// Stalls per kind.
pub fn stalls(s: Scope) -> Panel {
    Panel::series(
        "Stalls over threshold by kind",
        "ops",
        "Operations per second that took longer than the daemon's stall threshold, by kind: a \
         sync call (its syscall name), a dirty throttling pause, a wait on writeback, a block \
         request or a journal commit. Each one is also a record in the daemon's stall event \
         stream ('wbscope trace') with the task, file and a breakdown of where it waited.",
        vec![Query::new(
            s.rate_by("wbscope_stalls_total", "device, kind"),
            s.legend("{{device}} {{kind}}"),
        )],
    )
}

/// Total stalls in the dashboard's time range.
pub fn stall_count(s: Scope) -> Panel {
    Panel::series(
        "Stalls in range",
        "none",
        "How many operations on this device exceeded the stall threshold within the selected \
         time range, all kinds together. Zero means nothing crossed the threshold: look at the \
         latency percentiles instead.",
        vec![Query::new(
            format!(
                "sum(increase(wbscope_stalls_total{{{}}}[$__range]))",
                s.device()
            ),
            "stalls",
        )],
    )
    .as_viz(Viz::Stat)
    .wide(6)
}
