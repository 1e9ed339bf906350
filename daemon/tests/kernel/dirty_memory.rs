//! Dirty memory read at scrape time: system gauges against /proc/vmstat, per-device bdi state.

use std::{
    os::fd::AsFd,
    time::{Duration, Instant},
};

use testkit::{FsKind, LoopFs, Scrape, workload};

use crate::harness::{TestDaemon, wbscope_lines};

const MIB: u64 = 1 << 20;
const THROTTLE_BPS: u64 = 4 * MIB;

/// nr_dirty + nr_writeback from /proc/vmstat, in bytes.
fn vmstat_dirty_and_writeback() -> f64 {
    let text = std::fs::read_to_string("/proc/vmstat").expect("read /proc/vmstat");
    let page = page_size();
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(k, _)| *k == "nr_dirty" || *k == "nr_writeback")
        .map(|(_, v)| v.parse::<u64>().expect("vmstat value") * page)
        .sum::<u64>() as f64
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).expect("page size")
}

/// The `wbscope_bdi_*` gauges of one device.
fn bdi(s: &Scrape, metric: &str, device: &str) -> f64 {
    s.sum(metric, &[("device", device)])
}

/// After dirtying 256 MiB on a throttled device (and starting writeback of 32 MiB of it):
/// - `wbscope_dirty_bytes + wbscope_writeback_bytes` is within 5% of /proc/vmstat's
///   nr_dirty + nr_writeback read in the same instant;
/// - the device's `wbscope_bdi_dirty_bytes` and `wbscope_bdi_writeback_bytes` rise by most of
///   what the test dirtied and put under writeback, and its threshold and bandwidth estimate are
///   exported.
///
/// "The same instant": these are system-wide counters that every other process (other tests,
/// the loop device writing to its backing file) changes continuously, so no reading taken at
/// another moment can be compared to 5%. The test reads vmstat right before and right after the
/// scrape: the collector read vmstat at some moment between the two, so its value must lie within
/// the pair's range. A pair that itself differs by more than 1% (a burst of someone else's I/O in
/// between) says too little, and the test takes another; it needs one pair that brackets the
/// scrape tightly.
#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn dirty_bytes_match_vmstat_and_bdi_state_rises() {
    // Large enough that ext4 does not start writing back on its own to reserve space (it does
    // when free space falls below twice the dirty delalloc clusters: `ext4_nonda_switch`).
    let fs = LoopFs::new(FsKind::Ext4, 2048).expect("loop filesystem");
    fs.throttle_write_bps(THROTTLE_BPS).expect("throttle");
    let device = fs.loop_name().to_owned();
    let daemon = TestDaemon::start();
    let before = daemon.scrape();

    let path = fs.mountpoint().join("dirty");
    let writing = Instant::now();
    workload::write_file(&path, 256 * MIB, 1 << 20).expect("dirty 256 MiB");
    // Put 32 MiB under writeback: at 4 MiB/s it stays there for seconds.
    let file = workload::open_for_write(&path).expect("open");
    workload::sync_file_range(file.as_fd(), 0, 32 * MIB, workload::SFR_WRITE)
        .expect("sync_file_range");

    let started = Instant::now();
    let mut bracket = None;
    let mut attempts = 0;
    while bracket.is_none() && started.elapsed() < Duration::from_secs(10) {
        attempts += 1;
        let first = vmstat_dirty_and_writeback();
        let s = daemon.scrape();
        let second = vmstat_dirty_and_writeback();
        let (lo, hi) = (first.min(second), first.max(second));
        if hi - lo <= 0.01 * hi {
            let value = s.sum("wbscope_dirty_bytes", &[]) + s.sum("wbscope_writeback_bytes", &[]);
            bracket = Some((lo, hi, value, s));
        } else {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let (lo, hi, value, after) = bracket.expect("a vmstat pair within 1% around a scrape");
    eprintln!(
        "dirty+writeback: wbscope {:.1} MiB, vmstat {:.1}..{:.1} MiB (attempt {attempts})",
        value / MIB as f64,
        lo / MIB as f64,
        hi / MIB as f64
    );
    assert!(
        value >= 0.95 * lo && value <= 1.05 * hi,
        "wbscope_dirty_bytes + wbscope_writeback_bytes = {value} outside 5% of vmstat [{lo}, {hi}]"
    );

    let rise = |metric: &str| bdi(&after, metric, &device) - bdi(&before, metric, &device);
    let dirty = rise("wbscope_bdi_dirty_bytes");
    let writeback = rise("wbscope_bdi_writeback_bytes");
    let threshold = bdi(&after, "wbscope_bdi_dirty_threshold_bytes", &device);
    let bandwidth = bdi(
        &after,
        "wbscope_bdi_write_bandwidth_bytes_per_second",
        &device,
    );
    eprintln!(
        "{device}: bdi dirty +{:.1} MiB, writeback +{:.1} MiB, dirty threshold {:.1} MiB \
         (before {:.1}), write bandwidth {:.2} MiB/s",
        dirty / MIB as f64,
        writeback / MIB as f64,
        threshold / MIB as f64,
        bdi(&before, "wbscope_bdi_dirty_threshold_bytes", &device) / MIB as f64,
        bandwidth / MIB as f64,
    );
    // 256 MiB were dirtied. Background writeback may start while they are written (the device's
    // share of the background threshold is about that size) and moves pages from dirty to
    // writeback; only what the throttle let through since the first write has left both.
    let drained = (THROTTLE_BPS as f64 * writing.elapsed().as_secs_f64()).min(128.0 * MIB as f64);
    assert!(
        dirty + writeback >= 256.0 * MIB as f64 - drained - 4.0 * MIB as f64,
        "dirty {dirty} + writeback {writeback} with at most {drained} drained:\n{}",
        wbscope_lines(&after)
    );
    assert!(dirty >= 64.0 * MIB as f64, "{}", wbscope_lines(&after));
    assert!(writeback >= 4.0 * MIB as f64, "{}", wbscope_lines(&after));
    assert!(
        bandwidth > 0.0
            && after
                .value("wbscope_bdi_dirty_threshold_bytes", &[("device", &device)])
                .is_some(),
        "{}",
        wbscope_lines(&after)
    );
    drop(file);
}

/// /proc/pressure/io is exported when the kernel has it: each `total` lies between the file's
/// values read right before and right after the scrape.
#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn io_pressure_follows_the_kernel_file() {
    let daemon = TestDaemon::start();
    // node_exporter's names: waiting = PSI "some", stalled = PSI "full".
    let metrics = [
        ("some", "wbscope_pressure_io_waiting_seconds_total"),
        ("full", "wbscope_pressure_io_stalled_seconds_total"),
    ];
    let read = || std::fs::read_to_string("/proc/pressure/io").ok();
    let first = read();
    let s = daemon.scrape();
    let (Some(first), Some(second)) = (first, read()) else {
        for (_, metric) in metrics {
            assert!(
                s.samples(metric).is_empty(),
                "exported without a readable /proc/pressure/io"
            );
        }
        eprintln!("no readable /proc/pressure/io on this kernel: nothing exported, as expected");
        return;
    };
    let total = |text: &str, kind: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(kind))
            .and_then(|l| l.split_whitespace().find_map(|w| w.strip_prefix("total=")))
            .and_then(|v| v.parse::<f64>().ok())
            .expect("total field")
            / 1e6
    };
    for (kind, metric) in metrics {
        let exported = s
            .value(metric, &[])
            .unwrap_or_else(|| panic!("no {kind} series:\n{}", wbscope_lines(&s)));
        let (lo, hi) = (total(&first, kind), total(&second, kind));
        eprintln!("psi io {kind}: wbscope {exported:.6} s, file {lo:.6}..{hi:.6} s");
        assert!(lo <= exported && exported <= hi, "{}", wbscope_lines(&s));
    }
}
