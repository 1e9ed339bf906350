//! `cargo xtask test`: every test tier in order, with timings and a summary.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Result, bail};
use clap::ValueEnum;

use crate::cmd::{self, Cmd};
use crate::pins::Pins;
use crate::{bench, dashboards, host, lint, package, rootfs, run, setup, vmtest};

/// A test tier. Declaration order is run order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Tier {
    /// rustfmt and clippy (workspace and the eBPF crate).
    Lint,
    /// Non-ignored tests of the workspace.
    Unit,
    /// Privileged tests against the running kernel (root).
    Kernel,
    /// The release binary end to end (root).
    Smoke,
    /// The release artifacts installed and run: tarball and RPM on a clean Debian root, the OCI
    /// image as a container, the .deb under a booted systemd (root).
    Artifacts,
    /// Dashboards and rules: the offline check, then every query against a real Prometheus
    /// scraping the release daemon under load (root).
    E2e,
    /// `cargo xtask bench --quick`: every benchmark phase briefly; passes if the report has
    /// every row (root).
    BenchQuick,
    /// Debian's 5.10, 6.1, 6.12 and unstable's newest kernel in QEMU: `wbscope check` and a
    /// kernel-test subset (root; about 5-8 minutes). Part of the default run unless
    /// `WBSCOPE_VMTEST=0`.
    Vm,
}

impl Tier {
    const ALL: [Tier; 8] = [
        Tier::Lint,
        Tier::Unit,
        Tier::Kernel,
        Tier::Smoke,
        Tier::Artifacts,
        Tier::E2e,
        Tier::BenchQuick,
        Tier::Vm,
    ];

    fn name(self) -> &'static str {
        match self {
            Tier::Lint => "lint",
            Tier::Unit => "unit",
            Tier::Kernel => "kernel",
            Tier::Smoke => "smoke",
            Tier::Artifacts => "artifacts",
            Tier::E2e => "e2e",
            Tier::BenchQuick => "bench-quick",
            Tier::Vm => "vm",
        }
    }

    /// Tiers whose failure makes this one pointless: a workspace whose plain tests fail is not
    /// worth the slow privileged runs. Lint failures block nothing.
    fn depends_on(self) -> &'static [Tier] {
        match self {
            Tier::Lint | Tier::Unit => &[],
            Tier::Kernel
            | Tier::Smoke
            | Tier::Artifacts
            | Tier::E2e
            | Tier::BenchQuick
            | Tier::Vm => &[Tier::Unit],
        }
    }
}

/// Arguments of `cargo xtask test`.
#[derive(clap::Args, Debug)]
pub struct TestArgs {
    /// Run only this tier (repeatable); default: all, in order (`WBSCOPE_VMTEST=0` leaves out
    /// the vm tier, which boots four kernels in QEMU).
    #[arg(long = "tier", value_enum)]
    pub tiers: Vec<Tier>,
    /// Do not check for (or install) missing tools first.
    #[arg(long)]
    pub no_setup: bool,
}

enum Outcome {
    Passed,
    /// With the error, repeated under the summary table (it names the failed tests).
    Failed(String),
    Skipped(Tier),
}

/// Runs the selected tiers and prints the summary; the exit code is 1 if any tier did not pass.
pub fn run(pins: &Pins, args: &TestArgs) -> Result<ExitCode> {
    setup::ensure(pins, crate::apt::Purpose::Test, args.no_setup)?;

    let vm_wanted = std::env::var("WBSCOPE_VMTEST").map_or(true, |v| v != "0");
    let selected = select(&args.tiers, vm_wanted);
    let total = selected.len();
    let mut results: Vec<(Tier, Outcome, f64)> = Vec::new();
    for (i, &tier) in selected.iter().enumerate() {
        let banner = format!("tier {}/{total}: {}", i + 1, tier.name());
        println!("==> {banner}");
        let failed_dep = tier.depends_on().iter().copied().find(|dep| {
            results
                .iter()
                .any(|(t, o, _)| t == dep && !matches!(o, Outcome::Passed))
        });
        let start = Instant::now();
        let outcome = match failed_dep {
            Some(dep) => {
                println!("<== {banner} skipped: tier {} did not pass", dep.name());
                Outcome::Skipped(dep)
            }
            None => match run_tier(pins, tier) {
                Ok(()) => Outcome::Passed,
                Err(e) => {
                    println!("xtask: tier {} failed: {e:#}", tier.name());
                    Outcome::Failed(format!("{e:#}"))
                }
            },
        };
        let secs = start.elapsed().as_secs_f64();
        if !matches!(outcome, Outcome::Skipped(_)) {
            let word = if matches!(outcome, Outcome::Passed) {
                "passed"
            } else {
                "FAILED"
            };
            println!("<== {banner} {word} in {secs:.1}s");
        }
        results.push((tier, outcome, secs));
    }
    Ok(summary(&results))
}

/// The tiers to run, in order: the named ones, or all (the vm tier only if `vm_wanted`).
fn select(named: &[Tier], vm_wanted: bool) -> Vec<Tier> {
    Tier::ALL
        .into_iter()
        .filter(|t| {
            if named.is_empty() {
                *t != Tier::Vm || vm_wanted
            } else {
                named.contains(t)
            }
        })
        .collect()
}

/// Prints the table and the closing `xtask: N passed, M failed` line (a skipped tier counts as
/// failed: it did not pass, and the line must add up to the number of tiers).
fn summary(results: &[(Tier, Outcome, f64)]) -> ExitCode {
    println!();
    println!("{:<12} {:<20} {:>9}", "tier", "result", "seconds");
    for (tier, outcome, secs) in results {
        let result = match outcome {
            Outcome::Passed => "pass".to_owned(),
            Outcome::Failed(_) => "FAIL".to_owned(),
            Outcome::Skipped(dep) => format!("SKIP ({} failed)", dep.name()),
        };
        println!("{:<12} {result:<20} {secs:>9.1}", tier.name());
    }
    // The log's tail is often all a CI page shows: what failed, again, right above the total.
    for (tier, outcome, _) in results {
        if let Outcome::Failed(why) = outcome {
            println!("\n{}: {why}", tier.name());
        }
    }
    let passed = results
        .iter()
        .filter(|(_, o, _)| matches!(o, Outcome::Passed))
        .count();
    let failed = results.len() - passed;
    println!("xtask: {passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn run_tier(pins: &Pins, tier: Tier) -> Result<()> {
    let root = &pins.root;
    match tier {
        Tier::Lint => lint::run(pins),
        // testkit's tests need root, so they run once, in the kernel tier; probe-ebpf only builds
        // for the BPF target.
        Tier::Unit => Cmd::workspace_cargo(root, &pins.toolchain)
            .args([
                "test",
                "--workspace",
                "--exclude",
                "probe-ebpf",
                "--exclude",
                "testkit",
            ])
            .reporting_failed_tests()
            .run(),
        Tier::Kernel => {
            if !host::is_root() {
                bail!(
                    "the kernel tier loads eBPF programs and needs root: run `cargo xtask test` \
                     as root (or `--tier lint --tier unit` to skip the privileged tiers)"
                );
            }
            // One test thread: the tests share loop devices, tracepoints and BPF maps.
            cmd::run_all([
                Cmd::workspace_cargo(root, &pins.toolchain)
                    .args([
                        "test",
                        "-p",
                        "wbscope",
                        "--test",
                        "kernel",
                        "--",
                        "--ignored",
                        "--test-threads=1",
                    ])
                    .reporting_failed_tests(),
                Cmd::workspace_cargo(root, &pins.toolchain)
                    .args(["test", "-p", "testkit", "--", "--test-threads=1"])
                    .reporting_failed_tests(),
            ])
        }
        Tier::Smoke => {
            run::build_release(pins)?;
            let deb = package::build_deb(
                pins,
                &package::PackageArgs {
                    no_build: true,
                    no_setup: true,
                },
            )?;
            Cmd::workspace_cargo(root, &pins.toolchain)
                .env("WBSCOPE_BIN", run::release_binary(pins))
                .env("WBSCOPE_DEB", deb)
                .args([
                    "test", "-p", "wbscope", "--test", "smoke", "--test", "service",
                ])
                .arg("--")
                .args(["--ignored", "--test-threads=1"])
                .reporting_failed_tests()
                .run()
        }
        Tier::Artifacts => {
            if !host::is_root() {
                bail!(
                    "the artifacts tier installs packages into a root file system and boots it: run as root"
                );
            }
            run::build_release(pins)?;
            let a = package::build_all(
                pins,
                &package::PackageArgs {
                    no_build: true,
                    no_setup: true,
                },
            )?;
            let rootfs = rootfs::ensure(pins)?;
            Cmd::workspace_cargo(root, &pins.toolchain)
                .env("WBSCOPE_BIN", run::release_binary(pins))
                .env("WBSCOPE_TARBALL", &a.tarball)
                .env("WBSCOPE_DEB", &a.deb)
                .env("WBSCOPE_RPM", &a.rpm)
                .env("WBSCOPE_IMAGE", &a.image)
                .env("WBSCOPE_IMAGE_NAME", &a.image_name)
                .env("WBSCOPE_ROOTFS", rootfs)
                .args(["test", "-p", "wbscope", "--test", "artifacts", "--"])
                .args(["--ignored", "--test-threads=1", "--nocapture"])
                .reporting_failed_tests()
                .run()
        }
        Tier::Vm => vmtest::run(
            pins,
            &vmtest::VmtestArgs {
                kernel: vmtest::KernelChoice::All,
                tests: Vec::new(),
                all_tests: false,
                threaded: false,
                timeout: None,
                test_timeout: vmtest::DEFAULT_TEST_TIMEOUT,
                readme: false,
                no_setup: true,
            },
        ),
        Tier::E2e => {
            // Builds the release binary and asks it for its metric names first.
            dashboards::check(pins)?;
            Cmd::workspace_cargo(root, &pins.toolchain)
                .env("WBSCOPE_BIN", run::release_binary(pins))
                .args(["test", "-p", "wbscope-dashboards", "--test", "e2e", "--"])
                .args(["--ignored", "--test-threads=1", "--nocapture"])
                .reporting_failed_tests()
                .run()
        }
        Tier::BenchQuick => bench::run(
            pins,
            &bench::BenchArgs {
                quick: true,
                // `test` already ran setup (or was told not to).
                no_setup: true,
                ..bench::BenchArgs::default()
            },
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_sort_in_run_order_and_lint_blocks_nothing() {
        let mut tiers = vec![
            Tier::BenchQuick,
            Tier::Vm,
            Tier::Artifacts,
            Tier::Smoke,
            Tier::E2e,
            Tier::Lint,
            Tier::Kernel,
            Tier::Unit,
        ];
        tiers.sort();
        assert_eq!(tiers, Tier::ALL);
        assert!(
            Tier::ALL
                .iter()
                .all(|t| !t.depends_on().contains(&Tier::Lint))
        );
    }

    #[test]
    fn vm_tier_runs_by_default_unless_turned_off() {
        assert!(!select(&[], false).contains(&Tier::Vm));
        assert_eq!(select(&[], true), Tier::ALL);
        assert_eq!(select(&[Tier::Vm], false), [Tier::Vm]);
    }
}
