//! Debian packages: which are installed (dpkg-query) and installing the missing ones (apt-get).

use std::collections::HashSet;

use anyhow::{Result, bail};

use crate::cmd::Cmd;

/// The Debian 12 packages the build and the tiers need.
pub fn packages(llvm_major: u32) -> Vec<String> {
    vec![
        // bpf-linker is built against the system LLVM (LLVM_PREFIX=/usr/lib/llvm-N) and links
        // zlib and zstd from it.
        format!("llvm-{llvm_major}-dev"),
        "zlib1g-dev".into(),
        "libzstd-dev".into(),
        // `cargo install bpf-linker` needs a C toolchain for its build scripts.
        "gcc".into(),
        "pkg-config".into(),
        // The kernel and smoke tiers make loop-device filesystems and drive writeback with fio.
        "xfsprogs".into(),
        "e2fsprogs".into(),
        "util-linux".into(), // losetup, setpriv
        "fio".into(),
        // The kernel tier compiles a small liburing helper (gcc) that issues io_uring fsync,
        // fdatasync and sync_file_range requests.
        "liburing-dev".into(),
        // Inspecting loaded programs and cross-checking probes by hand and in tests.
        "bpftool".into(),
        "bpftrace".into(),
        // `cargo xtask bench` measures libbpf-tools' biolatency beside wbscope.
        "libbpf-tools".into(),
        // Only for `promtool check metrics`. The package also ships a prometheus service; nothing
        // here needs it running.
        "prometheus".into(),
        // Service tests: `systemd-analyze verify` on the unit, yamllint on the Kubernetes
        // manifests (it brings python3-yaml, which the manifest test parses them with), and
        // dpkg-shlibdeps (dpkg-dev) for `cargo xtask package`'s Depends line.
        "systemd".into(),
        "yamllint".into(),
        "dpkg-dev".into(),
        // The smoke tier drives `wbscope top` in a real terminal (new-session, send-keys,
        // capture-pane).
        "tmux".into(),
        // Service tests of TLS and basic auth: a self-signed certificate and an https client.
        "openssl".into(),
        "curl".into(),
        // The VM tier (`cargo xtask vmtest`): QEMU with software emulation, the C virtiofsd
        // (qemu-system-common, which qemu-system-x86 brings), busybox for the initramfs, depmod
        // for the kernel packages' module dependencies, xz for their compressed modules.
        "qemu-system-x86".into(),
        "qemu-system-common".into(),
        "busybox-static".into(),
        "kmod".into(),
        "xz-utils".into(),
    ]
}

/// The subset of `pkgs` that dpkg does not report as "install ok installed". Fails when
/// dpkg-query cannot be run at all (not a Debian system).
pub fn missing(pkgs: &[String]) -> Result<Vec<String>> {
    // One call for all packages keeps this fast; unknown names go to stderr and make the exit
    // status non-zero, so only stdout is read.
    let out = Cmd::new("dpkg-query")
        .args(["-W", "-f=${Package} ${Status}\\n"])
        .args(pkgs)
        .probe()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let installed = installed_from(&stdout);
    Ok(pkgs
        .iter()
        .filter(|p| !installed.contains(p.as_str()))
        .cloned()
        .collect())
}

/// Names on `dpkg-query -f '${Package} ${Status}\n'` lines whose status is fully installed.
fn installed_from(stdout: &str) -> HashSet<&str> {
    stdout
        .lines()
        .filter_map(|line| line.split_once(' '))
        .filter(|(_, status)| status.trim() == "install ok installed")
        .map(|(name, _)| name)
        .collect()
}

/// `apt-get update`, run once before installing so a fresh machine has package lists.
pub fn update_cmd() -> Cmd {
    Cmd::new("apt-get").arg("update")
}

/// The non-interactive install of `pkgs` (recommends skipped to keep the install small).
pub fn install_cmd(pkgs: &[String]) -> Cmd {
    Cmd::new("apt-get")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .args(["install", "-y", "--no-install-recommends"])
        .args(pkgs)
}

/// Installs `pkgs` (no-op when empty).
pub fn install(pkgs: &[String]) -> Result<()> {
    if pkgs.is_empty() {
        return Ok(());
    }
    update_cmd().run()?;
    install_cmd(pkgs).run()?;
    let still = missing(pkgs)?;
    if !still.is_empty() {
        bail!(
            "apt-get finished but these are still not installed: {}",
            still.join(" ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_dpkg_status_lines() {
        let out = "fio install ok installed\nbpftool deinstall ok config-files\nllvm-22-dev install ok installed\n";
        let got = installed_from(out);
        assert!(got.contains("fio") && got.contains("llvm-22-dev"));
        assert!(!got.contains("bpftool"));
    }

    #[test]
    fn package_list_follows_llvm_major() {
        assert!(packages(23).contains(&"llvm-23-dev".to_owned()));
    }
}
