//! Flusher work (by sync mode and the kernel's reason) and writepages submissions (by caller).

use crate::model::{Panel, Query};
use crate::scope::Scope;

/// Flusher work items executed per second.
pub fn work_items(s: Scope) -> Panel {
    Panel::series(
        "Flusher work items by sync mode and reason",
        "ops",
        "Work items the flusher threads executed per second, by sync mode and by the kernel's \
         wb_reason. sync_mode=all (WB_SYNC_ALL) items wait for every page they write and come \
         from sync(2), syncfs(2) and sync_inodes_sb; sync_mode=none items are best effort. \
         reason=background means dirty memory crossed the background threshold, periodic is \
         the dirty_expire timer, vmscan is reclaim asking for clean pages, fs_free_space is a \
         filesystem short of space. A steady stream of WB_SYNC_ALL work is what makes \
         neighbouring fsyncs wait.",
        vec![Query::new(
            s.rate_by("wbscope_writeback_work_total", "device, sync_mode, reason"),
            s.legend("{{device}} {{sync_mode}} {{reason}}"),
        )],
    )
}

/// Bytes written back by flusher work.
pub fn written_bytes(s: Scope) -> Panel {
    Panel::series(
        "Flusher bytes written back by sync mode and reason",
        "Bps",
        "Bytes the flusher threads wrote back per second, by sync mode and reason. This is \
         flusher writeback only: data a task writes back itself (fsync, sync_file_range) is in \
         'Bytes submitted by caller'. Large background or vmscan writeback during a latency \
         incident means the device was busy with page cache flushing when the slow call came.",
        vec![Query::new(
            s.rate_by(
                "wbscope_writeback_written_bytes_total",
                "device, sync_mode, reason",
            ),
            s.legend("{{device}} {{sync_mode}} {{reason}}"),
        )],
    )
}

/// Work items queued for the flusher.
pub fn queued(s: Scope) -> Panel {
    Panel::series(
        "Flusher work queued by sync mode and reason",
        "ops",
        "Work items queued for the flusher per second (writeback_queue). Only explicitly queued \
         work appears here: sync and syncfs passes, fs_free_space requests, foreign flushes; \
         background and periodic writeback run without being queued. Queued WB_SYNC_ALL work \
         is someone waiting for a whole filesystem to reach disk.",
        vec![Query::new(
            s.rate_by(
                "wbscope_writeback_queued_total",
                "device, sync_mode, reason",
            ),
            s.legend("{{device}} {{sync_mode}} {{reason}}"),
        )],
    )
}

/// p99 duration of flusher work items per device, mean by sync mode and reason.
pub fn duration_p99(s: Scope) -> Panel {
    Panel::series(
        "Flusher work item duration p99, mean by sync mode and reason",
        "s",
        "99th percentile of the time from a work item's first start to its last written event \
         per device (the histogram), and the mean duration of each sync mode and reason (summed \
         work time over work items). Long WB_SYNC_ALL items are sync or syncfs calls stuck \
         behind a slow device; long background items mean the flusher cannot drain dirty \
         memory. The histogram is per device at the default `[metrics] detail = basic`; `full` \
         adds sync mode and reason to it.",
        vec![
            Query::new(
                s.quantile(0.99, "wbscope_writeback_work_duration_seconds", "device"),
                s.legend("{{device}} p99"),
            ),
            Query::new(
                s.mean(
                    "wbscope_writeback_work_time_seconds_total",
                    "wbscope_writeback_work_total",
                    "device, sync_mode, reason",
                ),
                s.legend("{{device}} {{sync_mode}} {{reason}} mean"),
            ),
        ],
    )
}

/// writepages passes by caller and sync mode.
pub fn submissions(s: Scope) -> Panel {
    Panel::series(
        "Writeback submissions by caller and sync mode",
        "ops",
        "writepages passes over an inode per second, by who asked for them (the flusher, or a \
         task's fsync, fdatasync, sync_file_range, syncfs, sync, msync, io_uring) and by sync \
         mode. This is where WB_SYNC_ALL writeback issued by applications shows up, e.g. a \
         database calling sync_file_range with WAIT flags (sync_mode=all) instead of only \
         SYNC_FILE_RANGE_WRITE (sync_mode=none).",
        vec![Query::new(
            s.rate_by(
                "wbscope_writeback_submissions_total",
                "device, caller, sync_mode",
            ),
            s.legend("{{device}} {{caller}} {{sync_mode}}"),
        )],
    )
}

/// Bytes those passes submitted.
pub fn submitted_bytes(s: Scope) -> Panel {
    Panel::series(
        "Bytes submitted by caller and sync mode",
        "Bps",
        "Bytes the writepages passes submitted per second, by caller and sync mode. Compare \
         callers: a large fsync or sync_file_range share next to slow sync calls means the \
         application flushes big batches itself; a large flusher share means page cache \
         writeback competes with the application's own I/O.",
        vec![Query::new(
            s.rate_by(
                "wbscope_writeback_submitted_bytes_total",
                "device, caller, sync_mode",
            ),
            s.legend("{{device}} {{caller}} {{sync_mode}}"),
        )],
    )
}

/// Device write I/O by writeback source: who the device is busy for.
pub fn device_writes_by_source(s: Scope) -> Panel {
    Panel::series(
        "Device writes by source",
        "Bps",
        "Bytes per second the device is asked to write, by whom each bio was submitted for: \
         flusher work (with its sync mode and the kernel's reason: background, periodic, sync, \
         ...), a task's own sync call (fsync, fdatasync, sync_file_range, syncfs, sync, msync), \
         io_uring, direct (a task's O_DIRECT or O_SYNC writes), the journal, another kernel \
         worker (kworker), or throttled (bios a blk-throttle rule held back: submitter unknown). A stalled fsync next to a \
         large flusher sync or background share waited behind someone else's writeback.",
        vec![Query::new(
            s.rate_by(
                "wbscope_device_write_bytes_total",
                "device, source, sync_mode, reason",
            ),
            s.legend("{{device}} {{source}} {{sync_mode}} {{reason}}"),
        )],
    )
}
