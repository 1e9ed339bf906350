//! Writeback submissions (writepages passes) by caller and sync mode, on ext4 and xfs.

use std::{os::fd::AsFd, time::Duration};

use testkit::{FsKind, LoopFs, Scrape, workload};

use crate::harness::{TestDaemon, wbscope_lines};

const MIB: u64 = 1 << 20;
const DIRTY: u64 = 16 * MIB;
const PASSES: &str = "wbscope_writeback_submissions_total";
const BYTES: &str = "wbscope_writeback_submitted_bytes_total";

/// Passes and bytes for (caller, sync_mode) on `device` between two scrapes.
fn rise(after: &Scrape, before: &Scrape, device: &str, caller: &str, mode: &str) -> (f64, f64) {
    let labels = [("device", device), ("caller", caller), ("sync_mode", mode)];
    (
        after.sum(PASSES, &labels) - before.sum(PASSES, &labels),
        after.sum(BYTES, &labels) - before.sum(BYTES, &labels),
    )
}

/// A caller's passes must account for exactly the file's `DIRTY` bytes: ext4 reports the pages
/// it wrote; on xfs the folio sizes are summed.
fn assert_bytes(what: &str, bytes: f64) {
    assert_eq!(bytes, DIRTY as f64, "{what}: bytes");
}

/// Bytes that callers other than `caller` submitted on `device` between two scrapes. Non-zero
/// means something else wrote the step's file back first: a `sync(2)` by any process on the host
/// hands every dirty inode to the flusher, which would make the step's own count short.
fn others(after: &Scrape, before: &Scrape, device: &str, caller: &str) -> f64 {
    let total = |s: &Scrape| s.sum(BYTES, &[("device", device)]);
    let own = |s: &Scrape| s.sum(BYTES, &[("device", device), ("caller", caller)]);
    (total(after) - total(before)) - (own(after) - own(before))
}

/// Runs `step` (which dirties a fresh file and writes it back as `caller`) until an attempt is not
/// disturbed by other writeback of the device, at most three times, and returns the scrapes
/// around the undisturbed (or last) attempt.
fn undisturbed(
    daemon: &TestDaemon,
    device: &str,
    caller: &str,
    mut step: impl FnMut(u32) -> Scrape,
) -> (Scrape, Scrape) {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let before = daemon.scrape();
        let after = step(attempt);
        let foreign = others(&after, &before, device, caller);
        if foreign == 0.0 || attempt == 3 {
            return (before, after);
        }
        eprintln!(
            "{caller}: attempt {attempt} disturbed ({foreign} bytes written back by others); again"
        );
    }
}

/// Dirties `DIRTY` bytes of a new file and returns it, opened for writing.
fn dirty_file(fs: &LoopFs, name: &str) -> std::fs::File {
    let path = fs.mountpoint().join(name);
    workload::write_file(&path, DIRTY, 1 << 20).expect("dirty the file");
    workload::open_for_write(&path).expect("open")
}

/// Each step dirties a fresh 16 MiB file and writes it back one way; the passes appear under
/// the caller and sync mode the kernel used, with the file's bytes:
/// - sync_file_range(WRITE): WB_SYNC_NONE from the caller, no WB_SYNC_ALL pass from it;
/// - sync_file_range(WAIT_BEFORE|WRITE|WAIT_AFTER): WB_SYNC_ALL from the caller;
/// - fsync: WB_SYNC_ALL from the caller;
/// - syncfs: the flusher does the work (sync_inodes_sb queues it), so caller `flusher`.
///
/// The dirty data stays far below the background threshold and is written within a second,
/// long before the 30 s expiry, so the flusher does not write it first.
fn passes_by_caller(kind: FsKind) {
    let fs = LoopFs::new(kind, 512).expect("loop filesystem");
    let device = fs.loop_name().to_owned();
    let dev = device.as_str();
    let daemon = TestDaemon::start();
    // xfs writes back through iomap, seen only by wbc_writepage (which needs the kernel's
    // writeback_control.fbatch, 6.3 and later); ext4 has its own tracepoint.
    if kind == FsKind::Xfs && daemon.skips("wbc_writepage") {
        return;
    }
    let wait = Duration::from_secs(5);

    let (before, after) = undisturbed(&daemon, dev, "sync_file_range", |attempt| {
        let start = daemon.scrape();
        let file = dirty_file(&fs, &format!("sfr-write-{attempt}"));
        workload::sync_file_range(file.as_fd(), 0, 0, workload::SFR_WRITE).expect("sfr write");
        daemon.wait_for("sync_file_range(WRITE) passes", wait, |s| {
            let (_, own) = rise(s, &start, dev, "sync_file_range", "none");
            own + others(s, &start, dev, "sync_file_range") >= DIRTY as f64
        })
    });
    let (passes, bytes) = rise(&after, &before, dev, "sync_file_range", "none");
    let (all_passes, _) = rise(&after, &before, dev, "sync_file_range", "all");
    eprintln!(
        "{kind:?} {device}: sync_file_range(WRITE): {passes} passes, {bytes} bytes with sync_mode=none; {all_passes} with sync_mode=all"
    );
    assert!(passes >= 1.0, "{}", wbscope_lines(&after));
    assert_bytes("sync_file_range(WRITE)", bytes);
    assert_eq!(all_passes, 0.0, "{}", wbscope_lines(&after));

    let all = workload::SFR_WAIT_BEFORE | workload::SFR_WRITE | workload::SFR_WAIT_AFTER;
    let (before, after) = undisturbed(&daemon, dev, "sync_file_range", |attempt| {
        let start = daemon.scrape();
        let file = dirty_file(&fs, &format!("sfr-all-{attempt}"));
        workload::sync_file_range(file.as_fd(), 0, 0, all).expect("sfr all");
        daemon.wait_for("sync_file_range(7) passes", wait, |s| {
            rise(s, &start, dev, "sync_file_range", "all").0 >= 1.0
        })
    });
    let (passes, bytes) = rise(&after, &before, dev, "sync_file_range", "all");
    let (none_passes, _) = rise(&after, &before, dev, "sync_file_range", "none");
    eprintln!(
        "{kind:?} {device}: sync_file_range(WAIT_BEFORE|WRITE|WAIT_AFTER): {passes} passes, {bytes} bytes with sync_mode=all; {none_passes} with none"
    );
    assert_bytes("sync_file_range(7)", bytes);
    assert_eq!(none_passes, 0.0, "{}", wbscope_lines(&after));

    let (before, after) = undisturbed(&daemon, dev, "fsync", |attempt| {
        let start = daemon.scrape();
        let file = dirty_file(&fs, &format!("fsync-{attempt}"));
        file.sync_all().expect("fsync");
        daemon.wait_for("fsync passes", wait, |s| {
            rise(s, &start, dev, "fsync", "all").0 >= 1.0
        })
    });
    let (passes, bytes) = rise(&after, &before, dev, "fsync", "all");
    eprintln!("{kind:?} {device}: fsync: {passes} passes, {bytes} bytes with sync_mode=all");
    assert_bytes("fsync", bytes);
    assert_eq!(rise(&after, &before, dev, "fsync", "none").0, 0.0);

    let before = daemon.scrape();
    drop(dirty_file(&fs, "syncfs"));
    workload::syncfs(fs.mountpoint()).expect("syncfs");
    let after = daemon.wait_for("flusher passes", wait, |s| {
        let (_, none) = rise(s, &before, dev, "flusher", "none");
        let (_, all) = rise(s, &before, dev, "flusher", "all");
        none + all >= DIRTY as f64
    });
    let (none_passes, none_bytes) = rise(&after, &before, dev, "flusher", "none");
    let (all_passes, all_bytes) = rise(&after, &before, dev, "flusher", "all");
    eprintln!(
        "{kind:?} {device}: syncfs: flusher {none_passes} passes / {none_bytes} bytes sync_mode=none, {all_passes} / {all_bytes} sync_mode=all"
    );
    assert_bytes("syncfs (flusher)", none_bytes + all_bytes);
}

#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn writeback_passes_by_caller_on_ext4() {
    passes_by_caller(FsKind::Ext4);
}

#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn writeback_passes_by_caller_on_xfs() {
    passes_by_caller(FsKind::Xfs);
}
