//! The guest's initramfs: busybox, the modules needed to reach the host's root over virtio-fs
//! (whichever of them this kernel builds as modules, resolved from its `modules.dep`), and an
//! init that mounts the root read-only and runs the guest script in a chroot.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::cmd::Cmd;
use crate::vmtest::kernel::Kernel;

/// Modules the init needs before it can mount the root. A kernel that builds one in has no
/// `modules.dep` line for it, and it is simply not packed.
const ROOT_MODULES: &[&str] = &["virtio_pci", "virtiofs", "virtio_blk"];

/// The virtio-fs tag the host's root is exported under.
pub const ROOT_TAG: &str = "hostroot";

/// Builds `out` (a gzip'd newc cpio) for `kernel`.
pub fn build(kernel: &Kernel, work: &Path, out: &Path) -> Result<()> {
    let dir = work.join("initramfs");
    if dir.exists() {
        fs::remove_dir_all(&dir).with_context(|| format!("rm -r {}", dir.display()))?;
    }
    for sub in ["bin", "proc", "sys", "dev", "newroot", "mods"] {
        fs::create_dir_all(dir.join(sub)).with_context(|| format!("mkdir {sub}"))?;
    }
    let busybox = which("busybox")?;
    fs::copy(&busybox, dir.join("bin/busybox"))
        .with_context(|| format!("copy {}", busybox.display()))?;

    let dep = fs::read_to_string(kernel.modules_dir().join("modules.dep"))
        .context("read modules.dep (depmod should have written it)")?;
    for (i, rel) in load_order(&dep, ROOT_MODULES).iter().enumerate() {
        let src = kernel.modules_dir().join(rel);
        let name = module_name(rel);
        let dst = dir.join("mods").join(format!("{i:02}-{name}.ko"));
        unpack_module(&src, &dst)?;
    }
    let init = dir.join("init");
    fs::write(&init, INIT).context("write init")?;
    Cmd::new("chmod").arg("755").arg(&init).run()?;

    // busybox's cpio writes newc, which the kernel unpacks; `find .` from inside the tree.
    let script = format!(
        "find . | {} cpio -o -H newc 2>/dev/null | gzip -1 > {}",
        busybox.display(),
        shell_quote(&out.to_string_lossy())
    );
    Cmd::new("sh").args(["-c", &script]).current_dir(&dir).run()
}

/// Copies a module, decompressing `.ko.xz`/`.ko.zst` (busybox's insmod reads only plain ELF).
fn unpack_module(src: &Path, dst: &Path) -> Result<()> {
    let ext = src.extension().and_then(|e| e.to_str()).unwrap_or("");
    let tool = match ext {
        "xz" => "xz",
        "zst" => "zstd",
        "ko" => {
            fs::copy(src, dst).with_context(|| format!("copy {}", src.display()))?;
            return Ok(());
        }
        _ => bail!("unknown module compression: {}", src.display()),
    };
    let script = format!(
        "{tool} -dc {} > {}",
        shell_quote(&src.to_string_lossy()),
        shell_quote(&dst.to_string_lossy())
    );
    Cmd::new("sh").args(["-c", &script]).run()
}

/// The module files (relative to `lib/modules/RELEASE`) to insmod, in order, so that each
/// module's dependencies come before it. `modules.dep` lines are `path: dep dep ...`, with the
/// full transitive list where the last entry is loaded first (that is how modprobe reads it).
fn load_order(dep: &str, wanted: &[&str]) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    for want in wanted {
        let Some((path, deps)) = dep.lines().find_map(|line| {
            let (path, deps) = line.split_once(':')?;
            (module_name(path) == *want).then_some((path, deps))
        }) else {
            continue;
        };
        for m in deps.split_whitespace().rev().chain(std::iter::once(path)) {
            if !order.iter().any(|o| o == m) {
                order.push(m.to_owned());
            }
        }
    }
    order
}

/// `kernel/fs/fuse/virtiofs.ko.xz` → `virtiofs` (dashes as underscores, as the kernel names it).
fn module_name(path: &str) -> String {
    let file = path.rsplit('/').next().unwrap_or(path);
    let stem = file.split(".ko").next().unwrap_or(file);
    stem.replace('-', "_")
}

fn which(program: &str) -> Result<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/bin")])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .with_context(|| format!("{program} not found (apt package busybox-static)"))
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The init: load the packed modules (twice, in case one raced its dependency's probe), mount
/// the host root read-only (virtiofsd has no read-only mode), the pseudo filesystems, a pure
/// cgroup v2 hierarchy (the kernel is booted with `cgroup_no_v1=all`) with the memory and io
/// controllers enabled for its children, as cgroup writeback needs both, and a tmpfs on /run, then run the script named by `guestcmd=` on the command line in a chroot and
/// power off. The script's exit status is printed for the host to read. Nothing is mounted over
/// the host's /tmp, /root or /mnt: the checkout under test (and its target directory) may live
/// there, and the guest runs it from the shared root.
const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for pass in 1 2; do for m in /mods/*.ko; do [ -e "$m" ] && insmod "$m" 2>/dev/null; done; done
echo "@@VMTEST init $(uname -r) up $(cut -d' ' -f1 /proc/uptime)s"
if ! mount -t virtiofs -o ro hostroot /newroot; then
  echo "@@VMTEST virtiofs mount failed"; poweroff -f
fi
mount -t proc proc /newroot/proc; mount -t sysfs sys /newroot/sys; mount -t devtmpfs dev /newroot/dev
mount -t tracefs tracefs /newroot/sys/kernel/tracing
mount -t debugfs debugfs /newroot/sys/kernel/debug
mount -t bpf bpf /newroot/sys/fs/bpf
if mount -t cgroup2 cgroup2 /newroot/sys/fs/cgroup; then
  echo "+memory +io" > /newroot/sys/fs/cgroup/cgroup.subtree_control || echo "@@VMTEST cgroup2 memory/io not enabled"
else
  echo "@@VMTEST cgroup2 not mounted"
fi
mount -t tmpfs tmpfs /newroot/run
CMD=$(sed -n 's/.*guestcmd=\([^ ]*\).*/\1/p' /proc/cmdline)
chroot /newroot /bin/bash -c "cd /; HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin $CMD"
echo "@@VMTEST exit rc=$? up $(cut -d' ' -f1 /proc/uptime)s"
poweroff -f
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_dependencies_first_and_skips_built_in_modules() {
        let dep = "kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko\n\
                   kernel/fs/fuse/virtiofs.ko: kernel/fs/fuse/fuse.ko kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko\n\
                   kernel/drivers/block/virtio_blk.ko.xz:\n";
        let order = load_order(dep, &["virtio_pci", "virtiofs", "absent", "virtio_blk"]);
        let names: Vec<String> = order.iter().map(|p| module_name(p)).collect();
        assert_eq!(
            names,
            [
                "virtio",
                "virtio_ring",
                "virtio_pci_modern_dev",
                "virtio_pci",
                "fuse",
                "virtiofs",
                "virtio_blk"
            ]
        );
    }
}
