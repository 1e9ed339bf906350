//! Recording rules for fleet-wide views: per-device p99s and per-instance totals, named
//! `level:metric:operation` as the Prometheus naming conventions ask.
//!
//! Target labels survive every rule (see [`super::FLEET_LABELS`]): per-target rules aggregate
//! `without` the metric's own dimensions they fold, so `job`, `cluster`, `instance` and whatever
//! a ServiceMonitor adds (`namespace`, `pod`, `service`) stay; the one fleet-wide rule keeps the
//! documented fleet labels.

use super::{Group, Rule, RuleFile};

fn record(
    name: &'static str,
    expr: String,
    summary: &'static str,
    description: &'static str,
) -> Rule {
    Rule {
        name,
        kind: super::RuleKind::Record,
        expr,
        summary,
        description,
    }
}

/// `histogram_quantile(0.99, ...)` of a histogram's 5-minute bucket rates per series: every
/// label, target labels included, stays.
fn p99(histogram: &str) -> String {
    format!("histogram_quantile(0.99,\n  rate({histogram}_bucket[5m])\n)")
}

/// `sum without (folded) (rate(counter[5m]))`: folds the metric's own `folded` dimensions and
/// keeps every other label.
fn total(counter: &str, folded: &str) -> String {
    format!("sum without ({folded}) (\n  rate({counter}[5m])\n)")
}

/// The recording rules file.
pub fn file() -> RuleFile {
    let sync = "wbscope_sync_call_duration_seconds";
    let latencies = vec![
        record(
            "instance_device_syscall:wbscope_sync_call_duration_seconds:p99_rate5m",
            p99(sync),
            "p99 sync-call latency per host, device and syscall over 5 minutes.",
            "For fleet tables of the slowest fsync devices, e.g. topk(10, ...{syscall=\"fsync\"}).",
        ),
        record(
            "syscall:wbscope_sync_call_duration_seconds:p99_rate5m",
            format!(
                "histogram_quantile(0.99, sum by ({}, syscall, le) (\n  rate({sync}_bucket[5m])\n))",
                super::FLEET_LABELS
            ),
            "p99 sync-call latency per syscall across each job and cluster over 5 minutes.",
            "The fleet's baseline to compare one host's or device's p99 with (kept per job and \
             cluster, the fleet labels).",
        ),
        record(
            "instance_device:wbscope_block_request_latency_seconds:p99_rate5m",
            p99("wbscope_block_request_latency_seconds"),
            "p99 block request latency (issue to complete) per host and device.",
            "Finds devices whose service time, not the layers above, makes sync calls slow.",
        ),
        record(
            "instance_device_fs:wbscope_journal_commit_duration_seconds:p99_rate5m",
            p99("wbscope_journal_commit_duration_seconds"),
            "p99 journal commit latency per host, device and filesystem type.",
            "Slow commits delay every fsync on the filesystem that needs one.",
        ),
        record(
            "instance_device:wbscope_dirty_throttle_pause_seconds:p99_rate5m",
            p99("wbscope_dirty_throttle_pause_seconds"),
            "p99 of single balance_dirty_pages pauses per host and device.",
            "Long single pauses mean a device far slower than its writers.",
        ),
        record(
            "instance_device:wbscope_writeback_wait_duration_seconds:p99_rate5m",
            p99("wbscope_writeback_wait_duration_seconds"),
            "p99 of single waits on pages under writeback per host and device.",
            "The delay a task inherits when it touches a page that is being written back.",
        ),
    ];
    let totals = vec![
        record(
            "instance_syscall:wbscope_sync_calls:rate5m",
            total(&format!("{sync}_count"), "device"),
            "Sync calls per second per host and syscall.",
            "Which hosts fsync the most; compare with their p99.",
        ),
        record(
            "instance_sync_mode_reason:wbscope_writeback_written_bytes:rate5m",
            total("wbscope_writeback_written_bytes_total", "device"),
            "Flusher writeback bytes per second per host, sync mode and reason.",
            "How much each host writes back in the background, for sync, for reclaim.",
        ),
        record(
            "instance_caller_sync_mode:wbscope_writeback_submitted_bytes:rate5m",
            total("wbscope_writeback_submitted_bytes_total", "device"),
            "Writeback bytes submitted per second per host, caller and sync mode.",
            "Which callers (flusher, fsync, sync_file_range, ...) generate each host's writeback.",
        ),
        record(
            "instance_op:wbscope_block_requests:rate5m",
            total("wbscope_block_requests_total", "device, sync"),
            "Block requests per second per host and op.",
            "Fleet view of request rates, flushes included.",
        ),
        record(
            "instance_op:wbscope_block_request_bytes:rate5m",
            total("wbscope_block_request_bytes_total", "device, sync"),
            "Block bytes per second per host and op.",
            "Fleet view of block throughput.",
        ),
        record(
            "instance:wbscope_dirty_throttle_pause_seconds:rate5m",
            total("wbscope_dirty_throttle_pause_seconds_sum", "device"),
            "Seconds per second tasks spend throttled in balance_dirty_pages, per host.",
            "Hosts whose writers are slowed down by dirty throttling (0.1 = 10 % of a task).",
        ),
        record(
            "instance:wbscope_writeback_wait_duration_seconds:rate5m",
            total("wbscope_writeback_wait_duration_seconds_sum", "device"),
            "Seconds per second tasks wait on pages under writeback, per host.",
            "Hosts where writeback is slow enough that tasks queue behind it.",
        ),
        record(
            "instance:wbscope_writeback_memory:ratio",
            "wbscope_writeback_bytes / wbscope_memory_total_bytes".to_owned(),
            "Share of memory under writeback per host.",
            "Above 0.001 (0.1 %) reclaim and huge page allocation wait on writeback.",
        ),
        record(
            "instance_kind:wbscope_stalls:rate5m",
            total("wbscope_stalls_total", "device"),
            "Operations over the stall threshold per second, per host and kind.",
            "Which hosts stall, and on what (a syscall, throttling, writeback waits, ...).",
        ),
        record(
            "instance:wbscope_bpf_program_run_seconds:rate5m",
            total("wbscope_bpf_program_run_seconds_total", "program"),
            "CPU seconds per second all wbscope BPF programs take, per host.",
            "What observing costs on each host.",
        ),
    ];
    RuleFile {
        file: "wbscope-recording.yml",
        groups: vec![
            Group {
                name: "wbscope-latency",
                rules: latencies,
            },
            Group {
                name: "wbscope-totals",
                rules: totals,
            },
        ],
    }
}
