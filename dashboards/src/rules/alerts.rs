//! Alerting rules: slow fsync, too much memory under writeback, dirty throttling, probes that
//! failed to attach, lost events, map read errors and block errors.
//!
//! None aggregates: each alert is per series, so every target label (`job`, `cluster`,
//! `instance`, a ServiceMonitor's `namespace`, `pod`, ...) reaches Alertmanager for routing.
//! A probe this kernel cannot support, or one disabled in the config, is not a failure: it is
//! exported as `wbscope_probe_unsupported` and leaves `WbscopeProbeNotAttached` silent. Flight
//! recorder eviction (`stream="recorder"`) is the recorder's bound at work, not loss the
//! operator can act on, and does not count as dropped events.

use super::{Group, Rule, RuleFile, RuleKind};
use crate::panels::memory::WRITEBACK_RAM_MARK;

/// The fsync p99, in seconds, above which a device alerts.
pub const FSYNC_P99_SECONDS: f64 = 1.0;
/// The share of wall time writers may spend paused in balance_dirty_pages before alerting.
pub const THROTTLE_SHARE: f64 = 0.1;

const fn alert(for_: &'static str, severity: &'static str) -> RuleKind {
    RuleKind::Alert { for_, severity }
}

/// The alerts file.
pub fn file() -> RuleFile {
    RuleFile {
        file: "wbscope-alerts.yml",
        groups: vec![Group {
            name: "wbscope-alerts",
            rules: vec![
                Rule {
                    name: "WbscopeFsyncSlow",
                    kind: alert("5m", "warning"),
                    expr: format!(
                        "histogram_quantile(0.99,\n  \
                         rate(wbscope_sync_call_duration_seconds_bucket{{\n    \
                         syscall=~\"fsync|fdatasync|io_uring_fsync|io_uring_fdatasync\"\n  \
                         }}[5m])\n) > {FSYNC_P99_SECONDS}"
                    ),
                    summary: "{{ $labels.syscall }} p99 above 1 s on {{ $labels.device }} of \
                              {{ $labels.instance }}",
                    description: "The 99th percentile of {{ $labels.syscall }} on device \
                                  {{ $labels.device }} has been {{ $value | humanizeDuration }} \
                                  for 5 minutes. Applications that fsync (databases, queues) \
                                  wait that long for durability. Open the Stall investigation \
                                  dashboard for this device: WB_SYNC_ALL flusher work, dirty \
                                  throttling, writeback waits, journal commits and block latency \
                                  show what the calls waited on.",
                },
                Rule {
                    name: "WbscopeWritebackMemoryHigh",
                    kind: alert("15m", "warning"),
                    expr: format!(
                        "wbscope_writeback_bytes / wbscope_memory_total_bytes > {WRITEBACK_RAM_MARK}"
                    ),
                    summary: "More than 0.1 % of memory under writeback on {{ $labels.instance }}",
                    description: "{{ $value | humanizePercentage }} of memory has been under \
                                  writeback for 15 minutes. Above about 0.1 %, huge page \
                                  allocation and reclaim wait on these pages \
                                  (wait_on_page_writeback), so allocation latency rises for every \
                                  task on the host. The devices complete writeback slower than \
                                  it is submitted: check per-device writeback and bandwidth, and \
                                  lower dirty_bytes / dirty_background_bytes on hosts with slow \
                                  storage.",
                },
                Rule {
                    name: "WbscopeDirtyThrottling",
                    kind: alert("10m", "warning"),
                    expr: format!(
                        "rate(wbscope_dirty_throttle_pause_seconds_sum[5m]) > {THROTTLE_SHARE}"
                    ),
                    summary: "Writers to {{ $labels.device }} on {{ $labels.instance }} are \
                              throttled",
                    description: "Tasks writing to {{ $labels.device }} have spent \
                                  {{ $value | humanizePercentage }} of wall time (summed over \
                                  tasks) paused in balance_dirty_pages for 10 minutes: they dirty \
                                  page cache faster than the device writes it back, so their \
                                  write() calls are slowed to the device's speed. Check the \
                                  device's write bandwidth estimate and latency, and whether a \
                                  bdi max_bytes / strict_limit is set.",
                },
                Rule {
                    name: "WbscopeProbeNotAttached",
                    kind: alert("15m", "warning"),
                    // The probes not known to be unsupported, then those of them not attached
                    // (the final comparison last, so the e2e test can drop it).
                    expr: "(\n  wbscope_probe_attached\n  \
                           unless ignoring (reason)\n  \
                           wbscope_probe_unsupported == 1\n) == 0"
                        .into(),
                    summary: "wbscope probe {{ $labels.probe }} failed to attach on \
                              {{ $labels.instance }}",
                    description: "The kernel refused the probe {{ $labels.probe }} (the verifier \
                                  or the attach failed) although nothing says this kernel cannot \
                                  support it, so the panels it feeds are empty on this host. \
                                  Probes the kernel cannot support by design and probes disabled \
                                  in the config do not alert (see wbscope_probe_unsupported). Run \
                                  'wbscope check --verbose' on the host for the kernel's answer.",
                },
                Rule {
                    name: "WbscopeEventsDropped",
                    kind: alert("10m", "info"),
                    expr: "rate(wbscope_events_dropped_total{stream!=\"recorder\"}[5m]) > 0".into(),
                    summary: "wbscope loses stall events ({{ $labels.stream }}) on \
                              {{ $labels.instance }}",
                    description: "Stall events have been lost for 10 minutes \
                                  ({{ $value | humanize }} per second, stream \
                                  {{ $labels.stream }}): 'stalls' means the kernel's ring buffer \
                                  was full, 'trace' that a wbscope trace client read too slowly. \
                                  The metrics stay exact; only the per-event records (/stalls, \
                                  wbscope trace) are incomplete. Raise stalls.threshold so that \
                                  fewer operations count as stalls. Flight-recorder eviction \
                                  (stream recorder) is the recorder's bound and does not alert.",
                },
                Rule {
                    name: "WbscopeMapReadErrors",
                    kind: alert("10m", "warning"),
                    expr: "rate(wbscope_map_read_errors_total[5m]) > 0".into(),
                    summary: "wbscope cannot read map {{ $labels.map }} on {{ $labels.instance }}",
                    description: "Reads of the BPF map {{ $labels.map }} have been failing at \
                                  scrape time for 10 minutes, so its series are missing or \
                                  stale. Check the daemon's log on the host.",
                },
                Rule {
                    name: "WbscopeBlockRequestErrors",
                    kind: alert("1m", "warning"),
                    expr: "rate(wbscope_block_request_errors_total[5m]) > 0".into(),
                    summary: "{{ $labels.op }} requests fail on {{ $labels.device }} of \
                              {{ $labels.instance }}",
                    description: "Block requests ({{ $labels.op }}) on {{ $labels.device }} \
                                  completed with an error status ({{ $value | humanize }} per \
                                  second). Failed writeback reaches applications only as EIO \
                                  at their next fsync. Check the kernel log and the device.",
                },
            ],
        }],
    }
}
