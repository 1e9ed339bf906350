//! Keeping package installs from starting services on the user's machine. Some of the test
//! tools ship a daemon that their maintainer scripts enable and start: Debian's `prometheus`
//! starts a Prometheus server on :9090, `podman` enables its API socket and auto-update timer.
//! xtask needs only their programs, so while apt-get runs a `policy-rc.d` forbids every start
//! (invoke-rc.d and deb-systemd-invoke both ask it), and afterwards every unit the install newly
//! enabled is disabled again (and stopped, should anything have started it anyway).

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, Result};

use crate::cmd::Cmd;

/// Debian's hook for "may a maintainer script start this service?" (exit 101: no).
const POLICY_RC_D: &str = "/usr/sbin/policy-rc.d";

/// Forbids service starts by maintainer scripts while it lives. It leaves an existing
/// policy-rc.d alone (that policy is the administrator's, and may forbid more).
pub struct DenyStarts {
    /// The policy file this guard wrote and removes; `None` when one was there already.
    written: Option<std::path::PathBuf>,
}

impl DenyStarts {
    pub fn install() -> Result<Self> {
        Self::install_at(Path::new(POLICY_RC_D))
    }

    fn install_at(path: &Path) -> Result<Self> {
        use std::os::unix::fs::PermissionsExt as _;
        if path.exists() {
            return Ok(Self { written: None });
        }
        let script = "#!/bin/sh\n# Written by `cargo xtask setup` during apt-get install; \
                      removed right after.\nexit 101\n";
        std::fs::write(path, script).with_context(|| format!("writing {}", path.display()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
        Ok(Self {
            written: Some(path.to_owned()),
        })
    }
}

impl Drop for DenyStarts {
    fn drop(&mut self) {
        if let Some(path) = &self.written {
            // Best effort: a leftover policy-rc.d only keeps later installs from starting
            // services, and this line names it.
            if let Err(e) = std::fs::remove_file(path) {
                eprintln!(
                    "[setup] could not remove {}: {e}; remove it by hand",
                    path.display()
                );
            }
        }
    }
}

/// Unit files systemd reports as enabled (works without a running systemd: it reads the
/// unit directories). Empty when systemctl is missing, i.e. there is nothing to enable units.
pub fn enabled_units() -> Result<BTreeSet<String>> {
    let out = match Cmd::new("systemctl")
        .args([
            "list-unit-files",
            "--state=enabled",
            "--no-legend",
            "--no-pager",
        ])
        .probe()
    {
        Ok(out) => out,
        Err(_) => return Ok(BTreeSet::new()),
    };
    Ok(parse_unit_files(&String::from_utf8_lossy(&out.stdout)))
}

/// First column of `systemctl list-unit-files --no-legend` lines.
fn parse_unit_files(stdout: &str) -> BTreeSet<String> {
    stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// Disables (and stops, if a systemd is running) every unit in `after` but not in `before`:
/// the units the install just enabled. Prints one line per unit so the user knows.
pub fn disable_new(before: &BTreeSet<String>, after: &BTreeSet<String>) -> Result<()> {
    let new: Vec<&String> = after.difference(before).collect();
    if new.is_empty() {
        return Ok(());
    }
    let running = Path::new("/run/systemd/system").is_dir();
    let mut cmd = Cmd::new("systemctl").arg("disable");
    if running {
        cmd = cmd.arg("--now");
    }
    cmd.args(new.iter().map(|u| u.as_str())).run()?;
    for unit in new {
        println!(
            "[setup] {unit}: enabled by its package's install, now disabled{}; xtask only uses \
             the package's programs",
            if running { " and stopped" } else { "" }
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_denies_starts_while_installing_and_leaves_an_existing_one() {
        let dir = std::env::temp_dir().join(format!("xtask-policy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("policy-rc.d");
        {
            let _guard = DenyStarts::install_at(&path).unwrap();
            let status = std::process::Command::new(&path).status().unwrap();
            assert_eq!(status.code(), Some(101), "policy-rc.d must deny");
        }
        assert!(!path.exists(), "the guard's policy-rc.d outlived it");
        std::fs::write(&path, "#!/bin/sh\nexit 0\n").unwrap();
        drop(DenyStarts::install_at(&path).unwrap());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "#!/bin/sh\nexit 0\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_newly_enabled_units_are_touched() {
        let before = parse_unit_files("ssh.service enabled enabled\n");
        let after = parse_unit_files(
            "ssh.service enabled enabled\nprometheus.service enabled enabled\n\
             podman.socket         enabled enabled\n",
        );
        let new: Vec<&String> = after.difference(&before).collect();
        assert_eq!(new, ["podman.socket", "prometheus.service"]);
    }
}
