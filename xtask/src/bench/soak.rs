//! The soak: fio with fsync, periodic `sync(2)` storms, a dirty-throttled buffered writer and 10
//! scrapes per second, plus a slowloris client and tmpfs map pressure (see `soak_load`), for
//! `--soak MINUTES`; reports whether the daemon stayed up, its RSS at start, after a minute and
//! at the end, the worst scrape latency, and whether every loss was counted.

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use testkit::{FsKind, LoopFs, Scrape};

use super::daemon::Daemon;
use super::report::Section;
use super::soak_load::{self, PressureCounts, SlowlorisCounts};
use super::stats::{fmt_mib, fmt_ns, percentile};
use super::workloads::BackgroundFio;
use super::{Ctx, interrupt, procfs};

/// RSS growth is measured from this far into the soak (allocator pools and caches warm up).
const WARM_UP: Duration = Duration::from_secs(60);

/// 10 scrapes per second.
const SCRAPE_EVERY: Duration = Duration::from_millis(100);
/// Threads calling sync(2) at once in one storm.
const STORM_THREADS: usize = 4;
/// The throttled writer's device: its dirty page cache is capped (strict) and its writeback
/// bandwidth limited, so the writer spends its time in balance_dirty_pages.
const WRITER_DIRTY_LIMIT: u64 = 16 << 20;
const WRITER_WRITE_BPS: u64 = 32 << 20;

/// What the soak observed.
pub struct Soak {
    pub secs: f64,
    pub stayed_up: bool,
    pub clean_exit: bool,
    pub rss_start: u64,
    pub rss_end: u64,
    pub scrape_ns: Vec<f64>,
    pub scrapes_failed: usize,
    /// Sum of `wbscope_events_dropped_total`, `None` when this build does not export it.
    pub events_dropped: Option<f64>,
    pub map_read_errors: f64,
    pub storms: u64,
    pub throttled_bytes: u64,
    /// RSS a minute in (0 if the soak was shorter).
    pub rss_warm: u64,
    pub slowloris_opened: u64,
    pub slowloris_closed: u64,
    /// Connections the daemon closed, by reason, and refused.
    pub http_closed: Vec<(String, f64)>,
    pub http_refused: f64,
    pub pressure_rounds: u64,
    pub pressure_fsyncs: u64,
    /// fsyncs the daemon recorded under device="pseudo" during the soak.
    pub pseudo_recorded: f64,
    /// Sum of wbscope_map_overflows_total, per map where non-zero.
    pub overflows: Vec<(String, f64)>,
    pub scrape_errors: f64,
}

/// Runs the soak for `ctx.plan.soak_secs` seconds.
pub fn run(ctx: &Ctx) -> Result<Soak> {
    interrupt::check()?;
    let writer_fs = LoopFs::new(FsKind::Ext4, 1024)?;
    writer_fs.limit_bdi_dirty(WRITER_DIRTY_LIMIT)?;
    writer_fs.throttle_write_bps(WRITER_WRITE_BPS)?;
    let mut daemon = Daemon::start(&ctx.binary, &ctx.log_path("soak.log"))?;
    let rss_start = procfs::status_bytes(daemon.pid(), "VmRSS")?;
    let first = daemon.scrape().context("first scrape of the soak")?;
    let secs = ctx.plan.soak_secs;
    let fio = BackgroundFio::spawn(&ctx.work_dir, ctx.plan.sizes, secs + 60)?;
    let tmpfs_dir = ctx.work_dir.join("tmpfs-pressure");
    let stop = AtomicBool::new(false);
    let storms = AtomicU64::new(0);
    let written = AtomicU64::new(0);
    let slow = SlowlorisCounts::default();
    let pressure = PressureCounts::default();
    let rss_warm = AtomicU64::new(0);
    let addr = daemon.addr();
    let pid = daemon.pid();
    let start = Instant::now();
    let scraped = thread::scope(|scope| {
        scope.spawn(|| throttled_writer(&writer_fs, &stop, &written));
        scope.spawn(|| sync_storms(ctx.plan.storm_every, &stop, &storms));
        scope.spawn(|| soak_load::slowloris(addr, &stop, &slow));
        scope.spawn(|| soak_load::tmpfs_pressure(&tmpfs_dir, &stop, &pressure));
        scope.spawn(|| {
            while start.elapsed() < WARM_UP && !stop.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(200));
            }
            if !stop.load(Ordering::Relaxed) {
                let rss = procfs::status_bytes(pid, "VmRSS").unwrap_or(0);
                rss_warm.store(rss, Ordering::Relaxed);
            }
        });
        let result = scrape_loop(&mut daemon, Duration::from_secs(secs));
        stop.store(true, Ordering::Relaxed);
        result
    });
    drop(fio);
    let (scrape_ns, scrapes_failed) = scraped?;
    let stayed_up = daemon.alive();
    let last = daemon.scrape();
    let rss_end = procfs::status_bytes(daemon.pid(), "VmRSS").unwrap_or(0);
    let clean_exit = daemon.stop().is_ok();
    let last = last.context("final scrape of the soak")?;
    let pseudo = |s: &Scrape| {
        s.sum(
            "wbscope_sync_call_duration_seconds_count",
            &[("syscall", "fsync"), ("device", "pseudo")],
        )
    };
    let by_label = |name: &str, label: &str| -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = last
            .samples(name)
            .into_iter()
            .filter_map(|(labels, v)| Some((labels.get(label)?.clone(), v)))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    };
    Ok(Soak {
        rss_warm: rss_warm.load(Ordering::Relaxed),
        slowloris_opened: slow.opened.load(Ordering::Relaxed),
        slowloris_closed: slow.closed_by_server.load(Ordering::Relaxed),
        http_closed: by_label("wbscope_http_connections_closed_total", "reason"),
        http_refused: last.sum("wbscope_http_connections_refused_total", &[]),
        pressure_rounds: pressure.rounds.load(Ordering::Relaxed),
        pressure_fsyncs: pressure.fsyncs.load(Ordering::Relaxed),
        pseudo_recorded: pseudo(&last) - pseudo(&first),
        overflows: by_label("wbscope_map_overflows_total", "map")
            .into_iter()
            .filter(|(_, v)| *v > 0.0)
            .collect(),
        scrape_errors: last.sum("wbscope_scrape_errors_total", &[]),
        secs: start.elapsed().as_secs_f64(),
        stayed_up,
        clean_exit,
        rss_start,
        rss_end,
        scrape_ns,
        scrapes_failed,
        events_dropped: last
            .family("wbscope_events_dropped_total")
            .map(|_| last.sum("wbscope_events_dropped_total", &[])),
        map_read_errors: last.sum("wbscope_map_read_errors_total", &[]),
        storms: storms.load(Ordering::Relaxed),
        throttled_bytes: written.load(Ordering::Relaxed),
    })
}

/// Scrapes every 100 ms until `length` is over; every tenth scrape is also parsed, so a
/// malformed exposition fails too. Stops early if the daemon dies.
fn scrape_loop(daemon: &mut Daemon, length: Duration) -> Result<(Vec<f64>, usize)> {
    let start = Instant::now();
    let mut ns = Vec::new();
    let mut failed = 0;
    let mut n: u32 = 0;
    while start.elapsed() < length {
        interrupt::check()?;
        let t = Instant::now();
        match testkit::scrape(daemon.addr()) {
            Ok(text) => {
                ns.push(t.elapsed().as_nanos() as f64);
                if n.is_multiple_of(10) && Scrape::parse(&text).is_err() {
                    failed += 1;
                }
            }
            Err(_) => failed += 1,
        }
        n += 1;
        if n.is_multiple_of(10) && !daemon.alive() {
            break;
        }
        thread::sleep((start + SCRAPE_EVERY * n).saturating_duration_since(Instant::now()));
    }
    Ok((ns, failed))
}

/// Rewrites a 64 MiB file on the throttled device in 1 MiB writes until told to stop.
fn throttled_writer(fs: &LoopFs, stop: &AtomicBool, written: &AtomicU64) {
    let chunk = vec![0x5au8; 1 << 20];
    let path = fs.mountpoint().join("throttled.dat");
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut file) = File::create(&path) else {
            return;
        };
        for _ in 0..64 {
            if stop.load(Ordering::Relaxed) || file.write_all(&chunk).is_err() {
                return;
            }
            written.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        }
    }
}

/// Every `every`, `STORM_THREADS` threads call sync(2) at once.
fn sync_storms(every: Duration, stop: &AtomicBool, storms: &AtomicU64) {
    let mut next = Instant::now() + every;
    while !stop.load(Ordering::Relaxed) {
        if Instant::now() < next {
            thread::sleep(Duration::from_millis(50));
            continue;
        }
        thread::scope(|scope| {
            for _ in 0..STORM_THREADS {
                scope.spawn(testkit::workload::sync_all);
            }
        });
        storms.fetch_add(1, Ordering::Relaxed);
        next = Instant::now() + every;
    }
}

/// The soak table.
pub fn section(s: &Soak) -> Section {
    let mut t = Section::new("soak", "Soak", &["measurement", "value"]);
    let p = |q| percentile(&s.scrape_ns, q).map_or_else(|| "n/a".to_owned(), fmt_ns);
    let yes_no = |b: bool| if b { "yes" } else { "NO" }.to_owned();
    let growth = |from: u64| {
        if from == 0 {
            "n/a".to_owned()
        } else {
            format!("{:+.1} %", (s.rss_end as f64 / from as f64 - 1.0) * 100.0)
        }
    };
    let pseudo_overflow: f64 = s
        .overflows
        .iter()
        .filter(|(m, _)| m == "SYNC_CALL_LATENCY_ANON")
        .map(|(_, v)| v)
        .sum();
    let accounted = s.pseudo_recorded + pseudo_overflow >= s.pressure_fsyncs as f64;
    let list = |v: &[(String, f64)]| {
        if v.is_empty() {
            "none".to_owned()
        } else {
            v.iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let rows: [(&str, &str, String); 12] = [
        ("duration", "duration", format!("{:.0} s", s.secs)),
        (
            "stayed-up",
            "daemon stayed up (and exited 0 on SIGTERM)",
            format!("{} ({})", yes_no(s.stayed_up), yes_no(s.clean_exit)),
        ),
        (
            "rss",
            "RSS at start → end",
            format!(
                "{} → {}",
                fmt_mib(s.rss_start as f64),
                fmt_mib(s.rss_end as f64)
            ),
        ),
        (
            "rss-growth",
            "RSS growth after the first minute (from start)",
            format!(
                "{} ({}): {} → {}",
                growth(s.rss_warm),
                growth(s.rss_start),
                fmt_mib(s.rss_warm as f64),
                fmt_mib(s.rss_end as f64)
            ),
        ),
        (
            "scrape-latency",
            "scrape latency p99 / max",
            format!("{} / {}", p(99.0), p(100.0)),
        ),
        (
            "scrapes",
            "scrapes ok / failed",
            format!("{} / {}", s.scrape_ns.len(), s.scrapes_failed),
        ),
        (
            "events-dropped",
            "events dropped (wbscope_events_dropped_total)",
            s.events_dropped.map_or_else(
                || "not exported by this build".to_owned(),
                |v| format!("{v}"),
            ),
        ),
        (
            "map-errors",
            "map read errors (wbscope_map_read_errors_total)",
            format!("{}", s.map_read_errors),
        ),
        (
            "slowloris",
            "slowloris: connections opened / closed by the daemon; daemon's count by reason",
            format!(
                "{} / {}; {}; refused {}",
                s.slowloris_opened,
                s.slowloris_closed,
                list(&s.http_closed),
                s.http_refused
            ),
        ),
        (
            "map-pressure",
            "tmpfs map pressure: fsyncs issued → recorded (device=pseudo) + overflow counted",
            format!(
                "{} rounds, {} fsyncs → {} + {} ({})",
                s.pressure_rounds,
                s.pressure_fsyncs,
                s.pseudo_recorded,
                pseudo_overflow,
                if accounted {
                    "all accounted"
                } else {
                    "NOT all accounted"
                }
            ),
        ),
        (
            "losses",
            "losses counted: map overflows by map; scrape errors",
            format!("{}; scrape errors {}", list(&s.overflows), s.scrape_errors),
        ),
        (
            "load",
            "load applied",
            format!(
                "fio randwrite+fsync throughout; {} sync storms of {STORM_THREADS} threads; \
                 {} written by the dirty-throttled writer; {} slowloris connections; \
                 {} tmpfs per pressure round",
                s.storms,
                fmt_mib(s.throttled_bytes as f64),
                soak_load::SLOWLORIS_CONNECTIONS,
                soak_load::TMPFS_PER_ROUND
            ),
        ),
    ];
    for (key, label, value) in rows {
        t.row(key, vec![label.to_owned(), value]);
    }
    t
}
