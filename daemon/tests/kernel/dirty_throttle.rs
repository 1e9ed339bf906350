//! Dirty throttling pauses (`balance_dirty_pages`) by device, against an independent bpftrace sum.

use std::{
    fs,
    process::{Child, Command, ExitStatus},
    time::{Duration, Instant},
};

use testkit::{FsKind, LoopFs};

use crate::{
    bpftrace::Bpftrace,
    harness::{TestDaemon, wbscope_lines},
};

const MIB: u64 = 1 << 20;

/// dd takes about 8 s (32 MiB at 4 MiB/s), also in an emulated VM; far past that it is stuck.
const DD_LIMIT: Duration = Duration::from_secs(120);

/// A 32 MiB buffered write against an 8 MiB strict per-bdi dirty limit on a 4 MiB/s device: the
/// writer is throttled, the pause histogram for the device counts the same pauses an independent
/// bpftrace script counts, its `_sum` is within 15% of that script's sum of `pause`, and it is
/// less than dd's wall time (one thread cannot sleep longer than it ran).
///
/// Only this test's writer dirties pages on this bdi, so every `balance_dirty_pages` event for it
/// is the writer's, and both tools see them all (each aggregates in the kernel).
#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn throttled_writer_pauses_match_an_independent_trace() {
    let fs = LoopFs::new(FsKind::Ext4, 256).expect("loop filesystem");
    fs.throttle_write_bps(4 * MIB).expect("throttle");
    // The fixture restores strict_limit and max_ratio (normally 100) on drop.
    fs.limit_bdi_dirty(8 * MIB).expect("bdi dirty limit");
    let device = fs.loop_name().to_owned();
    let daemon = TestDaemon::start();
    let labels = [("device", device.as_str())];
    let count = "wbscope_dirty_throttle_pause_seconds_count";
    let sum = "wbscope_dirty_throttle_pause_seconds_sum";
    let before = daemon.scrape();

    // `pause` > 0 only, as wbscope counts; the event records it in milliseconds.
    let tracer = Bpftrace::start(&format!(
        "tracepoint:writeback:balance_dirty_pages \
         /args->bdi == \"{}\" && args->pause > 0/ \
         {{ @pause_ms = sum(args->pause); @pauses = count(); }}",
        fs.dev_string()
    ));
    let started = Instant::now();
    let dd = Command::new("dd")
        .args(["if=/dev/zero", "bs=1M", "count=32", "status=none"])
        .arg(format!("of={}", fs.mountpoint().join("bdp").display()))
        .spawn()
        .expect("run dd");
    let status = wait_or_explain(dd, &fs);
    let dd_time = started.elapsed();
    assert!(status.success());
    let traced = tracer.finish();
    let traced_ms = traced.get("pause_ms").copied().unwrap_or(0);
    let traced_count = traced.get("pauses").copied().unwrap_or(0);

    let after = daemon.scrape();
    let counted = after.sum(count, &labels) - before.sum(count, &labels);
    let kernel_sum = after.sum(sum, &labels) - before.sum(sum, &labels);
    let traced_sum = traced_ms as f64 / 1e3;
    let ratio = kernel_sum / traced_sum;
    eprintln!(
        "{device}: {counted} pauses, sum {kernel_sum:.3} s; bpftrace {traced_count} pauses, \
         sum {traced_sum:.3} s; ratio {ratio:.4}; dd took {:.2} s",
        dd_time.as_secs_f64()
    );
    assert!(counted > 0.0, "{}", wbscope_lines(&after));
    assert_eq!(counted, traced_count as f64, "{}", wbscope_lines(&after));
    assert!(
        (0.85..=1.15).contains(&ratio),
        "sum ratio {ratio} outside 15%"
    );
    assert!(
        kernel_sum < dd_time.as_secs_f64(),
        "dd slept {kernel_sum} s in {} s",
        dd_time.as_secs_f64()
    );
}

/// Waits up to [`DD_LIMIT`] for `dd`; past it, kills dd and fails with what it is stuck on (its
/// kernel stack) and the device's writeback state, instead of hanging the test run.
fn wait_or_explain(mut dd: Child, fs: &LoopFs) -> ExitStatus {
    let deadline = Instant::now() + DD_LIMIT;
    loop {
        if let Some(status) = dd.try_wait().expect("wait for dd") {
            return status;
        }
        if Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let read = |path: String| fs::read_to_string(&path).unwrap_or_else(|e| format!("{path}: {e}"));
    let stack = read(format!("/proc/{}/stack", dd.id()));
    let bdi = read(format!("/sys/kernel/debug/bdi/{}/stats", fs.dev_string()));
    let _ = dd.kill();
    let _ = dd.wait();
    panic!("dd still running after {DD_LIMIT:?}; its kernel stack:\n{stack}\nthe bdi:\n{bdi}");
}
