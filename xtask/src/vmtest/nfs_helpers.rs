//! The NFS server's user-space helpers for the guest's NFS tests: `exportfs` and `rpc.mountd`
//! from Debian's nfs-kernel-server, with the one library the host's root may lack (libwrap0),
//! fetched once with `apt-get download` and unpacked with `dpkg -x` into the cache. Nothing is
//! installed on the host and no service is started: the guest runs the unpacked binaries (the
//! tests start `rpc.mountd` in a private mount namespace and stop it).

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::cmd::Cmd;
use crate::vmtest::kernel::find_deb;

/// Packages unpacked into the helpers' root.
const PACKAGES: &[&str] = &["nfs-kernel-server", "libwrap0"];

/// What the guest runs, relative to the helpers' root.
const BINARIES: &[&str] = &["usr/sbin/exportfs", "usr/sbin/rpc.mountd"];

/// The unpacked root under `cache` (fetched on first use).
pub fn prepare(cache: &Path) -> Result<PathBuf> {
    let root = cache.join("nfs-helpers");
    let stamp = root.join(".unpacked");
    if stamp.exists() {
        return Ok(root);
    }
    let debs = cache.join("debs");
    fs::create_dir_all(&debs).with_context(|| format!("mkdir {}", debs.display()))?;
    if root.exists() {
        fs::remove_dir_all(&root).with_context(|| format!("rm -r {}", root.display()))?;
    }
    fs::create_dir_all(&root).with_context(|| format!("mkdir {}", root.display()))?;
    for package in PACKAGES {
        let deb = match find_deb(&debs, package)? {
            Some(deb) => deb,
            None => {
                Cmd::new("apt-get")
                    .args(["download", package])
                    .current_dir(&debs)
                    .run()?;
                find_deb(&debs, package)?
                    .with_context(|| format!("apt-get download left no {package}_*.deb"))?
            }
        };
        Cmd::new("dpkg").arg("-x").arg(&deb).arg(&root).run()?;
    }
    for binary in BINARIES {
        if !root.join(binary).is_file() {
            bail!("{} has no {binary}", root.display());
        }
    }
    fs::write(&stamp, "").with_context(|| format!("write {}", stamp.display()))?;
    Ok(root)
}
