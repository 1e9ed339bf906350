//! fsync / fdatasync latency by device.

use std::time::Duration;

use testkit::{FsKind, LoopFs, workload};
use wbscope::Config;

use crate::harness::{TestDaemon, wbscope_lines};

const CALLS: usize = 50;
const MIB: u64 = 1 << 20;
/// Slow enough that every call waits on the device for tens of milliseconds, so the in-kernel
/// duration dominates the test's own timing overhead.
const THROTTLE_BPS: u64 = 16 * MIB;

/// 50 × (write 1 MiB + sync call) on a throttled loop device: the count for that device rises by
/// exactly 50 and the sum matches the durations the test measured to within 10%.
fn counts_every_call(
    kind: FsKind,
    syscall: &str,
    call: fn(&std::path::Path, u64) -> testkit::Result<Duration>,
) {
    let fs = LoopFs::new(kind, 512).expect("loop filesystem");
    fs.throttle_write_bps(THROTTLE_BPS).expect("throttle");
    let device = fs.loop_name().to_owned();
    let daemon = TestDaemon::start();
    let labels = [("syscall", syscall), ("device", device.as_str())];
    let count = "wbscope_sync_call_duration_seconds_count";
    let sum = "wbscope_sync_call_duration_seconds_sum";
    let before = daemon.scrape();

    let mut measured = Duration::ZERO;
    for i in 0..CALLS {
        let path = fs.mountpoint().join(format!("f{i}"));
        measured += call(&path, MIB).expect("write and sync");
    }

    let after = daemon.wait_for("all calls to be counted", Duration::from_secs(5), |s| {
        s.sum(count, &labels) - before.sum(count, &labels) >= CALLS as f64
    });
    let counted = after.sum(count, &labels) - before.sum(count, &labels);
    assert_eq!(counted, CALLS as f64, "{}", wbscope_lines(&after));
    let kernel_sum = after.sum(sum, &labels) - before.sum(sum, &labels);
    let ratio = kernel_sum / measured.as_secs_f64();
    eprintln!(
        "{syscall} on {device}: {counted} calls, kernel sum {kernel_sum:.3} s, measured {:.3} s, ratio {ratio:.4}",
        measured.as_secs_f64()
    );
    assert!(
        (0.9..=1.1).contains(&ratio),
        "sum ratio {ratio} outside 10%"
    );
    // The buckets are cumulative and end at the count.
    let inf = after.sum(
        "wbscope_sync_call_duration_seconds_bucket",
        &[
            ("syscall", syscall),
            ("device", device.as_str()),
            ("le", "+Inf"),
        ],
    );
    assert_eq!(inf, after.sum(count, &labels));
}

#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn fsync_on_throttled_ext4_is_counted_exactly() {
    counts_every_call(FsKind::Ext4, "fsync", workload::write_and_fsync);
}

#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn fdatasync_on_throttled_xfs_is_counted_exactly() {
    counts_every_call(FsKind::Xfs, "fdatasync", workload::write_and_fdatasync);
}

/// With `ignore_own_io` (the default), the daemon's own process is invisible to the probes.
#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn own_io_is_ignored_by_default() {
    let fs = LoopFs::new(FsKind::Ext4, 64).expect("loop filesystem");
    let device = fs.loop_name().to_owned();
    let daemon = TestDaemon::start_with(Config {
        listen: "127.0.0.1:0".parse().expect("loopback address"),
        ..Config::default()
    });
    for i in 0..5 {
        workload::write_and_fsync(&fs.mountpoint().join(format!("own{i}")), 64 * 1024)
            .expect("write and fsync");
    }
    // A child process is not the daemon: its fsync must be counted, which also proves the
    // probes are live while this process's calls are being ignored.
    let file = fs.mountpoint().join("child");
    let status = std::process::Command::new("dd")
        .args([
            "if=/dev/zero",
            "bs=64k",
            "count=1",
            "conv=fsync",
            "status=none",
        ])
        .arg(format!("of={}", file.display()))
        .status()
        .expect("run dd");
    assert!(status.success());
    let labels = [("syscall", "fsync"), ("device", device.as_str())];
    let s = daemon.wait_for("the child's fsync", Duration::from_secs(5), |s| {
        s.sum("wbscope_sync_call_duration_seconds_count", &labels) >= 1.0
    });
    assert_eq!(
        s.sum("wbscope_sync_call_duration_seconds_count", &labels),
        1.0,
        "only the child's fsync may be counted:\n{}",
        wbscope_lines(&s)
    );
}
