//! The Debian package, built with dpkg-deb from the same files `install`
//! puts in place: /usr/bin/wbscope, /lib/systemd/system/wbscope.service (not enabled) and
//! /etc/wbscope/config.toml as a conffile (kept on `dpkg -r`, removed on `dpkg -P`).
//!
//! dpkg-deb instead of cargo-deb: the package has three files and needs nothing cargo-deb adds,
//! while cargo-deb would be one more tool to build and pin; dpkg-deb ships with dpkg.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::cmd::Cmd;
use crate::install::{self, CONFIG_PATH, Layout};
use crate::pins::Pins;
use crate::{run, setup};

use super::PackageArgs;

use super::VERSION;

/// Runs only `postinst` / `postrm` work that is safe on any host: tell a running systemd about
/// the new or removed unit. Nothing is enabled or started.
const RELOAD_SYSTEMD: &str = "#!/bin/sh\nset -e\n\
    if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null || true; fi\n";

/// Builds the package and returns its path (target/debian/wbscope_VERSION_ARCH.deb).
pub fn build(pins: &Pins, args: &PackageArgs) -> Result<PathBuf> {
    if !args.no_build {
        setup::ensure(pins, crate::apt::Purpose::Package, args.no_setup)?;
        run::build_release(pins)?;
    }
    let out_dir = pins.root.join("target/debian");
    let stage = out_dir.join("stage");
    if stage.exists() {
        std::fs::remove_dir_all(&stage).context("clearing the staging directory")?;
    }
    let layout = Layout::new(Path::new("/usr"), Some(Path::new("/lib/systemd/system")));
    install::install_files(pins, &layout, Some(&stage))?;
    write(
        &stage.join("usr/share/doc/wbscope/copyright"),
        COPYRIGHT,
        0o644,
    )?;

    let arch = command_output(Cmd::new("dpkg").arg("--print-architecture"))?;
    // procps: the unit's ExecReload is /bin/kill, which on Debian only procps ships (minimal
    // installs and containers may lack it, and `systemctl reload` then fails).
    let depends = format!("{}, procps", shlib_depends(&layout.binary, &stage)?);
    let control = control_file(&arch, &depends, installed_size_kib(&stage)?);
    let debian = stage.join("DEBIAN");
    write(&debian.join("control"), &control, 0o644)?;
    write(
        &debian.join("conffiles"),
        &format!("/{CONFIG_PATH}\n"),
        0o644,
    )?;
    write(&debian.join("postinst"), RELOAD_SYSTEMD, 0o755)?;
    write(&debian.join("postrm"), RELOAD_SYSTEMD, 0o755)?;

    let deb = out_dir.join(format!("wbscope_{VERSION}_{arch}.deb"));
    Cmd::new("dpkg-deb")
        .args(["--root-owner-group", "--build"])
        .arg(&stage)
        .arg(&deb)
        .run()?;
    Ok(deb)
}

/// The `DEBIAN/control` text.
fn control_file(arch: &str, depends: &str, size_kib: u64) -> String {
    format!(
        "Package: wbscope\n\
         Version: {VERSION}\n\
         Architecture: {arch}\n\
         Maintainer: wbscope developers <wbscope@users.noreply.github.com>\n\
         Installed-Size: {size_kib}\n\
         Depends: {depends}\n\
         Section: admin\n\
         Priority: optional\n\
         Homepage: https://github.com/wbscope/wbscope\n\
         Description: Linux writeback observability with eBPF\n \
         wbscope attaches eBPF programs to the kernel's writeback, block and sync-call\n \
         tracepoints and exports Prometheus metrics on port 19617: flusher work by sync mode\n \
         and reason, sync-call latency per device, writeback submissions by caller.\n \
         The systemd unit is installed but not enabled: systemctl enable --now wbscope\n"
    )
}

/// The binary's shared-library dependencies as dpkg-shlibdeps computes them. It insists on a
/// debian/control, so it runs in a scratch directory holding a minimal one.
fn shlib_depends(binary: &Path, stage: &Path) -> Result<String> {
    let scratch = stage
        .parent()
        .context("staging directory has a parent")?
        .join("shlibdeps");
    std::fs::create_dir_all(scratch.join("debian"))?;
    std::fs::write(
        scratch.join("debian/control"),
        "Source: wbscope\n\nPackage: wbscope\nArchitecture: any\n",
    )?;
    let staged_binary = stage.join(binary.strip_prefix("/").unwrap_or(binary));
    let line = command_output(
        Cmd::new("dpkg-shlibdeps")
            .current_dir(&scratch)
            .args(["-O", "-e"])
            .arg(&staged_binary),
    )?;
    match line.strip_prefix("shlibs:Depends=") {
        Some(depends) => Ok(depends.to_owned()),
        None => bail!("unexpected dpkg-shlibdeps output: {line}"),
    }
}

/// Total size of the staged files in KiB, for `Installed-Size`.
fn installed_size_kib(dir: &Path) -> Result<u64> {
    let mut bytes = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        bytes += if meta.is_dir() {
            installed_size_kib(&entry.path())? * 1024
        } else {
            meta.len()
        };
    }
    Ok(bytes.div_ceil(1024))
}

/// Runs `cmd` quietly and returns its trimmed stdout, failing with its stderr.
pub(super) fn command_output(cmd: Cmd) -> Result<String> {
    let shown = cmd.to_string();
    let out = cmd.probe()?;
    if !out.status.success() {
        bail!(
            "{shown} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

pub(super) fn write(path: &Path, text: &str, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

pub(super) const COPYRIGHT: &str = "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
    Upstream-Name: wbscope\n\
    Source: https://github.com/wbscope/wbscope\n\n\
    Files: *\n\
    Copyright: wbscope developers\n\
    License: MIT or Apache-2.0\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_file_is_a_single_paragraph_with_the_fields_dpkg_needs() {
        let c = control_file("amd64", "libc6 (>= 2.34)", 7000);
        for field in [
            "Package: wbscope\n",
            "Architecture: amd64\n",
            "Depends: libc6 (>= 2.34)\n",
            "Installed-Size: 7000\n",
        ] {
            assert!(c.contains(field), "{field} missing in\n{c}");
        }
        assert!(!c.contains("\n\n"), "blank line ends the paragraph early");
        // Continuation lines of Description start with one space.
        let desc = c.split("Description:").nth(1).unwrap();
        assert!(desc.lines().skip(1).all(|l| l.starts_with(' ')), "{desc}");
    }
}
