//! bpf-linker, which links the eBPF object; its LLVM must match the eBPF nightly's.

use anyhow::Result;

use crate::cmd::Cmd;
use crate::pins::Pins;

/// What `bpf-linker --version` told us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// The pinned version is the one found first on `PATH` (plus `~/.cargo/bin`).
    Present,
    /// Not found, or it could not be run.
    Missing,
    /// Found, but it reports this other version line.
    WrongVersion(String),
}

/// Runs `bpf-linker --version` the way the build will find it.
pub fn check(pins: &Pins) -> State {
    let Ok(out) = Cmd::new("bpf-linker").arg("--version").probe() else {
        return State::Missing;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    if reports_version(&stdout, &pins.bpf_linker_version) {
        State::Present
    } else if !out.status.success() {
        State::Missing
    } else {
        State::WrongVersion(stdout.trim().to_owned())
    }
}

/// Whether `bpf-linker --version` output ("bpf-linker 0.13.0") names exactly `version`.
fn reports_version(stdout: &str, version: &str) -> bool {
    stdout.split_whitespace().any(|word| word == version)
}

/// The pinned `cargo install`, built against the distro LLVM with the pinned toolchain.
///
/// It runs from the temp dir so the workspace's .cargo/config.toml does not apply, and names the
/// toolchain explicitly: the `cargo` that started xtask may be any stable.
pub fn install_cmd(pins: &Pins) -> Cmd {
    let llvm = pins.llvm_major;
    Cmd::new("rustup")
        .current_dir(std::env::temp_dir())
        .env("LLVM_PREFIX", format!("/usr/lib/llvm-{llvm}"))
        .args([
            "run",
            &pins.toolchain,
            "cargo",
            "install",
            "--locked",
            "bpf-linker",
        ])
        .args(["--version", &pins.bpf_linker_version])
        .args([
            "--no-default-features",
            "--features",
            &format!("llvm-{llvm}"),
        ])
}

/// Installs the pinned bpf-linker (about two minutes: it compiles against LLVM).
pub fn install(pins: &Pins) -> Result<()> {
    install_cmd(pins).run()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_must_match_exactly() {
        assert!(reports_version("bpf-linker 0.13.0\n", "0.13.0"));
        assert!(!reports_version("bpf-linker 0.13.01\n", "0.13.0"));
        assert!(!reports_version("bpf-linker 0.9.15\n", "0.13.0"));
    }
}
