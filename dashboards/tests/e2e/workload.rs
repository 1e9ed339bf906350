//! The load the dashboards are proven under, on the test's own loop-device ext4 filesystem:
//! fio with fsync (syscall and io_uring), dd + syncfs, sync_file_range, then a throttled device
//! (cgroup v1 blkio) with multi-second fsyncs, waits on pages under writeback, dirty throttling
//! through a strict per-bdi limit, and finally a large writeback left in flight while the
//! queries run. Every kernel change is registered with the `LoopFs` and undone when it drops.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use testkit::LoopFs;
use testkit::workload::{self, SFR_WAIT_AFTER, SFR_WAIT_BEFORE, SFR_WRITE};

/// Write bandwidth of the device in the slow phase: 8 MiB take 2 s.
pub const THROTTLE_BPS: u64 = 4 << 20;
/// The strict per-bdi dirty limit that makes writers throttle.
const BDI_LIMIT: u64 = 8 << 20;
/// Left under writeback while the queries run: at [`THROTTLE_BPS`] it drains in 32 s, and it is
/// more than 0.1 % of the RAM of any machine below 128 GiB.
pub const IN_FLIGHT: u64 = 128 << 20;
const MIB: u64 = 1 << 20;
/// Concurrent writers in the dirty throttling step.
const DIRTY_WRITERS: usize = 8;

fn run(program: &str, args: &[&str]) {
    let start = Instant::now();
    // fio's report is not needed: the daemon measures.
    let status = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("start {program}: {e}"));
    assert!(status.success(), "{program} {args:?}: {status}");
    println!("[e2e] {program} {} ({:.1}s)", args.join(" "), secs(start));
}

fn secs(start: Instant) -> f64 {
    start.elapsed().as_secs_f64()
}

fn fio(dir: &Path, args: &[&str]) {
    let dir = format!("--directory={}", dir.display());
    let mut all = vec![
        "--output-format=terse",
        dir.as_str(),
        "--rw=write",
        "--bs=64k",
    ];
    all.extend_from_slice(args);
    run("fio", &all);
}

/// Series appear in the exposition with their first event, and `rate()` cannot count the
/// events that a series already holds in its first sample. One call of each kind first, and a
/// few scrapes, make the workload's own events count in every rate.
pub fn prime(fs: &LoopFs) {
    let mnt = fs.mountpoint();
    workload::write_and_fsync(&mnt.join("prime-fsync"), MIB).expect("prime fsync");
    workload::write_and_fdatasync(&mnt.join("prime-fdatasync"), MIB).expect("prime fdatasync");
    let file = workload::open_for_write(&mnt.join("prime-fsync")).expect("open prime");
    workload::sync_file_range(&file, 0, 0, SFR_WRITE).expect("prime sync_file_range");
    workload::syncfs(mnt).expect("prime syncfs");
    fio(
        mnt,
        &[
            "--name=prime",
            "--ioengine=io_uring",
            "--size=1m",
            "--fdatasync=8",
        ],
    );
    std::thread::sleep(Duration::from_secs(3));
}

/// Fast sync-heavy I/O on the unthrottled device: many fast fsyncs, io_uring fdatasyncs,
/// flusher work for syncfs, sync_file_range with both flag sets, journal commits, flushes.
pub fn fast(fs: &LoopFs) {
    let mnt = fs.mountpoint();
    fio(
        mnt,
        &[
            "--name=fsync",
            "--ioengine=psync",
            "--size=32m",
            "--fsync=4",
        ],
    );
    fio(
        mnt,
        &[
            "--name=uring",
            "--ioengine=io_uring",
            "--size=16m",
            "--fdatasync=8",
        ],
    );
    let dd = mnt.join("dd");
    let of = format!("of={}", dd.display());
    run(
        "dd",
        &["if=/dev/zero", &of, "bs=1M", "count=64", "status=none"],
    );
    // syncfs, not sync(2): sync would also wait for every other filesystem on the host, some of
    // which may sit on throttled devices of other tests.
    run("sync", &["-f", &dd.to_string_lossy()]);
    let sfr = mnt.join("sfr");
    workload::write_file(&sfr, 4 * MIB, MIB as usize).expect("write sfr");
    let file = workload::open_for_write(&sfr).expect("open sfr");
    workload::sync_file_range(&file, 0, 0, SFR_WRITE).expect("sync_file_range write");
    workload::sync_file_range(&file, 0, 0, SFR_WAIT_BEFORE | SFR_WRITE | SFR_WAIT_AFTER)
        .expect("sync_file_range wait+write+wait");
}

/// The slow device: multi-second fsyncs, a wait on pages under writeback, dirty throttling.
pub fn slow(fs: &LoopFs) {
    let mnt = fs.mountpoint();
    fs.throttle_write_bps(THROTTLE_BPS).expect("blkio throttle");
    // Three fsyncs of 8 MiB at 4 MiB/s take about 2 s each. With the ~150 fast fsyncs above
    // they are more than 1 % of the device's fsyncs, so its fsync p99 is above 1 s.
    for i in 0..3 {
        let took = workload::write_and_fsync(&mnt.join(format!("slow{i}")), 8 * MIB)
            .expect("write + fsync");
        println!(
            "[e2e] throttled fsync of 8 MiB took {:.1}s",
            took.as_secs_f64()
        );
    }
    // Start writeback of 8 MiB without waiting, then fdatasync: it sleeps on the pages under
    // writeback (folio_wait_writeback) until the throttle lets them through.
    let wait = mnt.join("wait");
    workload::write_file(&wait, 8 * MIB, MIB as usize).expect("write wait");
    let file = workload::open_for_write(&wait).expect("open wait");
    workload::sync_file_range(&file, 0, 0, SFR_WRITE).expect("start writeback");
    let start = Instant::now();
    file.sync_data().expect("fdatasync");
    println!("[e2e] fdatasync behind writeback took {:.1}s", secs(start));
    // A strict 8 MiB dirty limit on the device: eight writers dirty 8 MiB each and spend most of
    // the ~16 s the throttled device needs paused in balance_dirty_pages. Pauses add up over
    // tasks, and rate() over the alert's 5 minute window divides by the whole window, so it
    // takes over 30 s of pauses to cross the alert's 10 %.
    fs.limit_bdi_dirty(BDI_LIMIT).expect("bdi limit");
    let start = Instant::now();
    let writers: Vec<_> = (0..DIRTY_WRITERS)
        .map(|i| {
            let of = format!("of={}", mnt.join(format!("throttled{i}")).display());
            Command::new("dd")
                .args(["if=/dev/zero", &of, "bs=1M", "count=8", "status=none"])
                .spawn()
                .expect("start dd")
        })
        .collect();
    for mut w in writers {
        let status = w.wait().expect("wait for dd");
        assert!(status.success(), "dd: {status}");
    }
    println!(
        "[e2e] {DIRTY_WRITERS} dd writers of 8 MiB under an 8 MiB strict bdi limit took {:.1}s",
        secs(start)
    );
    release_bdi_limit(fs);
}

/// Lifts the per-bdi limit early (the fixture restores the same values again when it drops), so
/// the in-flight writeback below is not capped at the limit.
fn release_bdi_limit(fs: &LoopFs) {
    let bdi = Path::new("/sys/class/bdi").join(fs.dev_string());
    std::fs::write(bdi.join("strict_limit"), "0").expect("strict_limit=0");
    std::fs::write(bdi.join("max_ratio"), "100").expect("max_ratio=100");
}

/// Dirties [`IN_FLIGHT`] bytes and starts their writeback without waiting: on the throttled
/// device the pages stay under writeback for half a minute, while the queries run.
pub fn leave_writeback_in_flight(fs: &LoopFs) -> Duration {
    let path = fs.mountpoint().join("in-flight");
    workload::write_file(&path, IN_FLIGHT, MIB as usize).expect("write in-flight");
    let file = workload::open_for_write(&path).expect("open in-flight");
    let start = Instant::now();
    workload::sync_file_range(&file, 0, 0, SFR_WRITE).expect("start in-flight writeback");
    let took = start.elapsed();
    println!(
        "[e2e] {} MiB under writeback on the throttled device (submitted in {:.1}s)",
        IN_FLIGHT / MIB,
        took.as_secs_f64()
    );
    took
}
