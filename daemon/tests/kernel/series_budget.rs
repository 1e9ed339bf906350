//! The series budget of a fleet: how many series one busy device adds to a scrape. The e2e
//! tier's mixed load (testkit's `mixed_load`, shorter: fsync and io_uring fdatasync through fio,
//! syncfs, sync_file_range, throttled fsyncs, a wait on pages under writeback, dirty throttling
//! under a strict bdi limit, writeback left in flight), plus direct reads and writes and
//! discards, drives every per-device family on one loop-device ext4 filesystem; then the
//! samples labelled with the device are counted: at most [`SERIES_BUDGET`] with the default
//! configuration (`[metrics] detail = "basic"`), which keeps every label the dashboards and
//! rules read (the e2e tier checks each against the default exposition under the same load).

use std::process::Command;

use testkit::mixed_load::{self, Pace, SERIES_BUDGET};
use testkit::{FsKind, LoopFs, Scrape};
use wbscope::Config;

use crate::harness::TestDaemon;

fn run(cmd: &mut Command) {
    let status = cmd.status().expect("run workload command");
    assert!(status.success(), "{cmd:?}: {status}");
}

/// What the mixed load leaves out: direct reads and writes (read requests, REQ_SYNC writes
/// without a flush) and discards.
fn direct_io_and_discards(fs: &LoopFs) {
    let dir = fs.mountpoint();
    let direct = dir.join("direct");
    run(Command::new("dd").args([
        "if=/dev/zero",
        &format!("of={}", direct.display()),
        "bs=64k",
        "count=32",
        "oflag=direct",
        "status=none",
    ]));
    run(Command::new("dd").args([
        &format!("if={}", direct.display()),
        "of=/dev/null",
        "bs=64k",
        "iflag=direct",
        "status=none",
    ]));
    std::fs::remove_file(&direct).expect("remove");
    run(Command::new("fstrim").arg(dir));
}

/// Bucket lines per histogram series of the device's sync-call latency.
fn buckets_per_histogram(s: &Scrape, device: &str) -> usize {
    let lines = |suffix: &str| {
        s.all_samples()
            .iter()
            .filter(|x| {
                x.name == format!("wbscope_sync_call_duration_seconds{suffix}")
                    && x.labels.get("device").map(String::as_str) == Some(device)
            })
            .count()
    };
    lines("_bucket") / lines("_count").max(1)
}

struct Count {
    total: usize,
    by_family: std::collections::BTreeMap<String, usize>,
    buckets: usize,
}

fn count(detail: Option<&str>) -> Count {
    let mut config = Config {
        listen: "127.0.0.1:0".parse().expect("loopback"),
        ignore_own_io: false,
        ..Config::default()
    };
    if let Some(detail) = detail {
        config.metrics.detail = detail.parse().expect("detail level");
    }
    let fs = LoopFs::new(FsKind::Ext4, 256).expect("loop-device ext4");
    // mq-deadline, so requests are inserted into a scheduler and have a queue time.
    fs.set_scheduler("mq-deadline").expect("mq-deadline");
    let daemon = TestDaemon::start_with(config);
    mixed_load::run_all(&fs, Pace::QUICK).expect("mixed load");
    direct_io_and_discards(&fs);
    let scrape = daemon.scrape();
    let by_family = scrape.series_of_device(fs.loop_name());
    let buckets = buckets_per_histogram(&scrape, fs.loop_name());
    let total = by_family.values().sum();
    eprintln!(
        "series for one busy device (detail {}): {total}",
        detail.unwrap_or("default")
    );
    for (family, n) in &by_family {
        eprintln!("  {n:>4}  {family}");
    }
    Count {
        total,
        by_family,
        buckets,
    }
}

#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn one_busy_device_stays_within_the_series_budget() {
    let basic = count(None);
    assert!(
        basic.total <= SERIES_BUDGET,
        "{} series for one device, budget {SERIES_BUDGET}: {:?}",
        basic.total,
        basic.by_family
    );
    // The load reached every per-device family the dashboards and alerts read, so the count
    // is that of a device with everything going on.
    for family in [
        "wbscope_sync_call_duration_seconds",
        "wbscope_sync_file_range_calls_total",
        "wbscope_block_request_latency_seconds",
        "wbscope_block_request_time_seconds_total",
        "wbscope_block_queue_latency_seconds",
        "wbscope_block_requests_total",
        "wbscope_block_request_bytes_total",
        "wbscope_block_request_errors_total",
        "wbscope_block_flags_total",
        "wbscope_writeback_work_duration_seconds",
        "wbscope_writeback_work_time_seconds_total",
        "wbscope_writeback_work_total",
        "wbscope_writeback_written_bytes_total",
        "wbscope_writeback_queued_total",
        "wbscope_writeback_submissions_total",
        "wbscope_writeback_submitted_bytes_total",
        "wbscope_writeback_wait_duration_seconds",
        "wbscope_dirty_throttle_pause_seconds",
        "wbscope_journal_commit_duration_seconds",
        "wbscope_bdi_dirty_bytes",
        "wbscope_filesystem_info",
    ] {
        assert!(
            basic.by_family.contains_key(family),
            "{family} missing: {:?}",
            basic.by_family
        );
    }
    // 7 bounds every factor of 8 from 32.8 µs to 8.6 s, and +Inf.
    assert_eq!(
        basic.buckets, 8,
        "bucket lines per histogram with detail = basic"
    );
    let full = count(Some("full"));
    // 27 bounds every factor of 2 from 1 µs to 68.7 s, and +Inf.
    assert_eq!(
        full.buckets, 28,
        "bucket lines per histogram with detail = full"
    );
    assert!(
        full.total > basic.total,
        "detail = full exports {}, basic {}",
        full.total,
        basic.total
    );
}
