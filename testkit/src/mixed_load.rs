//! The mixed load that exercises every per-device family on one loop-device filesystem: fio
//! with fsync (syscall and io_uring), dd + syncfs, sync_file_range, then a throttled device
//! (cgroup v1 blkio) with multi-second fsyncs, waits on pages under writeback, dirty
//! throttling through a strict per-bdi limit, and a large writeback left in flight. The e2e
//! tier proves the dashboards under it ([`Pace::E2E`]); the series budget test counts the
//! series it creates ([`Pace::QUICK`]: the same steps, smaller and shorter). Every kernel
//! change is registered with the [`LoopFs`] and undone when it drops.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::LoopFs;
use crate::error::{Error, Result, io_err};
use crate::workload::{self, SFR_WAIT_AFTER, SFR_WAIT_BEFORE, SFR_WRITE};

const MIB: u64 = 1 << 20;

/// The series one active device may add to a scrape with the default configuration (README,
/// "Series per device"): what a fleet of many hosts with a few devices each can afford.
pub const SERIES_BUDGET: usize = 200;

/// How much of each step to do.
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    /// Write bandwidth of the device in the slow phase.
    pub throttle_bps: u64,
    /// Throttled fsyncs and the bytes each one flushes.
    pub slow_fsyncs: usize,
    pub slow_fsync_bytes: u64,
    /// Dirty throttling: writers under a strict per-bdi limit, each dirtying `writer_bytes`.
    pub bdi_limit: u64,
    pub dirty_writers: usize,
    pub writer_bytes: u64,
    /// Left under writeback at the end.
    pub in_flight: u64,
    /// fio's file sizes in the fast phase: psync with fsync, io_uring with fdatasync.
    pub fio_fsync_size: &'static str,
    pub fio_uring_size: &'static str,
    /// Seconds to let the daemon's scrapes see the primed series before the load.
    pub prime_settle: Duration,
}

impl Pace {
    /// The e2e tier's: 8 MiB take 2 s at 4 MiB/s, so three fsyncs of 8 MiB are over the fsync
    /// alert's 1 s; eight writers under an 8 MiB limit spend over 30 s paused (the throttling
    /// alert's 10 % of 5 minutes); 128 MiB under writeback drain in 32 s, while the queries run,
    /// and are more than 0.1 % of the RAM of any machine below 128 GiB.
    pub const E2E: Pace = Pace {
        throttle_bps: 4 << 20,
        slow_fsyncs: 3,
        slow_fsync_bytes: 8 * MIB,
        bdi_limit: 8 << 20,
        dirty_writers: 8,
        writer_bytes: 8 * MIB,
        in_flight: 128 << 20,
        fio_fsync_size: "32m",
        fio_uring_size: "16m",
        prime_settle: Duration::from_secs(3),
    };

    /// Every step of [`Pace::E2E`], each just big enough to produce its events (and series):
    /// about 10 s in all.
    pub const QUICK: Pace = Pace {
        throttle_bps: 8 << 20,
        slow_fsyncs: 1,
        slow_fsync_bytes: 4 * MIB,
        bdi_limit: 4 << 20,
        dirty_writers: 4,
        writer_bytes: 4 * MIB,
        in_flight: 8 << 20,
        fio_fsync_size: "4m",
        fio_uring_size: "4m",
        prime_settle: Duration::ZERO,
    };
}

fn run(program: &str, args: &[&str]) -> Result<()> {
    let start = Instant::now();
    let command = format!("{program} {}", args.join(" "));
    // fio's report is not needed: the daemon measures.
    let status = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .map_err(|e| Error::Command {
            command: command.clone(),
            detail: e.to_string(),
        })?;
    if !status.success() {
        return Err(Error::Command {
            command,
            detail: status.to_string(),
        });
    }
    println!("[load] {command} ({:.1}s)", secs(start));
    Ok(())
}

fn secs(start: Instant) -> f64 {
    start.elapsed().as_secs_f64()
}

fn fio(dir: &Path, args: &[&str]) -> Result<()> {
    let dir = format!("--directory={}", dir.display());
    let mut all = vec![
        "--output-format=terse",
        dir.as_str(),
        "--rw=write",
        "--bs=64k",
    ];
    all.extend_from_slice(args);
    run("fio", &all)
}

/// Series appear in the exposition with their first event, and `rate()` cannot count the
/// events that a series already holds in its first sample. One call of each kind first, and a
/// few scrapes, make the load's own events count in every rate.
pub fn prime(fs: &LoopFs, pace: Pace) -> Result<()> {
    let mnt = fs.mountpoint();
    workload::write_and_fsync(&mnt.join("prime-fsync"), MIB)?;
    workload::write_and_fdatasync(&mnt.join("prime-fdatasync"), MIB)?;
    let file = workload::open_for_write(&mnt.join("prime-fsync"))?;
    workload::sync_file_range(&file, 0, 0, SFR_WRITE)?;
    workload::syncfs(mnt)?;
    fio(
        mnt,
        &[
            "--name=prime",
            "--ioengine=io_uring",
            "--size=1m",
            "--fdatasync=8",
        ],
    )?;
    std::thread::sleep(pace.prime_settle);
    Ok(())
}

/// Fast sync-heavy I/O on the unthrottled device: many fast fsyncs, io_uring fdatasyncs,
/// flusher work for syncfs, sync_file_range with both flag sets, journal commits, flushes.
pub fn fast(fs: &LoopFs, pace: Pace) -> Result<()> {
    let mnt = fs.mountpoint();
    let fsync_size = format!("--size={}", pace.fio_fsync_size);
    let uring_size = format!("--size={}", pace.fio_uring_size);
    fio(
        mnt,
        &["--name=fsync", "--ioengine=psync", &fsync_size, "--fsync=4"],
    )?;
    fio(
        mnt,
        &[
            "--name=uring",
            "--ioengine=io_uring",
            &uring_size,
            "--fdatasync=8",
        ],
    )?;
    let dd = mnt.join("dd");
    let of = format!("of={}", dd.display());
    run(
        "dd",
        &["if=/dev/zero", &of, "bs=1M", "count=64", "status=none"],
    )?;
    // syncfs, not sync(2): sync would also wait for every other filesystem on the host, some of
    // which may sit on throttled devices of other tests.
    run("sync", &["-f", &dd.to_string_lossy()])?;
    let sfr = mnt.join("sfr");
    workload::write_file(&sfr, 4 * MIB, MIB as usize)?;
    let file = workload::open_for_write(&sfr)?;
    workload::sync_file_range(&file, 0, 0, SFR_WRITE)?;
    workload::sync_file_range(&file, 0, 0, SFR_WAIT_BEFORE | SFR_WRITE | SFR_WAIT_AFTER)
}

/// The slow device: multi-second fsyncs, a wait on pages under writeback, dirty throttling.
pub fn slow(fs: &LoopFs, pace: Pace) -> Result<()> {
    let mnt = fs.mountpoint();
    fs.throttle_write_bps(pace.throttle_bps)?;
    for i in 0..pace.slow_fsyncs {
        let took = workload::write_and_fsync(&mnt.join(format!("slow{i}")), pace.slow_fsync_bytes)?;
        println!(
            "[load] throttled fsync of {} MiB took {:.1}s",
            pace.slow_fsync_bytes / MIB,
            took.as_secs_f64()
        );
    }
    // Start writeback without waiting, then fdatasync: it sleeps on the pages under writeback
    // (folio_wait_writeback) until the throttle lets them through.
    let wait = mnt.join("wait");
    workload::write_file(&wait, pace.slow_fsync_bytes, MIB as usize)?;
    let file = workload::open_for_write(&wait)?;
    workload::sync_file_range(&file, 0, 0, SFR_WRITE)?;
    let start = Instant::now();
    file.sync_data()
        .map_err(io_err(format!("fdatasync {}", wait.display())))?;
    println!("[load] fdatasync behind writeback took {:.1}s", secs(start));
    // A strict dirty limit on the device: the writers spend most of the time the throttled
    // device needs for their pages paused in balance_dirty_pages.
    fs.limit_bdi_dirty(pace.bdi_limit)?;
    let start = Instant::now();
    let count = format!("count={}", pace.writer_bytes / MIB);
    let mut writers = Vec::new();
    for i in 0..pace.dirty_writers {
        let of = format!("of={}", mnt.join(format!("throttled{i}")).display());
        let args = ["if=/dev/zero", &of, "bs=1M", &count, "status=none"];
        let child = Command::new("dd")
            .args(args)
            .spawn()
            .map_err(|e| Error::Command {
                command: format!("dd {}", args.join(" ")),
                detail: e.to_string(),
            })?;
        writers.push(child);
    }
    for mut w in writers {
        let status = w.wait().map_err(io_err("wait for dd"))?;
        if !status.success() {
            return Err(Error::Command {
                command: "dd (dirty throttling writer)".into(),
                detail: status.to_string(),
            });
        }
    }
    println!(
        "[load] {} dd writers of {} MiB under a {} MiB strict bdi limit took {:.1}s",
        pace.dirty_writers,
        pace.writer_bytes / MIB,
        pace.bdi_limit / MIB,
        secs(start)
    );
    release_bdi_limit(fs)
}

/// Lifts the per-bdi limit early (the fixture restores the same values again when it drops), so
/// the in-flight writeback below is not capped at the limit.
fn release_bdi_limit(fs: &LoopFs) -> Result<()> {
    let bdi = Path::new("/sys/class/bdi").join(fs.dev_string());
    for (knob, value) in [("strict_limit", "0"), ("max_ratio", "100")] {
        let path = bdi.join(knob);
        std::fs::write(&path, value).map_err(io_err(format!("write {}", path.display())))?;
    }
    Ok(())
}

/// Dirties `pace.in_flight` bytes and starts their writeback without waiting: on the throttled
/// device the pages stay under writeback for a while. Returns how long the submission took.
pub fn leave_writeback_in_flight(fs: &LoopFs, pace: Pace) -> Result<Duration> {
    let path = fs.mountpoint().join("in-flight");
    workload::write_file(&path, pace.in_flight, MIB as usize)?;
    let file = workload::open_for_write(&path)?;
    let start = Instant::now();
    workload::sync_file_range(&file, 0, 0, SFR_WRITE)?;
    let took = start.elapsed();
    println!(
        "[load] {} MiB under writeback on the throttled device (submitted in {:.1}s)",
        pace.in_flight / MIB,
        took.as_secs_f64()
    );
    Ok(took)
}

/// Every step in order: [`prime`], [`fast`], [`slow`], [`leave_writeback_in_flight`].
pub fn run_all(fs: &LoopFs, pace: Pace) -> Result<()> {
    prime(fs, pace)?;
    fast(fs, pace)?;
    slow(fs, pace)?;
    leave_writeback_in_flight(fs, pace).map(drop)
}
