//! Stall context and verdict: an fsync behind `dd …; sync` names sync's WB_SYNC_NONE flusher
//! work, queued by the `sync` process, as the dominant source of the device's writes.
//!
//! The slow device is a loop device whose image lives on a second, blk-throttled loop device and
//! is accessed with direct I/O: the upper device itself has no throttle rule, so its bios are
//! traced where they are submitted (a blk-throttle rule on it would defer every bio to the
//! throttle worker; see docs/kernel-hooks.md), and each of its writes completes at the lower
//! device's throttled pace.

use std::{
    io::Write,
    process::Command,
    time::{Duration, Instant},
};

use serde_json::Value;
use testkit::{FsKind, LoopFs, metrics::http_get};
use wbscope::{Config, families::stall_events::StallsConfig};

use crate::harness::TestDaemon;

const MIB: u64 = 1 << 20;
const LOWER_BPS: u64 = 48 * MIB;

pub(crate) fn diskstat_written(dev: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/sys/block/{dev}/stat")).expect("block stat");
    let fields: Vec<u64> = text
        .split_whitespace()
        .map(|f| f.parse().expect("number"))
        .collect();
    fields[6] * 512
}

/// An ext4 filesystem on a loop device backed (direct I/O) by a file on a throttled ext4 loop
/// device. The upper one is dropped first (declared second).
pub(crate) fn slow_device() -> (LoopFs, LoopFs) {
    slow_device_bps(LOWER_BPS)
}

/// [`slow_device`] writing at `bps`; the throttle is set once the upper filesystem is made.
pub(crate) fn slow_device_bps(bps: u64) -> (LoopFs, LoopFs) {
    let lower = LoopFs::new(FsKind::Ext4, 2048).expect("lower loop filesystem");
    let saved = std::env::var_os("TMPDIR");
    // SAFETY: kernel tests run on one thread (`--test-threads=1`): nothing reads the
    // environment concurrently.
    unsafe { std::env::set_var("TMPDIR", lower.mountpoint()) };
    let upper = LoopFs::new(FsKind::Ext4, 1024);
    // SAFETY: as above.
    unsafe {
        match saved {
            Some(v) => std::env::set_var("TMPDIR", v),
            None => std::env::remove_var("TMPDIR"),
        }
    }
    let upper = upper.expect("upper loop filesystem");
    // ext4 zeroes a new filesystem's inode tables from a kernel thread (ext4lazyinit) after the
    // mount; at this device's pace that goes on for minutes and shows up, rightly, as writes of
    // source `other` in a stall's window. The tests want only their own load on the device.
    upper
        .remount("noinit_itable")
        .expect("remount noinit_itable");
    let status = Command::new("losetup")
        .args(["--direct-io=on", &upper.device_path().to_string_lossy()])
        .status()
        .expect("losetup");
    assert!(status.success(), "losetup --direct-io=on");
    lower.throttle_write_bps(bps).expect("throttle");
    (lower, upper)
}

pub(crate) fn settle(dev: &str) {
    let mut last = diskstat_written(dev);
    for _ in 0..60 {
        std::thread::sleep(Duration::from_secs(1));
        let now = diskstat_written(dev);
        if now == last {
            return;
        }
        last = now;
    }
}

fn comm_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

pub(crate) fn u(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// fsync of a fresh 4 MiB file while `dd` (256 MiB) then `sync` run on the slow device: the
/// event's verdict names `flusher work none:sync queued by sync[<pid>]` as the dominant source
/// with at least half the device's bytes in the stall; the bytes by source over the whole run
/// equal the device's own count within 2 %; `trace --summary` groups the fsync under that
/// source.
#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn fsync_behind_sync_names_syncs_flusher_work() {
    let (_lower, fs) = slow_device();
    let dev = fs.loop_name().to_owned();
    let dir = tempfile::tempdir().expect("tempdir");
    let daemon = TestDaemon::start_with(Config {
        listen: "127.0.0.1:0".parse().expect("loopback address"),
        ignore_own_io: false,
        stalls: StallsConfig {
            threshold_ns: 100_000_000,
            window_ns: 600_000_000_000,
            max_events: 1000,
            socket: Some(dir.path().join("stalls.sock")),
            log_events: false,
        },
        ..Config::default()
    });
    settle(&dev);
    let before = daemon.scrape();
    let written_before = diskstat_written(&dev);

    // `exec sync`: the sync process is the shell's pid, so the test knows the queuer's pid.
    let mut sh = Command::new("sh")
        .arg("-c")
        .arg("dd if=/dev/zero of=big bs=1M count=256 status=none && exec sync")
        .current_dir(fs.mountpoint())
        .spawn()
        .expect("spawn sh");
    let sync_pid = sh.id();
    let deadline = Instant::now() + Duration::from_secs(30);
    while comm_of(sync_pid) != "sync" {
        assert!(Instant::now() < deadline, "sync never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(500));
    let path = fs.mountpoint().join("own");
    let mut f = std::fs::File::create(&path).expect("create");
    f.write_all(&vec![0x5a_u8; 4 * MIB as usize])
        .expect("write");
    let t0 = Instant::now();
    f.sync_all().expect("fsync");
    let fsync_took = t0.elapsed();
    assert!(sh.wait().expect("sync").success());
    settle(&dev);
    let after = daemon.scrape();
    let written = (diskstat_written(&dev) - written_before) as f64;
    let total = after.sum(
        "wbscope_device_write_bytes_total",
        &[("device", dev.as_str())],
    ) - before.sum(
        "wbscope_device_write_bytes_total",
        &[("device", dev.as_str())],
    );
    let error = (total - written).abs() / written;
    eprintln!(
        "whole run: sources {total:.0} bytes, diskstat {written:.0} ({:.2}% off); fsync took {fsync_took:?}",
        100.0 * error
    );
    assert!(error <= 0.02, "{total} vs {written}");

    let body = http_get(daemon.addr(), "/stalls?since=600").expect("/stalls");
    let reply: Value = serde_json::from_str(&body).expect("JSON");
    let me = u64::from(std::process::id());
    let events = reply["events"].as_array().expect("events");
    let ev = events
        .iter()
        .find(|e| e["kind"] == "fsync" && u(e, "tgid") == me && e["device"] == dev.as_str())
        .unwrap_or_else(|| panic!("no fsync event of ours in {events:?}"));
    let verdict = ev["verdict"].as_str().expect("verdict");
    eprintln!("verdict: {verdict}");
    eprintln!("context: {}", ev["context"]);
    let expected = format!("flusher work none:sync queued by sync[{sync_pid}]");
    assert!(verdict.contains(&expected), "{verdict} lacks {expected}");
    let ctx = &ev["context"];
    let top = &ctx["sources"][0];
    assert_eq!(
        (&top["source"], &top["sync_mode"], &top["reason"]),
        (
            &Value::from("flusher"),
            &Value::from("none"),
            &Value::from("sync")
        ),
        "{ctx}"
    );
    assert!(top["share"].as_f64().expect("share") >= 0.5, "{ctx}");
    let sum: u64 = ctx["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .map(|s| u(s, "bytes"))
        .sum();
    assert_eq!(sum, u(ctx, "device_written_bytes"), "{ctx}");
    let works = ctx["flusher_work"].as_array().expect("work items");
    assert!(
        works.iter().any(|w| w["sync_mode"] == "none"
            && w["reason"] == "sync"
            && u(w, "queued_by_pid") == u64::from(sync_pid)
            && w["queued_by_comm"] == "sync"),
        "{ctx}"
    );
    assert!(ctx["bdi_dirty_start_bytes"].is_u64(), "{ctx}");

    // `trace --summary` over the flight recorder groups the fsync under its cause and source.
    let out = Command::new(env!("CARGO_BIN_EXE_wbscope"))
        .args([
            "trace",
            "--summary",
            "10m",
            "--json",
            "--device",
            &dev,
            "--url",
        ])
        .arg(format!("http://{}", daemon.addr()))
        .output()
        .expect("wbscope trace --summary");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let groups: Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    eprintln!("summary: {groups}");
    let group = groups
        .as_array()
        .expect("groups")
        .iter()
        .find(|g| g["kind"] == "fsync" && g["dominant_source"] == expected.as_str())
        .unwrap_or_else(|| panic!("no fsync group behind {expected} in {groups}"));
    assert_eq!(group["cause"], ev["cause"]);
    assert!(u(group, "count") >= 1 && u(group, "max_ns") >= u(ev, "duration_ns"));
}
