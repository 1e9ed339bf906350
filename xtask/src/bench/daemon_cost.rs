//! The daemon's own cost: CPU seconds and peak RSS over a phase of 1 s scrapes, idle and while
//! fio runs, and scrape latency with one and with many concurrent scrapers.

use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::daemon::Daemon;
use super::report::Section;
use super::stats::{fmt_mib, fmt_ns, percentile};
use super::workloads::BackgroundFio;
use super::{Ctx, interrupt, procfs};

/// CPU and memory over one phase.
pub struct Phase {
    pub secs: f64,
    pub cpu_secs: f64,
    pub peak_rss: u64,
    pub scrapes: usize,
}

/// Scrape latencies in ns, and how many scrapes failed.
pub struct Latency {
    pub scrapers: usize,
    pub ns: Vec<f64>,
    pub failed: usize,
}

/// Everything this phase measured.
pub struct DaemonCost {
    pub startup_peak_rss: u64,
    pub idle: Phase,
    pub load: Phase,
    pub single: Latency,
    pub concurrent: Latency,
    pub body_bytes: usize,
}

/// Runs the idle phase, the loaded phase and the two latency measurements on one daemon.
pub fn run(ctx: &Ctx) -> Result<DaemonCost> {
    interrupt::check()?;
    let daemon = Daemon::start(&ctx.binary, &ctx.log_path("daemon-own-cost.log"))?;
    let pid = daemon.pid();
    // The start-up peak (BTF parsing, program loading) before any phase resets it.
    let startup_peak_rss = procfs::status_bytes(pid, "VmHWM")?;
    let body_bytes = testkit::scrape(daemon.addr())?.len();
    println!("[bench] daemon cost: idle phase");
    let idle = phase(ctx, &daemon)?;
    println!("[bench] daemon cost: phase under fio load");
    let secs = ctx.plan.daemon_phase_secs;
    let fio = BackgroundFio::spawn(&ctx.work_dir, ctx.plan.sizes, secs + 30)?;
    let load = phase(ctx, &daemon)?;
    drop(fio);
    println!("[bench] daemon cost: scrape latency");
    let single = latency(&daemon, 1, ctx.plan.scrapes_single);
    let concurrent = latency(&daemon, ctx.plan.scrapers, ctx.plan.scrapes_each);
    daemon.stop()?;
    Ok(DaemonCost {
        startup_peak_rss,
        idle,
        load,
        single,
        concurrent,
        body_bytes,
    })
}

/// `daemon_phase_secs` of one scrape per second; CPU time and the phase's peak RSS.
fn phase(ctx: &Ctx, daemon: &Daemon) -> Result<Phase> {
    let pid = daemon.pid();
    procfs::reset_peak_rss(pid)?;
    let cpu0 = procfs::cpu_seconds(pid)?;
    let start = Instant::now();
    let mut scrapes = 0;
    for tick in 1..=ctx.plan.daemon_phase_secs {
        interrupt::check()?;
        testkit::scrape(daemon.addr()).context("scraping during the daemon-cost phase")?;
        scrapes += 1;
        let next = start + Duration::from_secs(tick);
        thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    Ok(Phase {
        secs: start.elapsed().as_secs_f64(),
        cpu_secs: procfs::cpu_seconds(pid)? - cpu0,
        peak_rss: procfs::status_bytes(pid, "VmHWM")?,
        scrapes,
    })
}

/// `scrapers` threads each scraping `each` times back to back.
fn latency(daemon: &Daemon, scrapers: usize, each: usize) -> Latency {
    let addr = daemon.addr();
    let per_thread: Vec<(Vec<f64>, usize)> = thread::scope(|scope| {
        let handles: Vec<_> = (0..scrapers)
            .map(|_| {
                scope.spawn(move || {
                    let mut ns = Vec::with_capacity(each);
                    let mut failed = 0;
                    for _ in 0..each {
                        let start = Instant::now();
                        match testkit::scrape(addr) {
                            Ok(_) => ns.push(start.elapsed().as_nanos() as f64),
                            Err(_) => failed += 1,
                        }
                    }
                    (ns, failed)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| (Vec::new(), each)))
            .collect()
    });
    Latency {
        scrapers,
        ns: per_thread.iter().flat_map(|(ns, _)| ns.clone()).collect(),
        failed: per_thread.iter().map(|(_, f)| f).sum(),
    }
}

fn phase_rows(s: &mut Section, key: &str, label: &str, p: &Phase) {
    s.row(
        format!("{key}-cpu"),
        vec![
            format!("CPU, {label}"),
            format!(
                "{:.2} s ({:.2}% of one core)",
                p.cpu_secs,
                100.0 * p.cpu_secs / p.secs.max(1e-9)
            ),
            format!("{:.0} s, {} scrapes", p.secs, p.scrapes),
        ],
    );
    s.row(
        format!("{key}-rss"),
        vec![
            format!("peak RSS, {label}"),
            fmt_mib(p.peak_rss as f64),
            "VmHWM, reset at the start of the phase".into(),
        ],
    );
}

fn latency_row(s: &mut Section, key: &str, l: &Latency, body_bytes: usize) {
    let p = |q| percentile(&l.ns, q).map_or_else(|| "n/a".to_owned(), fmt_ns);
    s.row(
        key,
        vec![
            format!("scrape latency, {} concurrent scraper(s)", l.scrapers),
            format!("p50 {}, p99 {}", p(50.0), p(99.0)),
            format!(
                "{} scrapes, {} failed, max {}, body {} bytes",
                l.ns.len(),
                l.failed,
                p(100.0),
                body_bytes
            ),
        ],
    );
}

/// The daemon-cost table.
pub fn section(c: &DaemonCost) -> Section {
    let mut s = Section::new("daemon", "Daemon cost", &["measurement", "value", "detail"]);
    phase_rows(&mut s, "idle", "idle", &c.idle);
    phase_rows(&mut s, "load", "under fio load", &c.load);
    s.row(
        "startup-rss",
        vec![
            "peak RSS during start-up".into(),
            fmt_mib(c.startup_peak_rss as f64),
            "VmHWM after the first scrape (BTF parsing, program loading)".into(),
        ],
    );
    latency_row(&mut s, "scrape-1", &c.single, c.body_bytes);
    latency_row(&mut s, "scrape-concurrent", &c.concurrent, c.body_bytes);
    s
}
