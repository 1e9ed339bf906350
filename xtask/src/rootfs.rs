//! The clean root file system the artifact tier installs packages into and boots: Debian 12
//! minbase plus systemd, made by mmdebstrap from Debian's archive (about 15 s and 70 MiB of
//! downloads) and kept in target/artifacts as a tarball, so later runs only unpack it.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::cmd::Cmd;
use crate::pins::Pins;

/// Packages beyond minbase: systemd as PID 1 (systemd-sysv), dbus for its bus, procps (the
/// .deb depends on it for /bin/kill; it is of priority important, on nearly every install).
const INCLUDE: &str = "systemd,systemd-sysv,dbus,procps";

/// The rootfs tarball, made first if missing.
pub fn ensure(pins: &Pins) -> Result<PathBuf> {
    let dir = pins.root.join("target/artifacts");
    // Named by its contents, so changing INCLUDE makes a new one.
    let tarball = dir.join(format!("rootfs-bookworm-{}.tar", INCLUDE.replace(',', "+")));
    if tarball.is_file() {
        return Ok(tarball);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // Written beside and renamed, so an interrupted run leaves no half tarball to reuse (the
    // name no longer says tar, hence --format).
    let partial = tarball.with_extension("partial");
    Cmd::new("mmdebstrap")
        .args([
            "--variant=minbase",
            "--format=tar",
            &format!("--include={INCLUDE}"),
            "bookworm",
        ])
        .arg(&partial)
        .run()?;
    std::fs::rename(&partial, &tarball).context("keeping the root file system")?;
    Ok(tarball)
}
