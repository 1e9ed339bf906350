//! Verdicts of the seed situations: a throttled writer (throttling, with the bdi's limit and
//! dirty bytes), a metadata-heavy fsync (the journal commit), a checkpoint writer
//! (sync_file_range(WRITE) then fsync: submissions as `sync_file_range`/`none`, the fsync waits
//! on that writeback), an io_uring fsync (context and verdict, its bios as `io_uring`).

use std::{io::Write, os::fd::AsFd, path::Path, process::Command, time::Duration};

use serde_json::Value;
use testkit::{FsKind, LoopFs, metrics::http_get, workload};
use wbscope::{Config, families::stall_events::StallsConfig};

use crate::{
    harness::TestDaemon,
    stall_context::{settle, slow_device, u},
};

const MIB: u64 = 1 << 20;

fn daemon(threshold_ns: u64, dir: &Path) -> TestDaemon {
    TestDaemon::start_with(Config {
        listen: "127.0.0.1:0".parse().expect("loopback address"),
        ignore_own_io: false,
        stalls: StallsConfig {
            threshold_ns,
            window_ns: 600_000_000_000,
            max_events: 10_000,
            socket: Some(dir.join("stalls.sock")),
            log_events: false,
        },
        ..Config::default()
    })
}

/// The flight recorder's events of `kind` on `device`.
fn events(daemon: &TestDaemon, kind: &str, device: &str) -> Vec<Value> {
    // Events reach the recorder within milliseconds of their end.
    std::thread::sleep(Duration::from_millis(300));
    let body = http_get(daemon.addr(), "/stalls?since=600").expect("/stalls");
    let reply: Value = serde_json::from_str(&body).expect("JSON");
    reply["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == kind && e["device"] == device)
        .cloned()
        .collect()
}

fn longest(events: &[Value]) -> &Value {
    events
        .iter()
        .max_by_key(|e| u(e, "duration_ns"))
        .expect("at least one event")
}

/// A 32 MiB dd against an 8 MiB strict bdi limit on a 4 MiB/s device: its throttling pauses are
/// events whose cause is `throttling` and whose verdict names the bdi's dirty bytes and its
/// limit, the limit being the 8 MiB cap (the kernel's BdiDirtyThresh under it).
#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn throttled_writer_verdict_is_throttling_with_the_limit() {
    let fs = LoopFs::new(FsKind::Ext4, 256).expect("loop filesystem");
    fs.throttle_write_bps(4 * MIB).expect("throttle");
    fs.limit_bdi_dirty(8 * MIB).expect("bdi dirty limit");
    let dev = fs.loop_name().to_owned();
    let dir = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(10_000_000, dir.path());
    // The bdi is sampled once the device has written something since the daemon started.
    std::fs::write(fs.mountpoint().join("warm"), b"x").expect("write");
    Command::new("sync").status().expect("sync");
    std::thread::sleep(Duration::from_millis(300));
    let status = Command::new("dd")
        .args(["if=/dev/zero", "bs=1M", "count=32", "status=none"])
        .arg(format!("of={}", fs.mountpoint().join("bdp").display()))
        .status()
        .expect("dd");
    assert!(status.success());
    let pauses = events(&daemon, "dirty_throttle", &dev);
    assert!(!pauses.is_empty(), "no throttling events on {dev}");
    let with_limit: Vec<&Value> = pauses
        .iter()
        .filter(|e| e["context"]["bdi_dirty_limit_bytes"].is_u64())
        .collect();
    let ev = with_limit.last().expect("a pause with the bdi's state");
    let verdict = ev["verdict"].as_str().expect("verdict");
    eprintln!(
        "{} pauses, {} with the bdi state; e.g. {verdict}",
        pauses.len(),
        with_limit.len()
    );
    assert_eq!(ev["cause"], "throttling");
    assert!(
        verdict.contains("throttled in balance_dirty_pages (bdi dirty ")
            && verdict.contains(", limit "),
        "{verdict}"
    );
    let limit = u(&ev["context"], "bdi_dirty_limit_bytes");
    let dirty = u(&ev["context"], "bdi_dirty_end_bytes");
    eprintln!("limit {limit} bytes, dirty {dirty} bytes");
    // BdiDirtyThresh is the kernel's own computation under the cap, in whole kB: a few kB over.
    assert!(
        limit > 0 && limit <= 8 * MIB + 8 * MIB / 20,
        "limit {limit}"
    );
    assert!(dirty <= 16 * MIB, "dirty {dirty}");
}

/// 8000 new files in one transaction (`commit=120`), then fsync of one of them on a 1 MiB/s
/// slow device: the commit writes the transaction's metadata, and the fsync's verdict is the journal
/// commit, and the device's writes meanwhile are the journal's.
#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn metadata_heavy_fsync_verdict_is_the_journal_commit() {
    // blk-throttle lets a device that was idle write a burst, which a commit of a few MiB fits
    // in: the slow device's pace holds from the first byte.
    let (_lower, fs) = crate::stall_context::slow_device_bps(MIB);
    let dev = fs.loop_name().to_owned();
    let dir = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(100_000_000, dir.path());
    // One transaction for all the creates: no periodic commit in between.
    fs.remount("commit=120").expect("remount");
    Command::new("sync").status().expect("sync");
    let many = fs.mountpoint().join("many");
    std::fs::create_dir(&many).expect("mkdir");
    for i in 0..8_000 {
        std::fs::File::create(many.join(format!("f{i}"))).expect("create");
    }
    let f = std::fs::File::create(many.join("last")).expect("create");
    let written = crate::stall_context::diskstat_written(&dev);
    let t0 = std::time::Instant::now();
    f.sync_all().expect("fsync");
    eprintln!(
        "fsync took {:?}, the device wrote {} bytes meanwhile",
        t0.elapsed(),
        crate::stall_context::diskstat_written(&dev) - written
    );
    let ev = longest(&events(&daemon, "fsync", &dev)).clone();
    eprintln!("verdict: {}", ev["verdict"]);
    assert_eq!(ev["cause"], "journal_commit", "{ev}");
    assert!(u(&ev, "journal_ns") * 2 >= u(&ev, "duration_ns"), "{ev}");
    assert!(
        ev["verdict"]
            .as_str()
            .expect("verdict")
            .contains("waiting on the journal commit")
    );
    // The commit's own writes (jbd2) are what the device was busy with.
    assert_eq!(ev["context"]["sources"][0]["source"], "journal", "{ev}");
}

/// A checkpoint: 64 MiB dirtied, sync_file_range(WRITE) over it, then fsync, on the slow
/// device. The submissions show the data under caller `sync_file_range`, WB_SYNC_NONE, and the
/// device's writes under source `sync_file_range`, byte for byte. The final fsync waits on
/// writeback, behind what sync_file_range queued before it (the context's `backlog`).
#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn checkpoint_writeback_counts_under_sync_file_range() {
    // 16 MiB/s: what sync_file_range leaves in flight takes the fsync about a second.
    let (_lower, fs) = crate::stall_context::slow_device_bps(16 * MIB);
    let dev = fs.loop_name().to_owned();
    let dir = tempfile::tempdir().expect("tempdir");
    // A low threshold: the final fsync waits only for what sync_file_range left in flight.
    let daemon = daemon(1_000_000, dir.path());
    settle(&dev);
    let path = fs.mountpoint().join("ckpt");
    workload::write_file(&path, 64 * MIB, 1 << 20).expect("dirty");
    let before = daemon.scrape();
    let file = workload::open_for_write(&path).expect("open");
    workload::sync_file_range(file.as_fd(), 0, 0, workload::SFR_WRITE).expect("sfr");
    file.sync_all().expect("fsync");
    settle(&dev);
    let after = daemon.scrape();
    let rise =
        |name: &str, labels: &[(&str, &str)]| after.sum(name, labels) - before.sum(name, labels);
    let submitted = rise(
        "wbscope_writeback_submitted_bytes_total",
        &[
            ("device", dev.as_str()),
            ("caller", "sync_file_range"),
            ("sync_mode", "none"),
        ],
    );
    let by_sfr = rise(
        "wbscope_device_write_bytes_total",
        &[("device", dev.as_str()), ("source", "sync_file_range")],
    );
    eprintln!("submitted by sync_file_range/none {submitted:.0}, device writes by it {by_sfr:.0}");
    // Background writeback may take part of the 64 MiB before sync_file_range runs (on a busy
    // host it took half): what sync_file_range submitted is asserted to be the device's writes
    // by that source, to the byte.
    assert!(
        submitted >= MIB as f64,
        "sync_file_range submitted {submitted}"
    );
    assert_eq!(by_sfr, submitted);
    // The final fsync sleeps on the pages sync_file_range left under writeback: its verdict
    // names them, though they were queued before the call (how much is still in flight when it
    // starts depends on timing; that some is, at this device's pace, does not).
    let ev = longest(&events(&daemon, "fsync", &dev)).clone();
    eprintln!("verdict: {} (cause {})", ev["verdict"], ev["cause"]);
    assert_eq!(ev["cause"], "writeback_wait", "{ev}");
    assert_eq!(
        ev["context"]["backlog"][0]["source"], "sync_file_range",
        "{ev}"
    );
    assert!(u(&ev["context"], "bdi_writeback_start_bytes") > 0, "{ev}");
    assert!(
        ev["verdict"]
            .as_str()
            .expect("verdict")
            .contains("under writeback when it began, "),
        "{ev}"
    );
    assert!(
        ev["verdict"]
            .as_str()
            .expect("verdict")
            .contains("queued for sync_file_range"),
        "{ev}"
    );
}

/// An io_uring fsync of 64 MiB on the slow device: its event carries the context and a
/// verdict, and the device's writes during it are the io-wq worker's (`io_uring`).
#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn io_uring_fsync_has_context_and_verdict() {
    let (_lower, fs) = slow_device();
    let dev = fs.loop_name().to_owned();
    let dir = tempfile::tempdir().expect("tempdir");
    let helper = crate::sync_all_calls::build_uring_helper(dir.path());
    let daemon = daemon(100_000_000, dir.path());
    settle(&dev);
    let path = fs.mountpoint().join("uring");
    let mut f = std::fs::File::create(&path).expect("create");
    f.write_all(&vec![0x5a_u8; 64 * MIB as usize])
        .expect("write");
    drop(f);
    let took = crate::sync_all_calls::uring(&helper, &path, &["fsync"]);
    eprintln!("io_uring fsync took {took:?}");
    let ev = longest(&events(&daemon, "io_uring_fsync", &dev)).clone();
    let verdict = ev["verdict"].as_str().expect("verdict");
    eprintln!("verdict: {verdict}");
    assert!(ev["context"].is_object(), "{ev}");
    assert_eq!(ev["context"]["sources"][0]["source"], "io_uring", "{ev}");
    assert!(verdict.contains("% for io_uring"), "{verdict}");
    assert!(
        u(&ev["context"], "device_written_bytes") >= 32 * MIB,
        "{ev}"
    );
}
