//! `cargo xtask`: developer and CI tasks for wbscope. This file only wires the subcommands;
//! each lives in its own module.

mod apt;
mod bench;
mod cmd;
mod dashboards;
mod docs;
mod family_map;
mod host;
mod install;
mod linker;
mod lint;
mod package;
mod pins;
mod pytools;
mod rootfs;
mod run;
mod services;
mod setup;
mod test;
mod test_failures;
mod toolchain;
mod vmtest;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::pins::Pins;

/// Developer tasks for wbscope.
#[derive(Parser, Debug)]
#[command(name = "cargo xtask", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Install the missing apt packages, rust toolchains and bpf-linker (Debian 12, as root).
    Setup(SetupArgs),
    /// Print which of setup's tools are present or missing, installing nothing.
    CheckSetup(SetupArgs),
    /// Build wbscope in release mode and run `wbscope run [ARGS]`.
    Run(run::RunArgs),
    /// Run the test tiers: lint, unit, kernel, smoke, e2e, bench-quick.
    Test(test::TestArgs),
    /// Check the Grafana dashboards and Prometheus rules (root: asks the daemon for its metric
    /// names); `--write` regenerates them.
    Dashboards(dashboards::DashboardsArgs),
    /// Write docs/metrics.md from the daemon's metric descriptors (root); `--check` compares.
    Docs(docs::DocsArgs),
    /// Install the release binary, the systemd unit and the example config (enables nothing).
    Install(install::InstallArgs),
    /// Build every release artifact: binary tarball, .deb, .rpm and OCI image (target/package).
    Package(package::PackageArgs),
    /// Measure what wbscope costs (BPF time per operation, A/B throughput, syscall overhead,
    /// daemon CPU and memory, soak) beside bpftrace and biolatency; writes BENCHMARKS.md.
    Bench(bench::BenchArgs),
    /// Boot Debian's cloud kernels (5.10, 6.1, 6.12, unstable's newest) in QEMU and run `wbscope
    /// check` and a subset of the kernel tests inside (root; slow: software emulation).
    Vmtest(vmtest::VmtestArgs),
    /// Run only the lint tier.
    Lint {
        /// Do not check for (or install) missing tools first.
        #[arg(long)]
        no_setup: bool,
    },
}

/// Arguments of `cargo xtask setup` and `check-setup`.
#[derive(clap::Args, Debug)]
struct SetupArgs {
    /// What to set the machine up for: `run` (build and run the daemon), `package` (also build
    /// the release artifacts) or `test` (also every test tier; the default).
    #[arg(long = "for", value_enum, default_value = "test")]
    purpose: apt::Purpose,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    let pins = Pins::load()?;
    match command {
        Command::Setup(args) => setup::setup(&pins, args.purpose)?,
        Command::CheckSetup(args) => setup::check(&pins, args.purpose)?,
        Command::Run(args) => run::run(&pins, &args)?,
        Command::Test(args) => return test::run(&pins, &args),
        Command::Dashboards(args) => dashboards::run(&pins, &args)?,
        Command::Docs(args) => docs::run(&pins, &args)?,
        Command::Install(args) => install::run(&pins, &args)?,
        Command::Package(args) => package::run(&pins, &args)?,
        Command::Bench(args) => bench::run(&pins, &args)?,
        Command::Vmtest(args) => vmtest::run(&pins, &args)?,
        Command::Lint { no_setup } => {
            setup::ensure(&pins, apt::Purpose::Run, no_setup)?;
            lint::run(&pins)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
