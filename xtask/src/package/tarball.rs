//! The binary tarball: the files `cargo xtask install` would put under / with prefix /usr/local
//! (binary, unit, example config), so `tar -xzf wbscope-VERSION-ARCH-linux.tar.gz -C /` installs
//! it on any glibc Linux (glibc 2.34 or newer, as the .deb's Depends says).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::cmd::Cmd;
use crate::install::{self, Layout};
use crate::pins::Pins;

use super::VERSION;

/// The architecture part of the file name (`x86_64`), the kernel's spelling.
pub fn arch() -> &'static str {
    std::env::consts::ARCH
}

pub fn build(pins: &Pins, out: &Path) -> Result<PathBuf> {
    let stage = out.join("tarball-stage");
    if stage.exists() {
        std::fs::remove_dir_all(&stage).context("clearing the tarball's staging directory")?;
    }
    let layout = Layout::new(Path::new("/usr/local"), None);
    install::install_files(pins, &layout, Some(&stage))?;
    let tarball = out.join(format!("wbscope-{VERSION}-{}-linux.tar.gz", arch()));
    // Owned by root whoever builds it, and in a stable order, so two builds of the same
    // binary give the same listing.
    Cmd::new("tar")
        .args(["--owner=0", "--group=0", "--numeric-owner", "--sort=name"])
        .arg("-C")
        .arg(&stage)
        .arg("-czf")
        .arg(&tarball)
        .args(["usr", "etc"])
        .run()?;
    Ok(tarball)
}
