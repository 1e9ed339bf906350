//! `GET /top/processes`: the kernel's per-process totals for `wbscope top`, checked against the
//! same process's stall event and the device's throttling histogram.

use std::{process::Command, time::Instant};

use serde_json::Value;
use testkit::{FsKind, LoopFs, metrics::http_get};

use crate::harness::{TestDaemon, wbscope_lines};

const MIB: u64 = 1 << 20;

fn u(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

/// A child `dd conv=fsync` writes 32 MiB against an 8 MiB strict bdi dirty limit on a 4 MiB/s
/// device, so it is throttled while writing and its one fsync takes seconds. Its row in
/// `/top/processes` must name it, count exactly one sync call, hold exactly the fsync duration
/// of its stall event (both come from the same two timestamps in the kernel), and hold the
/// device's whole throttling pause sum (only this dd dirties pages on the device); the two
/// totals together cannot exceed dd's wall time.
#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn process_totals_match_the_stall_event_and_the_pause_histogram() {
    let fs = LoopFs::new(FsKind::Ext4, 256).expect("loop filesystem");
    fs.throttle_write_bps(4 * MIB).expect("throttle");
    fs.limit_bdi_dirty(8 * MIB).expect("bdi dirty limit");
    let device = fs.loop_name().to_owned();
    let labels = [("device", device.as_str())];
    let pause_sum = "wbscope_dirty_throttle_pause_seconds_sum";
    let daemon = TestDaemon::start();
    let before = daemon.scrape();

    let started = Instant::now();
    let child = Command::new("dd")
        .args([
            "if=/dev/zero",
            "bs=1M",
            "count=32",
            "conv=fsync",
            "status=none",
        ])
        .arg(format!("of={}", fs.mountpoint().join("top").display()))
        .spawn()
        .expect("spawn dd");
    let pid = child.id();
    let status = child.wait_with_output().expect("wait for dd").status;
    let wall = started.elapsed();
    assert!(status.success());

    let after = daemon.scrape();
    let paused_s = after.sum(pause_sum, &labels) - before.sum(pause_sum, &labels);
    let body = http_get(daemon.addr(), "/top/processes").expect("GET /top/processes");
    let processes: Value = serde_json::from_str(&body).expect("JSON");
    let row = processes["processes"]
        .as_array()
        .expect("processes array")
        .iter()
        .find(|p| u(p, "tgid") == u64::from(pid))
        .unwrap_or_else(|| panic!("dd {pid} missing from {body}"))
        .clone();
    let stalls: Value = serde_json::from_str(
        &http_get(daemon.addr(), &format!("/stalls?pid={pid}")).expect("GET /stalls"),
    )
    .expect("JSON");
    let fsync = stalls["events"]
        .as_array()
        .expect("events array")
        .iter()
        .find(|e| e["kind"] == "fsync")
        .unwrap_or_else(|| panic!("no fsync stall of dd {pid}: {stalls}"))
        .clone();
    let (sync_ns, throttle_ns) = (u(&row, "sync_call_ns"), u(&row, "throttle_ns"));
    eprintln!(
        "dd {pid} on {device}: row {row}; fsync stall {} ns; device pauses {paused_s:.6} s; \
         wall {:.3} s",
        u(&fsync, "duration_ns"),
        wall.as_secs_f64()
    );
    assert_eq!(row["comm"], "dd");
    assert_eq!(u(&row, "sync_calls"), 1);
    assert_eq!(sync_ns, u(&fsync, "duration_ns"));
    assert!(
        throttle_ns > 0,
        "dd was not throttled: {}",
        wbscope_lines(&after)
    );
    // The histogram's _sum is the same nanoseconds, divided by 1e9 as a float.
    assert!(
        (throttle_ns as f64 / 1e9 - paused_s).abs() < 1e-6,
        "row {throttle_ns} ns, histogram {paused_s} s"
    );
    assert!(sync_ns + throttle_ns < wall.as_nanos() as u64);
}
