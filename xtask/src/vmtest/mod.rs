//! `cargo xtask vmtest`: boots Debian's cloud kernels (Debian 11's 5.10, Debian 12's 6.1 and
//! 6.12, unstable's newest) in QEMU with the host's root shared read-only, runs `wbscope check`
//! and a subset of the kernel tests inside, and writes the kernel support table. Software emulation only: it takes about a minute or more per kernel.

mod archive;
mod boot;
mod guest;
mod initramfs;
mod kernel;
mod nfs_helpers;
mod outcome;
mod report;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::ValueEnum;

use crate::cmd::Cmd;
use crate::pins::Pins;
use crate::{host, run, setup};
use outcome::Outcome;
use report::KernelResult;

/// Which kernels to boot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KernelChoice {
    /// Debian 11's 5.10 (bullseye, bullseye-security).
    #[value(name = "5.10")]
    V5_10,
    /// Debian 12's 6.1 (bookworm, bookworm-security).
    #[value(name = "6.1")]
    V6_1,
    /// Debian 12's 6.12 (bookworm, bookworm-security).
    #[value(name = "6.12")]
    V6_12,
    /// The newest kernel Debian packages (unstable).
    Newest,
    /// Every series above, oldest first.
    All,
}

impl KernelChoice {
    /// The series to boot, oldest first.
    fn series(self) -> Result<Vec<&'static kernel::Series>> {
        let names: &[&str] = match self {
            KernelChoice::V5_10 => &["5.10"],
            KernelChoice::V6_1 => &["6.1"],
            KernelChoice::V6_12 => &["6.12"],
            KernelChoice::Newest => &["newest"],
            KernelChoice::All => return Ok(kernel::SERIES.iter().collect()),
        };
        names.iter().map(|n| kernel::series(n)).collect()
    }
}

/// The kernel tests run in each guest: fsync counts, sync work by mode and reason, block
/// requests by op and sync flag, dirty throttling, every sync call (io_uring included) once,
/// writeback waits (on fexit where the kernel allows it),
/// and NFS WRITE stability and COMMITs on a loopback NFSv4.2 mount.
pub const DEFAULT_TESTS: &[&str] = &[
    "sync_calls::fsync_on_throttled_ext4_is_counted_exactly",
    "writeback::sync_runs_sync_all_work_and_writes_back_the_dirty_data",
    "block::direct_writes_are_sync_idle_write_requests",
    "dirty_throttle::throttled_writer_pauses_match_an_independent_trace",
    "sync_all_calls::every_sync_call_is_counted_on_ext4",
    "sync_call_hooks::fentry_and_tracepoint_hooks_count_the_same_sync_calls",
    "writeback_wait::fdatasync_behind_started_writeback_waits_on_the_device",
    "nfs::sequential_writes_and_fsync_are_unstable_writes_and_a_commit",
    "nfs::random_4k_writes_and_fsync_are_counted_by_the_stability_the_kernel_chose",
    "cgroups::each_cgroup_counts_exactly_its_own_fsyncs",
    "cgroups::the_cap_on_named_cgroups_holds",
    "cgroups::a_throttled_writers_pauses_are_charged_to_its_cgroup",
];

/// Boots of one kernel that died before our init ran, before giving up.
const BOOT_ATTEMPTS: u32 = 3;

/// Seconds one test may run in the guest unless `--test-timeout` says otherwise.
pub const DEFAULT_TEST_TIMEOUT: u64 = 300;

/// The default QEMU limit's share for booting and `wbscope check` (about a minute together
/// under emulation on a busy host).
const BOOT_AND_CHECK_SECS: u64 = 300;

/// The default QEMU limit's share per test beyond its own limit: the watchdog's dump and
/// starting the next test.
const PER_TEST_SLACK_SECS: u64 = 30;

/// How much longer than the longest guest-side limit (a test's, or `wbscope check`'s) the console
/// may stay silent before the guest is taken for dead: the guest's watchdog prints when its
/// limit passes, so silence beyond that means the guest no longer runs.
const SILENCE_SLACK_SECS: u64 = 120;

/// Arguments of `cargo xtask vmtest`.
#[derive(clap::Args, Debug)]
pub struct VmtestArgs {
    /// The kernel(s) to boot.
    #[arg(long, value_enum, default_value = "all")]
    pub kernel: KernelChoice,
    /// Run this kernel test (exact name, repeatable) instead of the default subset.
    #[arg(long = "test")]
    pub tests: Vec<String>,
    /// Seconds one boot may take before QEMU is killed (default: time for the boot, the check
    /// and every test's own limit).
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Seconds one test may take in the guest before it is killed, with the guest's stuck
    /// tasks printed (the default subset takes 5–60 s per test under emulation).
    #[arg(long, default_value_t = DEFAULT_TEST_TIMEOUT)]
    pub test_timeout: u64,
    /// Run every kernel test instead of the default subset.
    #[arg(long, conflicts_with = "tests")]
    pub all_tests: bool,
    /// Run the guests' two vCPUs on a host thread each (threaded TCG) instead of one thread
    /// taking them in turn; the boot that runs the tests left after a hang is one-thread always.
    #[arg(long)]
    pub threaded: bool,
    /// Also write the support table into README.md.
    #[arg(long)]
    pub readme: bool,
    /// Do not check for (or install) missing tools first.
    #[arg(long)]
    pub no_setup: bool,
}

/// Builds, boots every selected kernel, prints each one's results and the table; fails if any
/// kernel's check or tests failed.
pub fn run(pins: &Pins, args: &VmtestArgs) -> Result<()> {
    setup::ensure(pins, crate::apt::Purpose::Test, args.no_setup)?;
    if !host::is_root() {
        bail!("vmtest runs virtiofsd over the host's root and needs root");
    }
    run::build_release(pins)?;
    let kernel_tests = build_kernel_tests(pins)?;
    let cache = pins.root.join("target/vmtest");
    let tests: Vec<String> = if args.all_tests {
        list_kernel_tests(&kernel_tests)?
    } else if args.tests.is_empty() {
        DEFAULT_TESTS.iter().map(|t| (*t).to_owned()).collect()
    } else {
        args.tests.clone()
    };

    let (host, host_check) = host_result(pins)?;
    let mut results = vec![host];
    for series in args.kernel.series()? {
        println!("==> vmtest: Linux {} ({})", series.name, series.release);
        let mut result = boot_one(pins, series, &cache, &kernel_tests, &tests, args)?;
        // Only what this kernel lacks and the host has.
        result
            .notes
            .retain(|n| !host_check.lines().any(|l| l == n.as_str()));
        println!(
            "<== vmtest: {} {} in {:.1}s",
            result.release,
            if result.passed { "passed" } else { "FAILED" },
            result.wall_secs
        );
        results.push(result);
    }

    let table = report::table(&results);
    let out = cache.join("kernel-support.md");
    fs::write(&out, &table).with_context(|| format!("write {}", out.display()))?;
    println!("\n{table}\n(written to {})", out.display());
    if args.readme {
        report::write_readme(&pins.root.join("README.md"), &table)?;
    }
    let booted = &results[1..];
    let passed = booted.iter().filter(|r| r.passed).count();
    println!("vmtest: {passed} passed, {} failed", booted.len() - passed);
    // Again at the very end, where a log's tail shows it: what failed, and where.
    for r in booted.iter().filter(|r| !r.passed) {
        println!("--- {} FAILED:\n{}", r.release, r.failures.trim_end());
    }
    if passed < booted.len() {
        bail!(
            "vmtest failed on some kernel (console logs under {})",
            cache.display()
        );
    }
    Ok(())
}

/// Fetches, boots and reads back one kernel.
fn boot_one(
    pins: &Pins,
    series: &kernel::Series,
    cache: &Path,
    kernel_tests: &Path,
    tests: &[String],
    args: &VmtestArgs,
) -> Result<KernelResult> {
    let start = Instant::now();
    let kernel = kernel::prepare(series, cache)?;
    let nfs_helpers = nfs_helpers::prepare(cache)?;
    let work = cache.join("run").join(series.name);
    fs::create_dir_all(&work).with_context(|| format!("mkdir {}", work.display()))?;
    let initrd = work.join("initramfs.cpio.gz");
    initramfs::build(&kernel, &work, &initrd)?;
    let scratch = boot::scratch_disk(&work.join("scratch.img"), 4096)?;
    let script = work.join("guest.sh");
    let wbscope = run::release_binary(pins);
    let log = work.join("console.log");
    let boot_tests = |tests: &[String], emulation: boot::Emulation| -> Result<String> {
        guest::write_script(
            &guest::Plan {
                kernel_root: &kernel.root,
                wbscope: &wbscope,
                kernel_tests,
                crate_dir: &pins.root.join("daemon"),
                tests,
                test_timeout: args.test_timeout,
                nfs_helpers: &nfs_helpers,
            },
            &script,
        )?;
        let boot = boot::Boot {
            vmlinuz: &kernel.vmlinuz,
            initramfs: &initrd,
            scratch: &scratch,
            guest_script: &script,
            memory_mib: 3072,
            timeout: Duration::from_secs(args.timeout.unwrap_or_else(|| {
                BOOT_AND_CHECK_SECS + tests.len() as u64 * (args.test_timeout + PER_TEST_SLACK_SECS)
            })),
            log: &log,
            silence_limit: Duration::from_secs(
                args.test_timeout.max(guest::CHECK_TIMEOUT) + SILENCE_SLACK_SECS,
            ),
            emulation,
        };
        let mut console = boot::run(&boot)?;
        // Under threaded TCG the kernel now and then oopsed on an int3 while it patched its own
        // code early in boot (once in about ten 6.12 boots): a boot that never reached our init
        // is retried; one that did is not (its failures are the tests').
        for attempt in 2..=BOOT_ATTEMPTS {
            if console.contains("@@VMTEST init ") {
                break;
            }
            println!("vmtest: the kernel did not reach the init; boot attempt {attempt}");
            console = boot::run(&boot)?;
        }
        Ok(console)
    };
    let first = if args.threaded {
        boot::Emulation::Threaded
    } else {
        boot::Emulation::OneThread
    };
    let console = boot_tests(tests, first)?;
    let check = guest::section(&console, "check");
    let check_text = check.as_ref().map(|s| s.text.as_str()).unwrap_or("");
    fs::write(work.join("check.txt"), check_text).context("write check.txt")?;
    let check_ok = check.as_ref().is_some_and(|s| s.rc == Some(0));
    let mut read = read_tests(&console, tests);
    if let Some(hung) = read.hung_in.clone() {
        // The whole guest stopped answering partway (once on 5.10 without a word; twice in a
        // row on 6.1 with a soft lockup while one CPU waited on the other, whose timers had
        // stopped), each time under threaded TCG and not reproduced in tens of boots since. Its
        // console is kept, and one more boot runs the tests it did not get to, the stuck one
        // first, under one-thread TCG (`boot::Emulation::OneThread`) whatever the first boot
        // ran under, so the table shows both what hung and whether the rest pass; a hang that
        // comes from the code under test rather than the emulator hangs that boot too.
        let kept = work.join("console-hung.log");
        fs::write(&kept, &console).with_context(|| format!("write {}", kept.display()))?;
        let left: Vec<String> = read.left.clone();
        println!(
            "vmtest: the guest stopped during {hung} (its console: {}); booting again, under one-thread TCG, for the {} test(s) it did not finish",
            kept.display(),
            left.len()
        );
        let second = boot_tests(&left, boot::Emulation::OneThread)?;
        let again = read_tests(&second, &left);
        read = read.resumed_by(again, &hung);
    }
    let _ = fs::remove_file(&scratch);
    Ok(KernelResult {
        release: kernel.release.clone(),
        source: format!("Debian `{}` in QEMU", kernel.package),
        attached: guest::attached(check_text),
        degraded: guest::not_attached(check_text),
        notes: guest::header_notes(check_text),
        tests: read.summary,
        wall_secs: start.elapsed().as_secs_f64(),
        passed: check_ok && read.ok,
        failures: read.failures,
    })
}

/// What one boot's console said of its tests.
struct TestsRead {
    /// Every test passed (or skipped) and the guest finished.
    ok: bool,
    /// The table's cell.
    summary: String,
    /// The test during which the guest stopped answering, if it did.
    hung_in: Option<String>,
    /// The tests without a result, in plan order, the stuck one first.
    left: Vec<String>,
    /// What to print again at the very end of the run: the failed tests' names and outcomes
    /// and, for a guest that did not finish, its console's last lines.
    failures: String,
}

impl TestsRead {
    /// This boot's reading, completed by `again`, the boot that ran the tests left after the
    /// guest stopped during `hung`.
    fn resumed_by(self, again: TestsRead, hung: &str) -> TestsRead {
        TestsRead {
            ok: again.ok,
            summary: format!(
                "{} (first boot: {}; the guest stopped during `{hung}` and a second boot, under one-thread TCG, ran the tests left)",
                again.summary, self.summary
            ),
            hung_in: again.hung_in,
            left: again.left,
            failures: if again.failures.is_empty() {
                String::new()
            } else {
                format!("{}\n{}", self.failures, again.failures)
            },
        }
    }
}

/// Prints each test's outcome, the console's tail when the guest did not finish and the
/// kernel's own warnings, and sums them up.
fn read_tests(console: &str, tests: &[String]) -> TestsRead {
    let runs = outcome::read(console, tests);
    outcome::print(&runs);
    let mut failures = String::new();
    for r in runs.iter().filter(|r| !r.outcome.is_ok()) {
        failures.push_str(&format!("    {}: {}\n", r.name, r.outcome.label()));
    }
    let finished = console.contains("@@VMTEST exit rc=");
    let left: Vec<String> = runs
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::NoResult | Outcome::NotRun))
        .map(|r| r.name.clone())
        .collect();
    let hung_in = runs
        .iter()
        .find(|r| r.outcome == Outcome::NoResult)
        .map(|r| r.name.clone())
        .filter(|_| !finished);
    if !finished {
        // Timed out or crashed: what the guest printed last says where.
        let text = format!(
            "--- the guest did not finish{}; the console's last lines:\n{}",
            if console.contains("@@VMTEST timeout after") {
                " in time (QEMU was killed)"
            } else {
                ""
            },
            outcome::tail(console, outcome::TAIL_LINES)
        );
        println!("{text}");
        failures.push_str(&text);
        failures.push('\n');
    }
    let warnings = outcome::kernel_warnings(console);
    if !warnings.is_empty() {
        println!("--- the guest kernel complained:");
        failures.push_str("--- the guest kernel complained:\n");
        for line in &warnings {
            println!("{line}");
            failures.push_str(line);
            failures.push('\n');
        }
    }
    let ok = finished && runs.iter().all(|r| r.outcome.is_ok());
    TestsRead {
        ok,
        summary: outcome::summary(&runs, outcome::guest_secs(console)),
        hung_in,
        left,
        failures: if ok { String::new() } else { failures },
    }
}

/// Every kernel test's name, from the test binary's `--list`.
fn list_kernel_tests(kernel_tests: &Path) -> Result<Vec<String>> {
    let out = Cmd::new(kernel_tests)
        .args(["--list", "--ignored"])
        .capture()?;
    let names: Vec<String> = out
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_owned)
        .collect();
    if names.is_empty() {
        bail!("{} --list named no tests", kernel_tests.display());
    }
    Ok(names)
}

/// `wbscope check` on the host's own kernel, for the table's first row (the kernel tier runs
/// its tests there), and its output.
fn host_result(pins: &Pins) -> Result<(KernelResult, String)> {
    let start = Instant::now();
    let out = Cmd::new(run::release_binary(pins)).arg("check").probe()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let release = fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_owned();
    let result = KernelResult {
        release,
        source: "the host".to_owned(),
        attached: guest::attached(&text),
        degraded: guest::not_attached(&text),
        notes: Vec::new(),
        tests: "all, in `cargo xtask test`'s kernel tier".to_owned(),
        wall_secs: start.elapsed().as_secs_f64(),
        passed: out.status.success(),
        failures: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    Ok((result, text.into_owned()))
}

/// Builds the release `--test kernel` binary and returns its path, read from cargo's JSON
/// messages (`"executable":"..."` on the artifact line of the `kernel` target).
fn build_kernel_tests(pins: &Pins) -> Result<PathBuf> {
    let out = Cmd::workspace_cargo(&pins.root, &pins.toolchain)
        .args(["test", "--release", "-p", "wbscope", "--test", "kernel"])
        .args(["--no-run", "--message-format=json-render-diagnostics"])
        .capture()?;
    out.lines()
        .filter(|l| l.contains("\"name\":\"kernel\"") && l.contains("\"kind\":[\"test\"]"))
        .find_map(|l| {
            let rest = &l[l.find("\"executable\":\"")? + "\"executable\":\"".len()..];
            Some(PathBuf::from(&rest[..rest.find('"')?]))
        })
        .context("cargo printed no executable for the kernel test target")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guest_that_stops_mid_test_leaves_that_test_and_the_rest_for_a_second_boot() {
        let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let first = read_tests(
            "@@VMTEST begin test a\n@@VMTEST end test a rc=0\n@@VMTEST begin test b\nrunning\n",
            &names,
        );
        assert!(!first.ok);
        assert_eq!(first.hung_in.as_deref(), Some("b"));
        assert_eq!(first.left, ["b", "c"]);
        assert!(
            first.failures.contains("b: NO RESULT"),
            "{}",
            first.failures
        );

        let again = read_tests(
            "@@VMTEST begin test b\n@@VMTEST end test b rc=0\n@@VMTEST begin test c\n\
             @@VMTEST end test c rc=0\n@@VMTEST tests finished in 9s\n@@VMTEST exit rc=0\n",
            &first.left,
        );
        assert!(again.ok && again.hung_in.is_none());
        let both = first.resumed_by(again, "b");
        assert!(both.ok);
        assert!(both.failures.is_empty());
        assert!(
            both.summary.starts_with("ok. 2 passed; 0 failed; finished in 9 s (first boot: FAILED. 1 passed; 2 failed; the guest stopped during `b`"),
            "{}",
            both.summary
        );
    }
}
