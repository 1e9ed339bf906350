//! Alerting rules: slow fsync, too much memory under writeback, dirty throttling, probes that
//! did not attach, lost events, map read errors and block errors.

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
                        "histogram_quantile(0.99, sum by (instance, device, syscall, le) (\n  \
                         rate(wbscope_sync_call_duration_seconds_bucket{{\n    \
                         syscall=~\"fsync|fdatasync|io_uring_fsync|io_uring_fdatasync\"\n  \
                         }}[5m])\n)) > {FSYNC_P99_SECONDS}"
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
                        "sum by (instance, device) (\n  \
                         rate(wbscope_dirty_throttle_pause_seconds_sum[5m])\n) > {THROTTLE_SHARE}"
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
                    kind: alert("15m", "info"),
                    expr: "wbscope_probe_attached == 0".into(),
                    summary: "wbscope probe {{ $labels.probe }} is not attached on \
                              {{ $labels.instance }}",
                    description: "The probe {{ $labels.probe }} was skipped, disabled or refused \
                                  on this host's kernel, so the panels it feeds are empty there. \
                                  Run 'wbscope check' on the host for the reason (a missing \
                                  tracepoint or BTF type, or the verifier's answer).",
                },
                Rule {
                    name: "WbscopeEventsDropped",
                    kind: alert("10m", "info"),
                    expr: "sum by (instance, stream) (\n  \
                           rate(wbscope_events_dropped_total[5m])\n) > 0"
                        .into(),
                    summary: "wbscope drops {{ $labels.stream }} events on {{ $labels.instance }}",
                    description: "The {{ $labels.stream }} ring buffer has been overflowing for 10 \
                                  minutes ({{ $value | humanize }} records per second lost). The \
                                  metrics stay exact; only the per-event stall records are \
                                  incomplete. Raise the stall threshold or the buffer size.",
                },
                Rule {
                    name: "WbscopeMapReadErrors",
                    kind: alert("10m", "warning"),
                    expr: "sum by (instance, map) (\n  \
                           rate(wbscope_map_read_errors_total[5m])\n) > 0"
                        .into(),
                    summary: "wbscope cannot read map {{ $labels.map }} on {{ $labels.instance }}",
                    description: "Reads of the BPF map {{ $labels.map }} have been failing at \
                                  scrape time for 10 minutes, so its series are missing or \
                                  stale. Check the daemon's log on the host.",
                },
                Rule {
                    name: "WbscopeBlockRequestErrors",
                    kind: alert("1m", "warning"),
                    expr: "sum by (instance, device, op) (\n  \
                           rate(wbscope_block_request_errors_total[5m])\n) > 0"
                        .into(),
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
