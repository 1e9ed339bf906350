//! The RPM, built with Debian's rpmbuild from the already-built files (no %build section):
//! /usr/bin/wbscope, /usr/lib/systemd/system/wbscope.service (not enabled) and
//! /etc/wbscope/config.toml as a %config(noreplace) file. rpm's own dependency generator adds
//! the glibc requirements from the binary.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::cmd::Cmd;
use crate::install::{self, CONFIG_PATH, Layout};
use crate::pins::Pins;

use super::{VERSION, deb::write, tarball::arch};

/// The spec: installs the staged tree as it is. Stripping and debuginfo extraction are off:
/// the release profile already strips what it should, and the embedded eBPF object must stay
/// byte for byte as built.
fn spec(stage: &Path) -> String {
    format!(
        "%define debug_package %{{nil}}\n\
         %define __strip /bin/true\n\
         %global __os_install_post %{{nil}}\n\
         Name: wbscope\n\
         Version: {VERSION}\n\
         Release: 1\n\
         Summary: Linux writeback observability with eBPF\n\
         License: MIT OR Apache-2.0\n\
         URL: https://github.com/wbscope/wbscope\n\
         # The unit's ExecReload (util-linux on Fedora and RHEL, procps on SUSE).\n\
         Requires: /usr/bin/kill\n\
         \n\
         %description\n\
         wbscope attaches eBPF programs to the kernel's writeback, block and sync-call\n\
         tracepoints and exports Prometheus metrics on port 19617. The systemd unit is\n\
         installed but not enabled: systemctl enable --now wbscope\n\
         \n\
         %install\n\
         cp -a {stage}/. %{{buildroot}}/\n\
         \n\
         %files\n\
         /usr/bin/wbscope\n\
         /usr/lib/systemd/system/wbscope.service\n\
         %dir /etc/wbscope\n\
         %config(noreplace) /{CONFIG_PATH}\n",
        stage = stage.display()
    )
}

pub fn build(pins: &Pins, out: &Path) -> Result<PathBuf> {
    let top = out.join("rpmbuild");
    if top.exists() {
        std::fs::remove_dir_all(&top).context("clearing the rpmbuild directory")?;
    }
    let stage = top.join("stage");
    let layout = Layout::new(
        Path::new("/usr"),
        Some(Path::new("/usr/lib/systemd/system")),
    );
    install::install_files(pins, &layout, Some(&stage))?;
    let spec_path = top.join("wbscope.spec");
    write(&spec_path, &spec(&stage), 0o644)?;
    Cmd::new("rpmbuild")
        .arg("-bb")
        // Debian keeps no rpm database of build dependencies.
        .arg("--nodeps")
        .args(["--target", arch()])
        .arg("--define")
        .arg(format!("_topdir {}", top.display()))
        .arg(&spec_path)
        .run()?;
    let built = top
        .join("RPMS")
        .join(arch())
        .join(format!("wbscope-{VERSION}-1.{}.rpm", arch()));
    if !built.is_file() {
        bail!("rpmbuild succeeded but {} is missing", built.display());
    }
    let rpm = out.join(built.file_name().context("rpm file name")?);
    std::fs::rename(&built, &rpm).with_context(|| format!("moving {}", built.display()))?;
    Ok(rpm)
}
