//! Journal commits, the filesystem join table and the daemon's own BPF run-time stats.

use std::time::Duration;

use testkit::{FsKind, LoopFs, workload};

use crate::harness::{TestDaemon, wbscope_lines};

const MIB: u64 = 1 << 20;

/// Each fsync on ext4 forces a jbd2 commit; each on xfs a log write. Both land in
/// `wbscope_journal_commit_duration_seconds` for the device with its filesystem type, and no
/// commit takes longer than the fsync that waited for it.
fn commits_are_timed(kind: FsKind, fs: &str) {
    let loopfs = LoopFs::new(kind, 512).expect("loop filesystem");
    loopfs.throttle_write_bps(8 * MIB).expect("throttle");
    let device = loopfs.loop_name().to_owned();
    let daemon = TestDaemon::start();
    let labels = [("device", device.as_str()), ("fs", fs)];
    let count = "wbscope_journal_commit_duration_seconds_count";
    let sum = "wbscope_journal_commit_duration_seconds_sum";
    let before = daemon.scrape();
    let mut longest = Duration::ZERO;
    for i in 0..5 {
        let took =
            workload::write_and_fsync(&loopfs.mountpoint().join(format!("j{i}")), 256 * 1024)
                .expect("write and fsync");
        longest = longest.max(took);
    }
    let after = daemon.wait_for("journal commits", Duration::from_secs(10), |s| {
        s.sum(count, &labels) - before.sum(count, &labels) >= 5.0
    });
    let commits = after.sum(count, &labels) - before.sum(count, &labels);
    let total = after.sum(sum, &labels) - before.sum(sum, &labels);
    eprintln!(
        "{fs} on {device}: {commits} commits, {:.1} ms in total, longest fsync {:.1} ms",
        total * 1e3,
        longest.as_secs_f64() * 1e3
    );
    assert!(total > 0.0, "{}", wbscope_lines(&after));
    // A single commit cannot outlast every fsync: the mean commit is below the longest fsync.
    assert!(
        total / commits <= longest.as_secs_f64(),
        "{}",
        wbscope_lines(&after)
    );
}

#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn ext4_fsync_commits_the_jbd2_journal() {
    commits_are_timed(FsKind::Ext4, "ext4");
}

#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn xfs_fsync_writes_the_log() {
    commits_are_timed(FsKind::Xfs, "xfs");
}

/// The loop filesystem appears in the join table with its mount point and type, and with
/// `[metrics] bpf_stats = true` the programs that ran report run-time stats.
#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn filesystem_info_and_program_run_time() {
    let loopfs = LoopFs::new(FsKind::Ext4, 64).expect("loop filesystem");
    let device = loopfs.loop_name().to_owned();
    let mountpoint = loopfs.mountpoint().to_string_lossy().into_owned();
    // Run-time stats are opt-in (they are host-wide): this test turns them on.
    let daemon = TestDaemon::start_with(wbscope::Config {
        listen: "127.0.0.1:0".parse().expect("loopback address"),
        ignore_own_io: false,
        metrics: wbscope::config::MetricsConfig {
            bpf_stats: true,
            ..Default::default()
        },
        ..wbscope::Config::default()
    });
    let before = daemon.scrape();
    for i in 0..10 {
        workload::write_and_fsync(&loopfs.mountpoint().join(format!("s{i}")), 4096)
            .expect("write and fsync");
    }
    let after = daemon.scrape();
    assert_eq!(
        after.sum(
            "wbscope_filesystem_info",
            &[
                ("device", device.as_str()),
                ("mountpoint", mountpoint.as_str()),
                ("fstype", "ext4")
            ]
        ),
        1.0,
        "{}",
        wbscope_lines(&after)
    );
    let program = [("program", "sys_enter_fsync")];
    let runs = after.sum("wbscope_bpf_program_runs_total", &program)
        - before.sum("wbscope_bpf_program_runs_total", &program);
    let secs = after.sum("wbscope_bpf_program_run_seconds_total", &program)
        - before.sum("wbscope_bpf_program_run_seconds_total", &program);
    eprintln!(
        "sys_enter_fsync: {runs} runs, {:.0} ns per run",
        secs * 1e9 / runs.max(1.0)
    );
    // Other processes on the host may fsync too, so at least our 10.
    assert!(runs >= 10.0, "{runs} runs");
    assert!(secs > 0.0);
}

/// The mount table is read again only when the kernel says it changed: a filesystem mounted
/// while the daemon runs appears in `wbscope_filesystem_info` at the next scrape, and is gone
/// from it once unmounted.
#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn filesystem_info_follows_mounts_and_unmounts() {
    let daemon = TestDaemon::start();
    let _ = daemon.scrape();
    let loopfs = LoopFs::new(FsKind::Ext4, 64).expect("loop filesystem");
    let device = loopfs.loop_name().to_owned();
    let mountpoint = loopfs.mountpoint().to_string_lossy().into_owned();
    let labels = [
        ("device", device.as_str()),
        ("mountpoint", mountpoint.as_str()),
        ("fstype", "ext4"),
    ];
    let mounted = daemon.scrape();
    assert_eq!(
        mounted.sum("wbscope_filesystem_info", &labels),
        1.0,
        "{}",
        wbscope_lines(&mounted)
    );
    drop(loopfs);
    let unmounted = daemon.scrape();
    assert_eq!(
        unmounted.sum("wbscope_filesystem_info", &labels),
        0.0,
        "{}",
        wbscope_lines(&unmounted)
    );
}
