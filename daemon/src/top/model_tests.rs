use std::time::{Duration, Instant};

use super::*;
use crate::{families::top_processes::ProcRow, top::expo};

fn snapshot(at: Instant, text: &str, processes: Vec<ProcRow>) -> Snapshot {
    Snapshot {
        at,
        samples: expo::parse(text).unwrap(),
        processes,
        stalls: Vec::new(),
        notes: Vec::new(),
    }
}

fn proc_row(tgid: u32, comm: &str, sync_ms: u64, throttle_ms: u64, calls: u64) -> ProcRow {
    ProcRow {
        tgid,
        comm: comm.into(),
        sync_call_ns: sync_ms * 1_000_000,
        throttle_ns: throttle_ms * 1_000_000,
        sync_calls: calls,
        cgroup: String::new(),
    }
}

const BEFORE: &str = r#"
wbscope_bdi_dirty_bytes{device="loop3"} 100
wbscope_bdi_dirty_bytes{device="sda"} 0
wbscope_block_request_bytes_total{device="loop3",op="write",sync="true"} 1000
wbscope_block_request_bytes_total{device="loop3",op="read",sync="false"} 50
wbscope_sync_call_duration_seconds_bucket{syscall="fsync",device="loop3",le="0.001"} 5
wbscope_sync_call_duration_seconds_bucket{syscall="fsync",device="loop3",le="0.002"} 5
wbscope_sync_call_duration_seconds_bucket{syscall="fsync",device="loop3",le="+Inf"} 5
wbscope_sync_call_duration_seconds_count{syscall="fsync",device="loop3"} 5
wbscope_writeback_work_total{device="loop3",sync_mode="WB_SYNC_NONE",reason="background"} 3
"#;

const AFTER: &str = r#"
wbscope_bdi_dirty_bytes{device="loop3"} 4096
wbscope_bdi_writeback_bytes{device="loop3"} 8192
wbscope_bdi_write_bandwidth_bytes_per_second{device="loop3"} 1e6
wbscope_bdi_dirty_bytes{device="sda"} 0
wbscope_block_request_bytes_total{device="loop3",op="write",sync="true"} 3000
wbscope_block_request_bytes_total{device="loop3",op="write",sync="false"} 1000
wbscope_block_request_bytes_total{device="loop3",op="read",sync="false"} 5000
wbscope_sync_call_duration_seconds_bucket{syscall="fsync",device="loop3",le="0.001"} 5
wbscope_sync_call_duration_seconds_bucket{syscall="fsync",device="loop3",le="0.002"} 9
wbscope_sync_call_duration_seconds_bucket{syscall="fsync",device="loop3",le="+Inf"} 9
wbscope_sync_call_duration_seconds_count{syscall="fsync",device="loop3"} 9
wbscope_sync_call_duration_seconds_bucket{syscall="fdatasync",device="loop3",le="0.001"} 4
wbscope_sync_call_duration_seconds_bucket{syscall="fdatasync",device="loop3",le="0.002"} 4
wbscope_sync_call_duration_seconds_bucket{syscall="fdatasync",device="loop3",le="+Inf"} 4
wbscope_sync_call_duration_seconds_count{syscall="fdatasync",device="loop3"} 4
wbscope_sync_call_duration_seconds_count{syscall="sync",device="all"} 1
wbscope_writeback_work_total{device="loop3",sync_mode="WB_SYNC_NONE",reason="background"} 7
wbscope_writeback_written_bytes_total{device="loop3",sync_mode="WB_SYNC_NONE",reason="background"} 8000
wbscope_block_request_latency_seconds_bucket{device="loop3",op="write",sync="true",le="0.004"} 1
wbscope_block_request_latency_seconds_bucket{device="loop3",op="write",sync="true",le="0.008"} 4
wbscope_block_request_latency_seconds_bucket{device="loop3",op="write",sync="true",le="+Inf"} 4
wbscope_block_request_latency_seconds_bucket{device="loop3",op="read",sync="false",le="+Inf"} 0
"#;

fn pair() -> (Snapshot, Snapshot) {
    let t0 = Instant::now();
    let before = snapshot(
        t0,
        BEFORE,
        vec![
            proc_row(10, "fsyncer", 100, 0, 10),
            proc_row(11, "dd", 0, 50, 0),
        ],
    );
    let after = snapshot(
        t0 + Duration::from_secs(2),
        AFTER,
        vec![
            proc_row(10, "fsyncer", 900, 0, 30),
            proc_row(11, "dd", 0, 1050, 0),
            proc_row(12, "new", 20, 0, 2),
        ],
    );
    (before, after)
}

#[test]
fn first_frame_has_gauges_but_no_rates() {
    let (_, after) = pair();
    let v = build(None, &after, None, SortKey::SyncTime);
    assert_eq!(v.interval_s, None);
    let loop3 = &v.devices[0];
    assert_eq!(loop3.device, "loop3");
    assert_eq!(loop3.dirty_bytes, Some(4096.0));
    assert_eq!(loop3.write_bps, None);
    assert_eq!(loop3.sync_p50, None);
    assert!(v.latency.is_empty() && v.flusher.is_empty());
}

#[test]
fn rates_and_quantiles_over_the_interval() {
    let (before, after) = pair();
    let v = build(Some(&before), &after, None, SortKey::SyncTime);
    assert_eq!(v.interval_s, Some(2.0));
    // sda has only zero gauges: left out and counted; `all` (sync(2)) is not a device.
    assert_eq!(v.devices.len(), 1);
    assert_eq!(v.idle_devices, 1);
    let r = &v.devices[0];
    // Writes: (3000 - 1000) + (1000 - 0, a new series) over 2 s; reads do not count.
    assert_eq!(r.write_bps, Some(1500.0));
    assert_eq!(r.bdi_bps, Some(1e6));
    assert_eq!(r.writeback_bytes, Some(8192.0));
    // 4 fsyncs in (1, 2] ms and 4 new fdatasyncs in (0, 1] ms: merged over calls.
    assert_eq!(r.sync_calls_per_s, Some(4.0));
    assert_eq!(r.sync_p50, Some(0.001));
    assert!((r.sync_p99.unwrap() - 0.00198).abs() < 1e-9);

    assert_eq!(v.flusher.len(), 1);
    assert_eq!(v.flusher[0].works_per_s, 2.0);
    assert_eq!(v.flusher[0].bytes_per_s, 4000.0);
    assert_eq!(v.flusher[0].reason, "background");

    // The read series saw no request in the window: no row.
    assert_eq!(v.latency.len(), 1);
    let l = &v.latency[0];
    assert_eq!((l.op.as_str(), l.sync.as_str()), ("write", "true"));
    assert_eq!(l.requests_per_s, 2.0);
    assert_eq!(l.p50, Some(0.004 + 0.004 * (2.0 - 1.0) / 3.0));
}

#[test]
fn processes_sorted_by_the_chosen_key() {
    let (before, after) = pair();
    let v = build(Some(&before), &after, None, SortKey::SyncTime);
    let order: Vec<&str> = v.processes.iter().map(|p| p.comm.as_str()).collect();
    assert_eq!(order, ["fsyncer", "new", "dd"]);
    assert_eq!(v.processes[0].sync_ms_per_s, 400.0);
    assert_eq!(v.processes[0].sync_calls_per_s, 10.0);
    assert_eq!(v.processes[0].sync_total_s, 0.9);
    let v = build(Some(&before), &after, None, SortKey::ThrottleTime);
    assert_eq!(v.processes[0].comm, "dd");
    assert_eq!(v.processes[0].throttle_ms_per_s, 500.0);
    let v = build(Some(&before), &after, None, SortKey::SyncCalls);
    assert_eq!(v.processes[0].comm, "fsyncer");
    assert_eq!(SortKey::SyncCalls.next(), SortKey::SyncTime);
}

#[test]
fn device_filter_keeps_idle_device_and_drops_others() {
    let (before, after) = pair();
    let v = build(Some(&before), &after, Some("sda"), SortKey::SyncTime);
    assert_eq!(v.devices.len(), 1);
    assert_eq!(v.devices[0].device, "sda");
    assert!(v.flusher.is_empty() && v.latency.is_empty());
}

#[test]
fn counter_reset_counts_as_no_increase() {
    let (before, after) = pair();
    // Swapped: every counter went down, as after a daemon restart.
    let mut old = after.clone();
    old.at = before.at;
    let mut new = before.clone();
    new.at = after.at;
    let v = build(Some(&old), &new, None, SortKey::SyncTime);
    assert_eq!(v.devices[0].write_bps, Some(0.0));
    assert!(v.flusher.is_empty());
}

#[test]
fn basic_detail_gives_a_device_row_with_percentiles_and_kind_rows_with_means() {
    let t0 = Instant::now();
    let before = snapshot(
        t0,
        r#"
wbscope_block_request_latency_seconds_bucket{device="loop3",le="0.004"} 0
wbscope_block_request_latency_seconds_bucket{device="loop3",le="+Inf"} 0
wbscope_block_requests_total{device="loop3",op="write",sync="true"} 10
wbscope_block_requests_total{device="loop3",op="flush",sync="false"} 0
wbscope_block_request_time_seconds_total{device="loop3",op="write",sync="true"} 1
wbscope_block_request_time_seconds_total{device="loop3",op="flush",sync="false"} 0
"#,
        Vec::new(),
    );
    let after = snapshot(
        t0 + Duration::from_secs(2),
        r#"
wbscope_block_request_latency_seconds_bucket{device="loop3",le="0.004"} 6
wbscope_block_request_latency_seconds_bucket{device="loop3",le="+Inf"} 8
wbscope_block_requests_total{device="loop3",op="write",sync="true"} 16
wbscope_block_requests_total{device="loop3",op="flush",sync="false"} 2
wbscope_block_request_time_seconds_total{device="loop3",op="write",sync="true"} 1.012
wbscope_block_request_time_seconds_total{device="loop3",op="flush",sync="false"} 0.02
"#,
        Vec::new(),
    );
    let v = build(Some(&before), &after, None, SortKey::SyncTime);
    let find = |op: &str| v.latency.iter().find(|l| l.op == op).unwrap();
    assert_eq!(v.latency.len(), 3, "{:?}", v.latency);
    let device = find("");
    assert_eq!(device.requests_per_s, 4.0);
    assert!(device.p50.is_some() && device.mean.is_none());
    let write = find("write");
    assert_eq!(write.requests_per_s, 3.0);
    assert!(write.p50.is_none());
    assert!((write.mean.unwrap() - 0.002).abs() < 1e-9);
    let flush = find("flush");
    assert!((flush.mean.unwrap() - 0.01).abs() < 1e-9);
}
