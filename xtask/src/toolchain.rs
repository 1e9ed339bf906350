//! Rustup toolchains: the pinned workspace toolchain and the eBPF nightly.

use anyhow::{Result, bail};

use crate::cmd::Cmd;
use crate::pins::Pins;

/// Host triple rustup appends to toolchain and component names (set by build.rs).
const HOST: &str = env!("XTASK_HOST");

/// A toolchain with the components we need on it.
#[derive(Debug, Clone)]
pub struct Wanted {
    /// Toolchain name as written in the pins (`1.99.0`, `nightly-2026-06-20`).
    pub name: String,
    /// Components that must be installed on it.
    pub components: Vec<String>,
}

impl Wanted {
    /// A short label for status lines: `rust toolchain 1.99.0 (rustfmt, clippy)`.
    pub fn label(&self) -> String {
        format!(
            "rust toolchain {} ({})",
            self.name,
            self.components.join(", ")
        )
    }
}

/// The toolchains this workspace needs: the pinned one for everything, and the nightly with
/// `rust-src` (the eBPF crate is built with `-Z build-std=core`) and `clippy` (the lint tier
/// lints the eBPF crate with it).
pub fn wanted(pins: &Pins) -> Vec<Wanted> {
    vec![
        Wanted {
            name: pins.toolchain.clone(),
            components: pins.toolchain_components.clone(),
        },
        Wanted {
            name: pins.ebpf_toolchain.clone(),
            components: vec!["rust-src".into(), "clippy".into()],
        },
    ]
}

/// How far a wanted toolchain is from being usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Installed with all components.
    Present,
    /// Not installed at all.
    Missing,
    /// Installed, but these components are not.
    MissingComponents(Vec<String>),
}

/// Names of the installed toolchains (`rustup toolchain list`, first word of each line, since
/// lines may carry "(active)" or "(default)"). Fails when rustup cannot be run.
pub fn installed() -> Result<Vec<String>> {
    let out = Cmd::new("rustup").args(["toolchain", "list"]).probe()?;
    if !out.status.success() {
        bail!(
            "`rustup toolchain list` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect())
}

/// Checks one wanted toolchain against the installed list.
pub fn check(want: &Wanted, installed: &[String]) -> Result<State> {
    if !installed.iter().any(|t| same_name(t, &want.name)) {
        return Ok(State::Missing);
    }
    let out = Cmd::new("rustup")
        .args([
            "component",
            "list",
            "--installed",
            "--toolchain",
            &want.name,
        ])
        .probe()?;
    if !out.status.success() {
        bail!(
            "`rustup component list --toolchain {}` failed: {}",
            want.name,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let have: Vec<&str> = stdout.lines().map(str::trim).collect();
    let missing: Vec<String> = want
        .components
        .iter()
        .filter(|c| !have.iter().any(|h| same_name(h, c)))
        .cloned()
        .collect();
    Ok(if missing.is_empty() {
        State::Present
    } else {
        State::MissingComponents(missing)
    })
}

/// Whether rustup's `listed` name (`1.99.0-x86_64-unknown-linux-gnu`, `rust-src`) is `wanted`.
/// Only the host suffix may differ: `nightly` must not match `nightly-2026-06-20-<host>`.
fn same_name(listed: &str, wanted: &str) -> bool {
    listed == wanted
        || listed
            .strip_prefix(wanted)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|rest| rest == HOST)
}

/// The command that brings `want` from `state` to present (`None` when it already is).
pub fn install_cmd(want: &Wanted, state: &State) -> Option<Cmd> {
    match state {
        State::Present => None,
        State::Missing => {
            let mut cmd = Cmd::new("rustup").args(["toolchain", "install", &want.name]);
            cmd = cmd.args(["--profile", "minimal"]);
            for component in &want.components {
                cmd = cmd.args(["--component", component]);
            }
            Some(cmd)
        }
        State::MissingComponents(missing) => Some(
            Cmd::new("rustup")
                .args(["component", "add", "--toolchain", &want.name])
                .args(missing),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_only_the_host_suffix() {
        let host_stable = format!("1.99.0-{HOST}");
        let dated = format!("nightly-2026-06-20-{HOST}");
        assert!(same_name(&host_stable, "1.99.0"));
        assert!(same_name(&dated, "nightly-2026-06-20"));
        assert!(!same_name(&dated, "nightly"));
        assert!(!same_name(&host_stable, "1.99"));
        assert!(same_name("rust-src", "rust-src"));
        assert!(same_name(&format!("clippy-{HOST}"), "clippy"));
        assert!(!same_name(&format!("clippy-preview-{HOST}"), "clippy"));
    }

    #[test]
    fn install_commands() {
        let want = Wanted {
            name: "1.99.0".into(),
            components: vec!["rustfmt".into(), "clippy".into()],
        };
        let full = install_cmd(&want, &State::Missing).unwrap().to_string();
        assert_eq!(
            full,
            "rustup toolchain install 1.99.0 --profile minimal --component rustfmt --component clippy"
        );
        let part = install_cmd(&want, &State::MissingComponents(vec!["clippy".into()]));
        assert_eq!(
            part.unwrap().to_string(),
            "rustup component add --toolchain 1.99.0 clippy"
        );
        assert!(install_cmd(&want, &State::Present).is_none());
    }
}
