//! Debian packages: which are installed (dpkg-query) and installing the missing ones (apt-get).

use std::collections::HashSet;

use anyhow::{Result, bail};

use crate::cmd::Cmd;
use crate::services;

/// What a command needs the machine for; each purpose includes the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Purpose {
    /// Build the daemon and run it (`cargo xtask run`, `install`, `lint`).
    Run,
    /// Also build the release artifacts (`cargo xtask package`: .deb, .rpm, tarball, image).
    Package,
    /// Also run every test tier and the benchmark (`cargo xtask test`, `bench`, `vmtest`).
    Test,
}

/// The Debian 12 packages `purpose` needs.
pub fn packages(llvm_major: u32, purpose: Purpose) -> Vec<String> {
    let mut pkgs = build_packages(llvm_major);
    if purpose >= Purpose::Package {
        pkgs.extend(PACKAGE_PACKAGES.iter().map(|p| (*p).to_owned()));
    }
    if purpose >= Purpose::Test {
        pkgs.extend(TEST_PACKAGES.iter().map(|p| (*p).to_owned()));
    }
    pkgs
}

/// Building the daemon (its build script builds the eBPF object with bpf-linker) and running it.
fn build_packages(llvm_major: u32) -> Vec<String> {
    vec![
        // bpf-linker is built against the system LLVM (LLVM_PREFIX=/usr/lib/llvm-N) and links
        // zlib and zstd from it.
        format!("llvm-{llvm_major}-dev"),
        "zlib1g-dev".into(),
        "libzstd-dev".into(),
        // `cargo install bpf-linker` and the workspace's build scripts need a C toolchain.
        "gcc".into(),
        "pkg-config".into(),
    ]
}

/// `cargo xtask package`: dpkg-shlibdeps (dpkg-dev) for the .deb's Depends line, rpmbuild
/// (rpm) for the .rpm, umoci to assemble the OCI image from files, without a registry.
const PACKAGE_PACKAGES: &[&str] = &["dpkg-dev", "rpm", "umoci"];

/// Only the test tiers and the benchmark use these.
const TEST_PACKAGES: &[&str] = &[
    // The kernel and smoke tiers make loop-device filesystems and drive writeback with fio.
    "xfsprogs",
    "e2fsprogs",
    "util-linux", // losetup, setpriv, unshare
    "fio",
    // The kernel tier compiles a small liburing helper (gcc) that issues io_uring fsync,
    // fdatasync and sync_file_range requests.
    "liburing-dev",
    // Inspecting loaded programs and cross-checking probes by hand and in tests.
    "bpftool",
    "bpftrace",
    // `cargo xtask bench` measures libbpf-tools' biolatency beside wbscope.
    "libbpf-tools",
    // Only for `promtool check metrics` and the e2e tier's Prometheus, which the tier starts
    // itself. The package's own prometheus.service is disabled and stopped (see services.rs).
    "prometheus",
    // Service tests: `systemd-analyze verify` on the unit, yamllint on the Kubernetes
    // manifests (it brings python3-yaml, which the manifest test parses them with), and a venv
    // for kubernetes-validate, which checks them against the Kubernetes schemas offline.
    "systemd",
    "yamllint",
    "python3-venv",
    // The smoke tier drives `wbscope top` in a real terminal (new-session, send-keys,
    // capture-pane).
    "tmux",
    // Service tests of TLS and basic auth: a self-signed certificate and an https client.
    "openssl",
    "curl",
    // The artifact tests: a Debian root file system (mmdebstrap) booted with systemd as PID 1
    // (systemd-nspawn, from systemd-container), and the OCI image run under podman.
    "mmdebstrap",
    "systemd-container",
    // podman's runtime is runc: crun refuses the cgroup v1/v2 hybrid hierarchy of some hosts
    // (these machines among them).
    "podman",
    "crun",
    "runc",
    // The VM tier (`cargo xtask vmtest`): QEMU with software emulation, the C virtiofsd
    // (qemu-system-common, which qemu-system-x86 brings), busybox for the initramfs, depmod
    // for the kernel packages' module dependencies, xz for their compressed modules.
    "qemu-system-x86",
    "qemu-system-common",
    "busybox-static",
    "kmod",
    "xz-utils",
];

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

/// Installs `pkgs` (no-op when empty) without letting their maintainer scripts start any
/// service, then disables and stops the units they enabled (services.rs).
pub fn install(pkgs: &[String]) -> Result<()> {
    if pkgs.is_empty() {
        return Ok(());
    }
    update_cmd().run()?;
    let enabled_before = services::enabled_units()?;
    {
        let _no_starts = services::DenyStarts::install()?;
        install_cmd(pkgs).run()?;
    }
    services::disable_new(&enabled_before, &services::enabled_units()?)?;
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
        assert!(packages(23, Purpose::Run).contains(&"llvm-23-dev".to_owned()));
    }

    #[test]
    fn running_installs_no_test_tool() {
        let run = packages(22, Purpose::Run);
        for test_only in [
            "qemu-system-x86",
            "bpftrace",
            "yamllint",
            "tmux",
            "prometheus",
        ] {
            assert!(
                !run.iter().any(|p| p == test_only),
                "{test_only} in {run:?}"
            );
            assert!(packages(22, Purpose::Test).iter().any(|p| p == test_only));
        }
        let package = packages(22, Purpose::Package);
        assert!(run.iter().all(|p| package.contains(p)));
        assert!(package.iter().any(|p| p == "umoci"));
        assert!(!package.iter().any(|p| p == "podman"));
    }
}
