//! `[stalls] log_events`: a real fsync stall on a throttled loop device reaches the daemon's log
//! stream as one JSON record of the documented schema (docs/stall-records.md), with the
//! numbers of the call the test made.

use std::{
    io::Write,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;
use testkit::{FsKind, LoopFs, scrape, wait_until};

use super::{binary, free_addr, wait_with_timeout};

/// 8 MiB at 2 MiB/s: the fsync takes about four seconds.
const THROTTLE_BPS: u64 = 2 << 20;
const DIRTY_BYTES: usize = 8 << 20;

#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn stall_events_are_logged_as_json_records() {
    let fs = LoopFs::new(FsKind::Ext4, 64).expect("loop filesystem");
    fs.throttle_write_bps(THROTTLE_BPS).expect("throttle");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("wbscope.toml");
    std::fs::write(
        &config,
        "log_format = \"json\"\n[stalls]\nthreshold = \"500ms\"\nlog_events = true\n\
         socket = \"\"\n",
    )
    .expect("write config");
    let addr = free_addr();
    let child = Command::new(binary())
        .args(["run", "--listen", &addr.to_string(), "--config"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn wbscope");
    let pid = child.id();
    wait_until(Duration::from_secs(20), Duration::from_millis(100), || {
        scrape(addr).ok()
    })
    .expect("/metrics answers");

    let mut file = std::fs::File::create(fs.mountpoint().join("stalled")).expect("create");
    file.write_all(&vec![0x5a; DIRTY_BYTES]).expect("write");
    let t0 = Instant::now();
    file.sync_all().expect("fsync");
    let took = t0.elapsed();
    drop(file);
    // The record is written when the event reaches the daemon, milliseconds after its end.
    std::thread::sleep(Duration::from_secs(1));
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    let out = wait_with_timeout(child, Duration::from_secs(30));
    assert!(out.status.success(), "wbscope exited with {}", out.status);
    let log = String::from_utf8_lossy(&out.stderr);

    let records: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["msg"] == "stall" && r["caller"] == "wbscope::stall")
        .collect();
    // SAFETY: gettid(2) has no preconditions.
    let tid = unsafe { libc::gettid() }.to_string();
    let ours: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "fsync" && r["device"] == fs.loop_name() && r["pid"] == tid)
        .collect();
    assert_eq!(ours.len(), 1, "one record of our fsync; the log:\n{log}");
    let r = ours[0];
    assert_eq!(r["schema"], "1", "{r}");
    assert_eq!(r["level"], "info", "{r}");
    assert_eq!(r["tgid"], std::process::id().to_string(), "{r}");
    let number = |key: &str| -> u64 {
        r[key]
            .as_str()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{key} is not a number in {r}"))
    };
    // The kernel measured the same call the test timed: within the time around the syscall.
    let duration = Duration::from_nanos(number("duration_ns"));
    assert!(
        duration <= took && took - duration < Duration::from_millis(50),
        "the record says {duration:?}, the test timed {took:?}"
    );
    assert!(number("inode") > 0, "{r}");
    for part in ["writeback_wait_ns", "throttle_ns", "journal_ns", "flush_ns"] {
        assert!(number(part) <= number("duration_ns"), "{part} in {r}");
    }
    // A stall of seconds gets a context: the device wrote at least what the test dirtied.
    assert!(
        number("device_written_bytes") >= DIRTY_BYTES as u64,
        "device_written_bytes in {r}"
    );
    let context: Value =
        serde_json::from_str(r["context"].as_str().expect("context")).expect("context is JSON");
    assert_eq!(
        context["device_written_bytes"].as_u64(),
        Some(number("device_written_bytes")),
        "{r}"
    );
    let verdict = r["verdict"].as_str().expect("verdict");
    assert!(
        verdict.starts_with("fsync ") && verdict.contains(fs.loop_name()),
        "verdict {verdict:?}"
    );
    assert!(
        !r["cause"].as_str().unwrap_or("").is_empty()
            && !r["dominant_source"].as_str().unwrap_or("").is_empty(),
        "{r}"
    );
}
