//! `cargo xtask bench`: what wbscope costs its host. Runs the release daemon as a child process
//! against workloads on a loop-device ext4 filesystem it makes and removes, measures the
//! alternatives in the same run, and writes the report (BENCHMARKS.md). Each phase lives in its
//! own module; this one wires them and checks that the report is complete.

mod ab;
mod alternatives;
mod bio_cost;
mod bpfstats;
mod cost;
mod daemon;
mod daemon_cost;
mod floor;
mod interrupt;
mod plan;
mod procfs;
mod report;
mod soak;
mod soak_load;
mod stats;
mod syscall;
mod targets;
mod workloads;

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use testkit::{FsKind, LoopFs};

use self::alternatives::Alternative;
use self::daemon::Probe;
use self::plan::{Phases, Plan};
use self::report::{Header, Report, Section};
use self::workloads::Workload;
use crate::pins::Pins;
use crate::{host, run, setup};

/// Size of the sparse image behind the benchmark filesystem (fio's file plus the buffered one).
const FS_MIB: u64 = 4096;

/// The rows of the target table that the daemon-cost phase alone fills.
const DAEMON_TARGETS: &[&str] = &["rss", "idle-cpu", "scrape-p99"];

/// Paired rounds of the per-bio phase: four in each attach order.
const BIO_COST_ROUNDS: usize = 8;

/// Arguments of `cargo xtask bench`.
#[derive(clap::Args, Debug, Default)]
pub struct BenchArgs {
    /// Every phase briefly (under 3 minutes, one A/B pair, a 15 s soak); only checks that the
    /// report has every row. Writes target/bench/BENCHMARKS-quick.md unless --out is given.
    #[arg(long)]
    pub quick: bool,
    /// Soak length in minutes; 0 skips the soak (ignored with --quick).
    #[arg(long, value_name = "MINUTES", default_value_t = 30)]
    pub soak: u64,
    /// Only the soak (`--soak` minutes, at least 1): the other phases are skipped and the report
    /// goes to target/bench/SOAK.md unless --out is given.
    #[arg(long, conflicts_with = "quick")]
    pub soak_only: bool,
    /// Only what device writes by source add per bio (eight paired fio rounds, about 4 minutes):
    /// the report goes to target/bench/BIO-COST.md unless --out is given.
    #[arg(long, conflicts_with_all = ["quick", "soak_only"])]
    pub bio_cost_only: bool,
    /// With --bio-cost-only: compare this build with another wbscope binary instead of the
    /// family on with the family off, both daemons with the family on, on the same bios: what
    /// a change to the per-bio path adds (negative: saves) against the build it changes.
    #[arg(long, value_name = "BINARY", requires = "bio_cost_only")]
    pub bio_cost_against: Option<PathBuf>,
    /// Only the daemon's own cost (CPU and RSS idle and under fio, scrape latency; about 3
    /// minutes, 40 s with --quick): the report goes to target/bench/DAEMON-COST.md unless --out
    /// is given.
    #[arg(long, conflicts_with_all = ["soak_only", "bio_cost_only"])]
    pub daemon_cost_only: bool,
    /// Interleaved A/B pairs per workload (ignored with --quick).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..))]
    pub pairs: u64,
    /// Where to write the report [default: BENCHMARKS.md in the workspace root].
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Do not check for (or install) missing tools first.
    #[arg(long)]
    pub no_setup: bool,
}

/// What every phase needs.
pub struct Ctx {
    pub root: PathBuf,
    /// The release daemon.
    pub binary: PathBuf,
    pub plan: Plan,
    /// A directory on the benchmark filesystem.
    pub work_dir: PathBuf,
    /// Daemon logs, fio JSON, the alternatives' output.
    pub log_dir: PathBuf,
    /// `--bio-cost-against`: the other build the per-bio phase compares this one with.
    pub bio_cost_against: Option<PathBuf>,
}

impl Ctx {
    /// A file in the log directory.
    pub fn log_path(&self, name: &str) -> PathBuf {
        self.log_dir.join(name)
    }
}

/// Runs the benchmark and writes the report; fails if a phase failed or a row is missing.
pub fn run(pins: &Pins, args: &BenchArgs) -> Result<()> {
    setup::ensure(pins, crate::apt::Purpose::Test, args.no_setup)?;
    if !host::is_root() {
        bail!("the benchmark loads eBPF programs and makes loop devices: run it as root");
    }
    interrupt::install()?;
    run::build_release(pins)?;
    let plan = if args.quick {
        Plan::quick()
    } else {
        Plan::full(usize::try_from(args.pairs)?, args.soak)
    };
    // The one place the phase flags are read: the report's path, header, phases and expected
    // rows all follow `phases`.
    let phases = if args.soak_only {
        Phases::SoakOnly
    } else if args.bio_cost_only {
        Phases::BioCostOnly {
            rounds: BIO_COST_ROUNDS,
        }
    } else if args.daemon_cost_only {
        Phases::DaemonCostOnly
    } else {
        Phases::All
    };
    if let Some(other) = &args.bio_cost_against
        && !other.is_file()
    {
        bail!(
            "--bio-cost-against {}: no such file; expected a wbscope binary, e.g. a copy of \
             target/release/wbscope built from the commit to compare with",
            other.display()
        );
    }
    if phases == Phases::SoakOnly && plan.soak_secs == 0 {
        bail!("--soak-only needs --soak MINUTES of at least 1");
    }
    let out = args.out.clone().unwrap_or_else(|| match phases {
        Phases::SoakOnly => pins.root.join("target/bench/SOAK.md"),
        Phases::BioCostOnly { .. } => pins.root.join("target/bench/BIO-COST.md"),
        Phases::DaemonCostOnly => pins.root.join("target/bench/DAEMON-COST.md"),
        Phases::All if args.quick => pins.root.join("target/bench/BENCHMARKS-quick.md"),
        Phases::All => pins.root.join("BENCHMARKS.md"),
    });
    let log_dir = pins.root.join("target/bench/logs");
    if log_dir.exists() {
        std::fs::remove_dir_all(&log_dir)
            .with_context(|| format!("removing {}", log_dir.display()))?;
    }
    std::fs::create_dir_all(&log_dir).with_context(|| format!("creating {}", log_dir.display()))?;

    let binary = run::release_binary(pins);
    let probes = daemon::check(&binary)?;
    let fs = LoopFs::new(FsKind::Ext4, FS_MIB)?;
    let work_dir = fs.mountpoint().join("bench");
    std::fs::create_dir(&work_dir).with_context(|| format!("creating {}", work_dir.display()))?;
    println!(
        "[bench] {} on {} ({}); logs in {}",
        plan.describe_phases(phases),
        fs.device_path().display(),
        fs.kind().fstype(),
        log_dir.display()
    );
    let ctx = Ctx {
        root: pins.root.clone(),
        binary,
        plan,
        work_dir,
        log_dir,
        bio_cost_against: args.bio_cost_against.clone(),
    };
    let load_start = procfs::loadavg();
    let mut report = Report {
        header: header(&ctx, &probes, phases),
        sections: Vec::new(),
    };
    let failures = match phases {
        Phases::SoakOnly => measure_soak(&ctx, &mut report),
        Phases::BioCostOnly { rounds } => measure_bio_cost(&ctx, rounds, &mut report),
        Phases::DaemonCostOnly => measure_daemon_cost(&ctx, &mut report),
        Phases::All => measure_all(&ctx, &probes, &mut report),
    };
    report.header.load = format!("{load_start} → {}", procfs::loadavg());
    drop(fs);
    // An interrupted run would overwrite the last complete report with a partial one.
    interrupt::check().context("report not written")?;

    report.write(&out)?;
    println!("\n{}", report.markdown());
    println!("[bench] report written to {}", out.display());
    let mut expected = expected_rows(&ctx.plan, &probes);
    match phases {
        Phases::SoakOnly => expected.retain(|r| r.starts_with("soak/")),
        Phases::BioCostOnly { .. } => expected.retain(|r| r.starts_with("bio-cost/")),
        Phases::DaemonCostOnly => expected.retain(|r| {
            r.starts_with("daemon/") || DAEMON_TARGETS.iter().any(|t| r == &format!("targets/{t}"))
        }),
        Phases::All => {}
    }
    let missing = report.missing(&expected);
    if !failures.is_empty() || !missing.is_empty() {
        bail!(
            "benchmark incomplete: failed phases: [{}]; missing rows: [{}]",
            failures.join(", "),
            missing.join(", ")
        );
    }
    Ok(())
}

/// Runs the soak alone (`--soak-only`). Returns the failed phase, if it failed.
fn measure_soak(ctx: &Ctx, report: &mut Report) -> Vec<String> {
    match soak::run(ctx) {
        Ok(s) => {
            report.sections.push(soak::section(&s));
            Vec::new()
        }
        Err(e) => {
            println!("[bench] phase soak FAILED: {e:#}");
            report.sections.push(Section::failed("soak", "Soak", &e));
            vec!["soak".to_owned()]
        }
    }
}

/// Runs the per-bio phase alone (`--bio-cost-only`). Returns the failed phase, if it failed.
fn measure_bio_cost(ctx: &Ctx, rounds: usize, report: &mut Report) -> Vec<String> {
    match bio_cost::run(ctx, rounds) {
        Ok(b) => {
            report.sections.push(bio_cost::section(&b));
            Vec::new()
        }
        Err(e) => {
            println!("[bench] phase bio-cost FAILED: {e:#}");
            report.sections.push(Section::failed(
                "bio-cost",
                "What device writes by source add per bio",
                &e,
            ));
            vec!["bio-cost".to_owned()]
        }
    }
}

/// Runs the daemon-cost phase alone (`--daemon-cost-only`), with its rows of the target table.
/// Returns the failed phase, if it failed.
fn measure_daemon_cost(ctx: &Ctx, report: &mut Report) -> Vec<String> {
    match daemon_cost::run(ctx) {
        Ok(d) => {
            report.sections.push(targets::daemon_section(&d));
            report.sections.push(daemon_cost::section(&d));
            Vec::new()
        }
        Err(e) => {
            println!("[bench] phase daemon FAILED: {e:#}");
            report
                .sections
                .push(Section::failed("daemon", "Daemon cost", &e));
            vec!["daemon".to_owned()]
        }
    }
}

/// Runs every phase, collecting sections; a failed phase becomes a section saying so, and the
/// others still run. Returns the names of the failed phases.
fn measure_all(ctx: &Ctx, probes: &[Probe], report: &mut Report) -> Vec<String> {
    let mut failures = Vec::new();
    let mut keep = |id: &'static str, title: &str, result: Result<Section>| match result {
        Ok(section) => section,
        Err(e) => {
            println!("[bench] phase {id} FAILED: {e:#}");
            failures.push(id.to_owned());
            Section::failed(id, title, &e)
        }
    };
    let mut costs = Vec::new();
    let mut sections = Vec::new();
    match cost::measure_wbscope(ctx) {
        Ok(c) => costs.extend(c),
        Err(e) => sections.push(keep("per-op", "wbscope BPF cost", Err(e))),
    }
    for alt in Alternative::ALL {
        match alternatives::measure(alt, ctx) {
            Ok(c) => costs.extend(c),
            Err(e) => sections.push(keep("per-op", alt.name(), Err(e))),
        }
    }
    sections.push(cost::per_op_section(&costs));
    sections.push(cost::programs_section(&costs));
    sections.push(floor::section(&costs, probes));

    let mut ab_results = Vec::new();
    for w in Workload::ALL {
        match ab::run(ctx, w) {
            Ok(p) => ab_results.push(p),
            Err(e) => sections.push(keep("ab", &format!("A/B {}", w.key()), Err(e))),
        }
    }
    sections.push(ab::section(&ab_results));

    let bio = bio_cost::run(ctx, if ctx.plan.quick { 2 } else { BIO_COST_ROUNDS });
    let result = bio.as_ref().map(bio_cost::section);
    let result = result.map_err(|e| anyhow::anyhow!("{e:#}"));
    sections.push(keep(
        "bio-cost",
        "What device writes by source add per bio",
        result,
    ));

    let syscall_cost = syscall::run(ctx, probes);
    let result = match &syscall_cost {
        Ok(c) => Ok(syscall::section(c, probes)),
        Err(e) => Err(anyhow::anyhow!("{e:#}")),
    };
    sections.push(keep("syscall", "Syscall tracepoint cost", result));

    let own_cost = daemon_cost::run(ctx);
    let result = own_cost.as_ref().map(daemon_cost::section);
    let result = result.map_err(|e| anyhow::anyhow!("{e:#}"));
    sections.push(keep("daemon", "Daemon cost", result));

    if ctx.plan.soak_secs > 0 {
        let result = soak::run(ctx).map(|s| soak::section(&s));
        sections.push(keep("soak", "Soak", result));
    }
    let inputs = targets::Inputs {
        costs: &costs,
        ab: &ab_results,
        daemon: own_cost.as_ref().ok(),
        syscall: syscall_cost.as_ref().ok(),
        probes,
        bio: bio.as_ref().ok(),
    };
    report.sections.push(targets::section(&inputs));
    report.sections.extend(sections);
    failures
}

/// Every `section/row` the report must have for this plan and probe set.
fn expected_rows(plan: &Plan, probes: &[Probe]) -> Vec<String> {
    let mut rows: Vec<String> = [
        "per-op",
        "vs-biolatency",
        "hot-hooks",
        "buffered-vs-biolatency",
        "ab-fio",
        "ab-buffered",
        "syscall-tax",
        "bio-addition",
    ]
    .iter()
    .chain(DAEMON_TARGETS)
    .map(|r| format!("targets/{r}"))
    .collect();
    for tool in ["wbscope", "floor", "bpftrace", "biolatency"] {
        for w in Workload::ALL {
            rows.push(format!("per-op/{tool}/{}", w.key()));
        }
    }
    for p in probes.iter().filter(|p| p.attached) {
        rows.push(format!("programs/wbscope/{}", p.name));
        rows.push(format!("floor/{}", p.name));
    }
    for w in Workload::ALL {
        rows.push(format!("floor/per-op/{}", w.key()));
    }
    for r in ["throughput", "fsync-p99"] {
        rows.push(format!("ab/fio/{r}"));
    }
    for r in [
        "with",
        "without",
        "addition-on-first",
        "addition-on-second",
        "addition",
        "addition-interval",
    ] {
        rows.push(format!("bio-cost/{r}"));
    }
    for r in ["throughput", "sync-time"] {
        rows.push(format!("ab/buffered/{r}"));
    }
    for r in [
        "without",
        "with",
        "overhead",
        "overhead-without-syscall-probes",
        "hook-path",
    ] {
        rows.push(format!("syscall/{r}"));
    }
    for r in [
        "idle-cpu",
        "idle-rss",
        "load-cpu",
        "load-rss",
        "startup-rss",
        "scrape-1",
        "scrape-concurrent",
    ] {
        rows.push(format!("daemon/{r}"));
    }
    if plan.soak_secs > 0 {
        for r in [
            "duration",
            "stayed-up",
            "rss",
            "scrape-latency",
            "scrapes",
            "events-dropped",
            "map-errors",
            "rss-growth",
            "slowloris",
            "map-pressure",
            "losses",
            "load",
        ] {
            rows.push(format!("soak/{r}"));
        }
    }
    rows
}

fn header(ctx: &Ctx, probes: &[Probe], phases: Phases) -> Header {
    let args: Vec<String> = std::env::args().skip(1).collect();
    Header {
        command: format!("cargo xtask {}", args.join(" ")),
        date: utc_now(),
        kernel: procfs::kernel_release(),
        cpu: procfs::cpu_description(),
        load: String::new(),
        probes: probes
            .iter()
            .filter(|p| p.attached)
            .map(|p| format!("{} ({})", p.name, p.hook))
            .collect(),
        mode: ctx.plan.describe_phases(phases),
    }
}

/// The current UTC time as `YYYY-MM-DD HH:MM`.
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format_utc(secs)
}

/// `secs` since the epoch as `YYYY-MM-DD HH:MM` (proleptic Gregorian calendar; the
/// days-to-civil algorithm from Howard Hinnant's date library).
fn format_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let (hour, minute) = ((secs % 86_400) / 3600, (secs % 3600) / 60);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc_dates() {
        assert_eq!(format_utc(0), "1970-01-01 00:00");
        assert_eq!(format_utc(951_782_400), "2000-02-29 00:00");
        assert_eq!(format_utc(1_795_987_855), "2026-11-29 21:30");
    }

    #[test]
    fn expected_rows_follow_probes_and_soak() {
        let probes = vec![
            Probe {
                name: "a".into(),
                hook: "tracepoint x/a".into(),
                attached: true,
            },
            Probe {
                name: "b".into(),
                hook: "tp_btf b".into(),
                attached: false,
            },
        ];
        let mut plan = Plan::quick();
        let rows = expected_rows(&plan, &probes);
        assert!(rows.contains(&"programs/wbscope/a".to_owned()));
        assert!(!rows.contains(&"programs/wbscope/b".to_owned()));
        assert!(rows.contains(&"soak/stayed-up".to_owned()));
        plan.soak_secs = 0;
        assert!(
            !expected_rows(&plan, &probes)
                .iter()
                .any(|r| r.starts_with("soak/"))
        );
    }
}
