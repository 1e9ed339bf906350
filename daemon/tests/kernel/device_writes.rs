//! Device write I/O by writeback source (`wbscope_device_write_bytes_total`): the bytes by
//! source add up to what the device itself counted as written (`/sys/block/<dev>/stat`), and
//! each source is the one the workload used.

use std::{process::Command, time::Duration};

use testkit::{FsKind, LoopFs, Scrape};

use crate::harness::TestDaemon;

const MIB: u64 = 1 << 20;
const BYTES: &str = "wbscope_device_write_bytes_total";
const BIOS: &str = "wbscope_device_write_bios_total";

/// Bytes the device completed as writes since boot: field 7 (write sectors) of
/// `/sys/block/<dev>/stat`, in 512-byte sectors whatever the device's block size.
fn diskstat_written(dev: &str) -> u64 {
    let path = format!("/sys/block/{dev}/stat");
    let text = std::fs::read_to_string(&path).expect("block stat");
    let fields: Vec<u64> = text
        .split_whitespace()
        .map(|f| f.parse().expect("number"))
        .collect();
    fields[6] * 512
}

fn rise(after: &Scrape, before: &Scrape, labels: &[(&str, &str)]) -> f64 {
    after.sum(BYTES, labels) - before.sum(BYTES, labels)
}

/// Runs `script` in `sh -c` inside the mount point and returns the bytes by source (and the
/// device's own count) for the window around it. The window ends once the device has been
/// idle (no change of its write count) for a second, so every queued bio has completed.
fn window(daemon: &TestDaemon, fs: &LoopFs, script: &str) -> (Scrape, Scrape, u64) {
    let dev = fs.loop_name().to_owned();
    // Let the mkfs/mount writes drain first.
    settle(&dev);
    let before = daemon.scrape();
    let written_before = diskstat_written(&dev);
    let status = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(fs.mountpoint())
        .status()
        .expect("sh");
    assert!(status.success(), "{script}: {status}");
    settle(&dev);
    let after = daemon.scrape();
    let written = diskstat_written(&dev) - written_before;
    (before, after, written)
}

/// Waits until the device's written-sector count stays put for a second (at most 20 s).
fn settle(dev: &str) {
    let mut last = diskstat_written(dev);
    for _ in 0..20 {
        std::thread::sleep(Duration::from_secs(1));
        let now = diskstat_written(dev);
        if now == last {
            return;
        }
        last = now;
    }
}

fn within(what: &str, counted: f64, expected: f64, tolerance: f64) {
    let error = (counted - expected).abs() / expected;
    eprintln!(
        "{what}: counted {counted:.0} bytes, expected {expected:.0} ({:.2}% off)",
        100.0 * error
    );
    assert!(error <= tolerance, "{what}: {counted} vs {expected}");
}

/// `dd …; sync`: every byte the device wrote is attributed (all sources together equal the
/// diskstat count within 2 %), and the dominant source is sync's WB_SYNC_NONE flusher work
/// (reason `sync`), as `sync(2)` hands its writeback to the flusher.
fn dd_sync(kind: FsKind) {
    let fs = LoopFs::new(kind, 512).expect("loop filesystem");
    let daemon = TestDaemon::start();
    let dev = fs.loop_name().to_owned();
    let (before, after, written) = window(
        &daemon,
        &fs,
        "dd if=/dev/urandom of=f bs=1M count=96 status=none && sync",
    );
    let device = [("device", dev.as_str())];
    let total = rise(&after, &before, &device);
    within(
        &format!("{kind:?} dd+sync, all sources"),
        total,
        written as f64,
        0.02,
    );
    let sync_none = rise(
        &after,
        &before,
        &[
            ("device", dev.as_str()),
            ("source", "flusher"),
            ("sync_mode", "none"),
            ("reason", "sync"),
        ],
    );
    eprintln!(
        "{kind:?}: flusher none:sync wrote {:.1} MiB of {:.1} MiB",
        sync_none / MIB as f64,
        total / MIB as f64
    );
    assert!(
        sync_none >= 0.5 * total && sync_none >= 90.0 * MIB as f64,
        "flusher none:sync {sync_none} of {total}"
    );
    let bios = after.sum(BIOS, &device) - before.sum(BIOS, &device);
    assert!(bios >= 1.0 && bios * 512.0 <= total, "{bios} bios");
}

#[test]
#[ignore = "needs root: run through `cargo xtask test`"]
fn ext4_dd_sync_bytes_match_diskstat() {
    dd_sync(FsKind::Ext4);
}

#[test]
#[ignore = "needs root: run through `cargo xtask test`"]
fn xfs_dd_sync_bytes_match_diskstat() {
    dd_sync(FsKind::Xfs);
}

/// `dd oflag=direct` writes as `direct`, and a file's `sync_file_range(WRITE)` then `fsync` as
/// `sync_file_range` and `fsync`; their bytes are the file's, and the total matches diskstat.
#[test]
#[ignore = "needs root: run through `cargo xtask test`"]
fn direct_and_sync_file_range_sources() {
    let fs = LoopFs::new(FsKind::Ext4, 512).expect("loop filesystem");
    let daemon = TestDaemon::start();
    let dev = fs.loop_name().to_owned();
    let (before, after, written) = window(
        &daemon,
        &fs,
        "dd if=/dev/urandom of=d bs=1M count=16 oflag=direct status=none",
    );
    let source = |s: &'static str| [("device", dev.as_str()), ("source", s)];
    let direct = rise(&after, &before, &source("direct"));
    within("dd oflag=direct", direct, (16 * MIB) as f64, 0.0);
    within(
        "dd oflag=direct, all sources",
        rise(&after, &before, &[("device", dev.as_str())]),
        written as f64,
        0.02,
    );

    // A checkpoint-like writer: dirty 16 MiB, sync_file_range(WRITE) over it, then fsync.
    let path = fs.mountpoint().join("ckpt");
    testkit::workload::write_file(&path, 16 * MIB, 1 << 20).expect("dirty");
    settle(&dev);
    let before = daemon.scrape();
    let written_before = diskstat_written(&dev);
    let file = testkit::workload::open_for_write(&path).expect("open");
    testkit::workload::sync_file_range(&file, 0, 0, testkit::workload::SFR_WRITE).expect("sfr");
    file.sync_all().expect("fsync");
    settle(&dev);
    let after = daemon.scrape();
    let written = (diskstat_written(&dev) - written_before) as f64;
    let sfr = rise(&after, &before, &source("sync_file_range"));
    let fsync = rise(&after, &before, &source("fsync"));
    eprintln!(
        "checkpoint: sync_file_range {sfr:.0}, fsync {fsync:.0}, journal {:.0}, device {written:.0}",
        rise(&after, &before, &source("journal"))
    );
    // The data goes out under sync_file_range; fsync finds it under writeback already.
    within("sync_file_range(WRITE)", sfr, (16 * MIB) as f64, 0.0);
    within(
        "checkpoint, all sources",
        rise(&after, &before, &[("device", dev.as_str())]),
        written,
        0.02,
    );
}

/// On a blk-throttled device the bios the rule holds back are traced when its worker dispatches
/// them: O_DIRECT writes appear under `throttled` (those within the budget under `direct`), and
/// the total still equals diskstat within 2 %.
#[test]
#[ignore = "needs root: run through `cargo xtask test`"]
fn throttled_bios_count_as_throttled() {
    let fs = LoopFs::new(FsKind::Ext4, 256).expect("loop filesystem");
    let daemon = TestDaemon::start();
    let dev = fs.loop_name().to_owned();
    fs.throttle_write_bps(4 * MIB).expect("throttle");
    let (before, after, written) = window(
        &daemon,
        &fs,
        "dd if=/dev/zero of=t bs=1M count=8 oflag=direct status=none",
    );
    let source = |s: &'static str| [("device", dev.as_str()), ("source", s)];
    let throttled = rise(&after, &before, &source("throttled"));
    let direct = rise(&after, &before, &source("direct"));
    eprintln!("throttled {throttled:.0}, direct {direct:.0}");
    // At least dd's 8 MiB: the filesystem's own held-back writes (ext4lazyinit's inode table
    // zeroing, journal commits) are dispatched by the same worker.
    assert!(
        throttled + direct >= (8 * MIB) as f64,
        "throttled {throttled} + direct {direct}"
    );
    assert!(throttled >= (4 * MIB) as f64, "throttled {throttled}");
    within(
        "throttled device, all sources",
        rise(&after, &before, &[("device", dev.as_str())]),
        written as f64,
        0.02,
    );
}

/// fio: 4 KiB random writes with an fsync after each (and O_DIRECT writes in a second job): all
/// sources together equal diskstat within 2 %, and the fsyncs' own writeback shows up as
/// `fsync`, the O_DIRECT job's as `direct`.
#[test]
#[ignore = "needs root: run through `cargo xtask test`"]
fn fio_bytes_match_diskstat() {
    let fs = LoopFs::new(FsKind::Xfs, 512).expect("loop filesystem");
    let daemon = TestDaemon::start();
    let dev = fs.loop_name().to_owned();
    let (before, after, written) = window(
        &daemon,
        &fs,
        "fio --name=fsyncs --filename=f1 --rw=randwrite --bs=4k --size=16m --fsync=1 \
         --ioengine=psync --output=/dev/null && \
         fio --name=direct --filename=f2 --rw=randwrite --bs=4k --size=16m --direct=1 \
         --ioengine=psync --output=/dev/null",
    );
    let source = |s: &'static str| [("device", dev.as_str()), ("source", s)];
    let fsync = rise(&after, &before, &source("fsync"));
    let direct = rise(&after, &before, &source("direct"));
    eprintln!("fio: fsync {fsync:.0}, direct {direct:.0}");
    within(
        "fio, all sources",
        rise(&after, &before, &[("device", dev.as_str())]),
        written as f64,
        0.02,
    );
    // fio lays each file out first (buffered), so the fsync job's data is at least its 16 MiB.
    assert!(fsync >= (16 * MIB) as f64, "fsync {fsync}");
    assert!(direct >= (16 * MIB) as f64, "direct {direct}");
}
