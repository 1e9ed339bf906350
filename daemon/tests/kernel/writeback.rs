//! Flusher writeback work by device, sync mode and reason.

use std::{
    io::{Seek as _, SeekFrom, Write as _},
    os::fd::AsFd,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use testkit::{FsKind, LoopFs, workload};

use crate::harness::{TestDaemon, wbscope_lines};

const MIB: u64 = 1 << 20;

/// Keeps rewriting the first 8 MiB of a file, 1 MiB at a time, until stopped.
struct BackgroundWriter {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl BackgroundWriter {
    fn start(path: PathBuf) -> BackgroundWriter {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut file = workload::open_for_write(&path).expect("open busy file");
            let chunk = vec![0x5a_u8; MIB as usize];
            let mut written = 0u64;
            while !flag.load(Ordering::Relaxed) {
                if written.is_multiple_of(8 * MIB) {
                    file.seek(SeekFrom::Start(0)).expect("seek");
                }
                file.write_all(&chunk).expect("write");
                written += MIB;
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        BackgroundWriter { stop, thread }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("background writer");
    }
}

/// Sectors written to a block device so far, from /sys/block/<dev>/stat (field 7, 512-byte units).
fn sectors_written(device: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/sys/block/{device}/stat")).expect("block stat");
    stat.split_whitespace()
        .nth(6)
        .and_then(|v| v.parse().ok())
        .expect("write sectors field")
}

/// `sync` after dirtying 64 MiB: WB_SYNC_ALL work with reason `sync` for the device, and at least
/// 64 MiB written back by flusher work for it (all modes and reasons together).
///
/// sync(2) first wakes the flushers for a WB_SYNC_NONE pass over everything, then queues
/// WB_SYNC_ALL work per superblock; but `bdi_split_work_to_wbs` skips a writeback context with no
/// dirty inodes and an empty `b_dirty_time` list. On a fast loop device the first pass has often
/// cleaned it already, so whether WB_SYNC_ALL work appears would be a race (seen with bpftrace on
/// writeback_queue). Two things make it deterministic, as on a busy database host: the filesystem
/// is mounted `lazytime` (written files keep dirty timestamps), and another writer keeps dirtying
/// the device while sync runs.
#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn sync_runs_sync_all_work_and_writes_back_the_dirty_data() {
    let fs = LoopFs::new(FsKind::Ext4, 256).expect("loop filesystem");
    fs.remount("lazytime").expect("remount lazytime");
    let device = fs.loop_name().to_owned();
    let daemon = TestDaemon::start();
    let all_sync = [
        ("device", device.as_str()),
        ("sync_mode", "all"),
        ("reason", "sync"),
    ];
    let for_device = [("device", device.as_str())];
    let before = daemon.scrape();

    workload::write_file(&fs.mountpoint().join("dirty"), 64 * MIB, 1 << 20).expect("dirty 64 MiB");
    let writer = BackgroundWriter::start(fs.mountpoint().join("busy"));
    workload::sync_all();
    writer.stop();

    let works = "wbscope_writeback_work_total";
    let written = "wbscope_writeback_written_bytes_total";
    let after = daemon.wait_for(
        "sync work and 64 MiB written back",
        Duration::from_secs(15),
        |s| {
            s.sum(works, &all_sync) > before.sum(works, &all_sync)
                && s.sum(written, &for_device) - before.sum(written, &for_device)
                    >= (64 * MIB) as f64
        },
    );
    let bytes = after.sum(written, &for_device) - before.sum(written, &for_device);
    eprintln!(
        "sync on {device}: {} WB_SYNC_ALL/sync work items, {:.1} MiB written back",
        after.sum(works, &all_sync) - before.sum(works, &all_sync),
        bytes / MIB as f64
    );
    // The work duration histogram has an observation for every counted item.
    assert_eq!(
        after.sum("wbscope_writeback_work_duration_seconds_count", &all_sync),
        after.sum(works, &all_sync),
        "{}",
        wbscope_lines(&after)
    );
}

/// sync_file_range(SYNC_FILE_RANGE_WRITE) writes the data back from the caller with WB_SYNC_NONE:
/// the device is written (control), but no WB_SYNC_ALL flusher work appears for it.
#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn sync_file_range_write_runs_no_sync_all_work() {
    let fs = LoopFs::new(FsKind::Ext4, 256).expect("loop filesystem");
    let device = fs.loop_name().to_owned();
    let daemon = TestDaemon::start();
    let all_mode = [("device", device.as_str()), ("sync_mode", "all")];
    let works = "wbscope_writeback_work_total";
    let before = daemon.scrape();
    let sectors_before = sectors_written(&device);

    let path = fs.mountpoint().join("sfr");
    workload::write_file(&path, 16 * MIB, 1 << 20).expect("dirty 16 MiB");
    let file = workload::open_for_write(&path).expect("open");
    workload::sync_file_range(file.as_fd(), 0, 0, workload::SFR_WRITE).expect("sync_file_range");

    // Control: the data did reach the device (SFR_WRITE only starts writeback, so wait for it).
    let written = testkit::wait_until(Duration::from_secs(10), Duration::from_millis(100), || {
        let bytes = (sectors_written(&device) - sectors_before) * 512;
        (bytes >= 16 * MIB).then_some(bytes)
    })
    .expect("16 MiB written to the device after sync_file_range");
    // Give any flusher work the kernel might have queued time to finish and be counted.
    std::thread::sleep(Duration::from_secs(1));
    let after = daemon.scrape();
    eprintln!(
        "sync_file_range(WRITE) on {device}: {:.1} MiB reached the device",
        written as f64 / MIB as f64
    );
    assert_eq!(
        after.sum(works, &all_mode),
        before.sum(works, &all_mode),
        "WB_SYNC_ALL work appeared after sync_file_range(WRITE):\n{}",
        wbscope_lines(&after)
    );
}
