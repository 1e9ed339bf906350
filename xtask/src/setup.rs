//! `cargo xtask setup` / `check-setup`: make this Debian 12 machine able to build and run
//! wbscope (and, for the tests, test it), installing only what is missing so running it again
//! is cheap. Each command asks only for its own purpose: `run` never installs test tools.

use anyhow::{Result, bail};

use crate::apt::Purpose;
use crate::pins::Pins;
use crate::{apt, host, linker, pytools, toolchain};

/// Everything setup looks at, checked without installing anything.
struct Status {
    /// Apt packages that are missing, or why dpkg could not be asked.
    apt_missing: Result<Vec<String>>,
    apt_all: Vec<String>,
    /// Each wanted toolchain and its state, or why rustup could not be asked.
    toolchains: Vec<(toolchain::Wanted, Result<toolchain::State>)>,
    linker: linker::State,
    /// Whether kubernetes-validate is installed; `None` when `purpose` does not need it.
    validator: Option<bool>,
}

impl Status {
    fn gather(pins: &Pins, purpose: Purpose) -> Self {
        let apt_all = apt::packages(pins.llvm_major, purpose);
        let apt_missing = apt::missing(&apt_all);
        // One `rustup toolchain list` serves every toolchain; if rustup itself is unusable each
        // toolchain carries that error.
        let installed = toolchain::installed();
        let toolchains = toolchain::wanted(pins)
            .into_iter()
            .map(|want| {
                let state = match &installed {
                    Ok(list) => toolchain::check(&want, list),
                    Err(e) => Err(anyhow::anyhow!("{e:#}")),
                };
                (want, state)
            })
            .collect();
        Self {
            apt_missing,
            apt_all,
            toolchains,
            linker: linker::check(pins),
            validator: (purpose >= Purpose::Test).then(|| pytools::present(&pins.root)),
        }
    }

    fn complete(&self) -> bool {
        self.apt_missing.as_ref().is_ok_and(Vec::is_empty)
            && self
                .toolchains
                .iter()
                .all(|(_, s)| matches!(s, Ok(toolchain::State::Present)))
            && self.linker == linker::State::Present
            && self.validator != Some(false)
    }

    /// One `[setup] <thing>: ...` line per step, saying what is missing and why.
    fn print(&self, pins: &Pins) {
        match &self.apt_missing {
            Ok(missing) => {
                for pkg in &self.apt_all {
                    let state = if missing.contains(pkg) {
                        "missing"
                    } else {
                        "present"
                    };
                    println!("[setup] apt package {pkg}: {state}");
                }
            }
            Err(e) => println!("[setup] apt packages: unknown, cannot ask dpkg ({e:#})"),
        }
        for (want, state) in &self.toolchains {
            let state = match state {
                Ok(toolchain::State::Present) => "present".to_owned(),
                Ok(toolchain::State::Missing) => "missing".to_owned(),
                Ok(toolchain::State::MissingComponents(c)) => {
                    format!("missing components {}", c.join(", "))
                }
                Err(e) => format!("unknown, cannot ask rustup ({e:#})"),
            };
            println!("[setup] {}: {state}", want.label());
        }
        println!(
            "[setup] {}: {}",
            linker_label(pins),
            linker_state(&self.linker)
        );
        if let Some(present) = self.validator {
            let state = if present { "present" } else { "missing" };
            println!("[setup] {} (venv): {state}", pytools::KUBERNETES_VALIDATE);
        }
    }

    /// Shell commands a root user would run to install what is missing, in install order.
    fn remedies(&self, pins: &Pins) -> Vec<String> {
        let mut cmds = Vec::new();
        match &self.apt_missing {
            Ok(missing) if missing.is_empty() => {}
            Ok(missing) => {
                cmds.push(apt::update_cmd().to_string());
                cmds.push(apt::install_cmd(missing).to_string());
            }
            Err(_) => cmds.push(format!(
                "# on a non-Debian system, install the equivalents of: {}",
                self.apt_all.join(" ")
            )),
        }
        for (want, state) in &self.toolchains {
            match state {
                Ok(state) => {
                    cmds.extend(toolchain::install_cmd(want, state).map(|c| c.to_string()))
                }
                Err(_) => cmds.push(format!(
                    "# install rustup, then: {}",
                    toolchain::install_cmd(want, &toolchain::State::Missing)
                        .map(|c| c.to_string())
                        .unwrap_or_default()
                )),
            }
        }
        if self.linker != linker::State::Present {
            cmds.push(linker::install_cmd(pins).to_string());
        }
        if self.validator == Some(false) {
            cmds.extend(
                pytools::install_cmds(&pins.root)
                    .iter()
                    .map(|c| c.to_string()),
            );
        }
        cmds
    }
}

fn linker_label(pins: &Pins) -> String {
    format!(
        "bpf-linker {} (llvm-{})",
        pins.bpf_linker_version, pins.llvm_major
    )
}

fn linker_state(state: &linker::State) -> String {
    match state {
        linker::State::Present => "present".into(),
        linker::State::Missing => "missing".into(),
        linker::State::WrongVersion(found) => format!("missing (found `{found}` instead)"),
    }
}

/// Fast check (a handful of dpkg-query/rustup/bpf-linker calls, no installs): whether `setup`
/// has anything to do. Used by `run`, `test` and `lint` to call setup only when needed.
pub fn needs_setup(pins: &Pins, purpose: Purpose) -> bool {
    !Status::gather(pins, purpose).complete()
}

/// `cargo xtask check-setup`: prints what is present and missing; fails if anything is missing.
pub fn check(pins: &Pins, purpose: Purpose) -> Result<()> {
    let status = Status::gather(pins, purpose);
    status.print(pins);
    if status.complete() {
        println!("[setup] everything is present");
        return Ok(());
    }
    println!("[setup] to install what is missing, run `cargo xtask setup` as root, or:");
    for cmd in status.remedies(pins) {
        println!("  {cmd}");
    }
    bail!("setup is incomplete")
}

/// `cargo xtask setup`: installs whatever is missing (as root on Debian), else explains how.
pub fn setup(pins: &Pins, purpose: Purpose) -> Result<()> {
    let status = Status::gather(pins, purpose);
    if status.complete() {
        status.print(pins);
        return Ok(());
    }
    if let Some(reason) = cannot_install(&status) {
        status.print(pins);
        println!("[setup] not installing anything: {reason}. Run these (as root), then retry:");
        for cmd in status.remedies(pins) {
            println!("  {cmd}");
        }
        bail!("setup is incomplete and {reason}");
    }

    // Apt first: bpf-linker builds against llvm-N-dev; then toolchains: bpf-linker is installed
    // with the stable one.
    let apt_missing = status
        .apt_missing
        .as_ref()
        .map_err(|e| anyhow::anyhow!("{e:#}"))?;
    for pkg in &status.apt_all {
        let state = if apt_missing.contains(pkg) {
            "installing…"
        } else {
            "present"
        };
        println!("[setup] apt package {pkg}: {state}");
    }
    apt::install(apt_missing)?;

    for (want, state) in &status.toolchains {
        let state = state.as_ref().map_err(|e| anyhow::anyhow!("{e:#}"))?;
        match toolchain::install_cmd(want, state) {
            None => println!("[setup] {}: present", want.label()),
            Some(cmd) => {
                println!("[setup] {}: installing…", want.label());
                cmd.run()?;
            }
        }
    }

    if status.linker == linker::State::Present {
        println!("[setup] {}: present", linker_label(pins));
    } else {
        println!(
            "[setup] {}: installing… (about 2 minutes)",
            linker_label(pins)
        );
        linker::install(pins)?;
    }

    match status.validator {
        Some(false) => {
            println!(
                "[setup] {} (venv): installing…",
                pytools::KUBERNETES_VALIDATE
            );
            pytools::install(&pins.root)?;
        }
        Some(true) => println!("[setup] {} (venv): present", pytools::KUBERNETES_VALIDATE),
        None => {}
    }

    // Installing can succeed and still leave a step unusable (e.g. an older bpf-linker earlier
    // on PATH shadows the new one); say so now rather than in a confusing build error later.
    let after = Status::gather(pins, purpose);
    if !after.complete() {
        after.print(pins);
        bail!("setup ran but something is still missing (see the lines above)");
    }
    println!("[setup] done");
    Ok(())
}

/// Runs setup for `purpose` only if something it needs is missing, unless the user opted out
/// with `--no-setup`.
pub fn ensure(pins: &Pins, purpose: Purpose, no_setup: bool) -> Result<()> {
    if no_setup || !needs_setup(pins, purpose) {
        return Ok(());
    }
    println!("[setup] something is missing; running setup");
    setup(pins, purpose)
}

/// Why this process cannot install (not root, no apt-get/dpkg, no rustup), if it cannot.
fn cannot_install(status: &Status) -> Option<String> {
    if !host::is_root() {
        let uid = host::euid().map_or_else(|| "unknown".to_owned(), |u| u.to_string());
        return Some(format!("not running as root (uid {uid})"));
    }
    let apt_usable = host::on_path("apt-get") && status.apt_missing.is_ok();
    if !apt_usable && !status.apt_missing.as_ref().is_ok_and(Vec::is_empty) {
        return Some("apt-get/dpkg are not available (setup supports Debian 12)".into());
    }
    if status.toolchains.iter().any(|(_, s)| s.is_err()) {
        return Some("rustup is not available".into());
    }
    None
}
