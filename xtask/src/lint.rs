//! The lint tier (also `cargo xtask lint`): formatting and clippy with warnings as errors.

use anyhow::Result;

use crate::cmd::{self, Cmd};
use crate::pins::Pins;

/// The lint commands, in the order they run.
fn commands(pins: &Pins) -> Vec<Cmd> {
    let root = &pins.root;
    vec![
        Cmd::workspace_cargo(root, &pins.toolchain).args(["fmt", "--all", "--", "--check"]),
        // probe-ebpf only builds for the BPF target (its panic handler clashes with std), so it is
        // excluded here and linted on its own below.
        Cmd::workspace_cargo(root, &pins.toolchain).args([
            "clippy",
            "--workspace",
            "--exclude",
            "probe-ebpf",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]),
        Cmd::workspace_cargo(root, &pins.ebpf_toolchain).args([
            "clippy",
            "-p",
            "probe-ebpf",
            "--target",
            "bpfel-unknown-none",
            "-Z",
            "build-std=core",
            "--release",
            "--",
            "-D",
            "warnings",
        ]),
    ]
}

/// Runs every lint command (all of them, even after a failure) and fails if any failed.
pub fn run(pins: &Pins) -> Result<()> {
    cmd::run_all(commands(pins))
}
