//! `cargo xtask run`: build the daemon in release mode and run it in the foreground.

use std::path::PathBuf;

use anyhow::Result;

use crate::cmd::Cmd;
use crate::pins::Pins;
use crate::setup;

/// Arguments of `cargo xtask run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Do not check for (or install) missing build tools first.
    #[arg(long)]
    pub no_setup: bool,
    /// Extra arguments for `wbscope run`, after `--` (none = default config).
    #[arg(last = true)]
    pub args: Vec<String>,
}

/// `cargo build --release -p wbscope` in the workspace.
pub fn build_release(pins: &Pins) -> Result<()> {
    Cmd::workspace_cargo(&pins.root, &pins.toolchain)
        .args(["build", "--release", "-p", "wbscope"])
        .run()
}

/// Where `build_release` leaves the daemon binary.
pub fn release_binary(pins: &Pins) -> PathBuf {
    pins.root.join("target/release/wbscope")
}

/// Builds, then replaces this process with `wbscope run ARGS`: the daemon gets the terminal and
/// Ctrl-C directly, and its exit status becomes ours. Returns only on failure.
pub fn run(pins: &Pins, args: &RunArgs) -> Result<()> {
    setup::ensure(pins, crate::apt::Purpose::Run, args.no_setup)?;
    build_release(pins)?;
    Err(Cmd::new(release_binary(pins))
        .arg("run")
        .args(&args.args)
        .exec())
}
