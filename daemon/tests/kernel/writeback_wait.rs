//! Time tasks sleep waiting on pages under writeback, by device.

use std::{
    io::{Seek as _, SeekFrom, Write as _},
    os::fd::AsFd,
    time::{Duration, Instant},
};

use testkit::{FsKind, LoopFs, workload};

use crate::harness::{TestDaemon, wbscope_lines};

const MIB: u64 = 1 << 20;
const FILE_SIZE: u64 = 8 * MIB;

/// fdatasync right after sync_file_range(WRITE) started writeback of 8 MiB on a 4 MiB/s ext4
/// device: fdatasync spends its time waiting for those pages, so the device's wait histogram
/// rises, and its `_sum` is at most the fdatasync's duration and more than half of it.
///
/// The file is written and fsynced before the throttle, then overwritten in place: its blocks are
/// already allocated, so the overwrite adds no ordered data to the journal. Otherwise a periodic
/// jbd2 commit (every 5 s) could wait on the same pages at the same time as the fdatasync, and
/// the per-device sum would count both waiters.
#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn fdatasync_behind_started_writeback_waits_on_the_device() {
    let fs = LoopFs::new(FsKind::Ext4, 256).expect("loop filesystem");
    let device = fs.loop_name().to_owned();
    let path = fs.mountpoint().join("fw");
    workload::write_and_fsync(&path, FILE_SIZE).expect("allocate the file");
    fs.throttle_write_bps(4 * MIB).expect("throttle");
    let daemon = TestDaemon::start();
    let labels = [("device", device.as_str())];
    let count = "wbscope_writeback_wait_duration_seconds_count";
    let sum = "wbscope_writeback_wait_duration_seconds_sum";
    let before = daemon.scrape();

    let mut file = workload::open_for_write(&path).expect("open");
    file.seek(SeekFrom::Start(0)).expect("seek");
    let chunk = vec![0x5a_u8; MIB as usize];
    for _ in 0..FILE_SIZE / MIB {
        file.write_all(&chunk).expect("overwrite");
    }
    workload::sync_file_range(file.as_fd(), 0, 0, workload::SFR_WRITE).expect("sync_file_range");
    let started = Instant::now();
    file.sync_data().expect("fdatasync");
    let fdatasync = started.elapsed().as_secs_f64();

    let after = daemon.wait_for("the waits to be counted", Duration::from_secs(5), |s| {
        s.sum(count, &labels) > before.sum(count, &labels)
    });
    let waits = after.sum(count, &labels) - before.sum(count, &labels);
    let waited = after.sum(sum, &labels) - before.sum(sum, &labels);
    let ratio = waited / fdatasync;
    eprintln!(
        "{device}: {waits} waits, sum {waited:.3} s; fdatasync took {fdatasync:.3} s; ratio {ratio:.4}"
    );
    assert!(
        waited <= fdatasync,
        "waits {waited} s exceed the fdatasync's {fdatasync} s:\n{}",
        wbscope_lines(&after)
    );
    assert!(
        waited > 0.5 * fdatasync,
        "waits {waited} s are not most of the fdatasync's {fdatasync} s:\n{}",
        wbscope_lines(&after)
    );
}
