//! What the artifact tests share: the artifacts' paths (set by `cargo xtask test`), a fresh copy
//! of a clean Debian 12 root file system (mmdebstrap minbase plus systemd: no compiler, no Rust,
//! nothing of this workspace), commands run chrooted into it, and `wbscope check`'s verdict.
//!
//! Every chrooted command runs in a mount namespace of its own (unshare(2) before the chroot), so the
//! /proc and /sys it binds vanish with the process, also when a test fails half way.

use std::{
    net::{SocketAddr, TcpListener},
    path::{Path, PathBuf},
    process::{Command, Output},
};

/// An artifact named by an environment variable of `cargo xtask test`.
pub fn artifact(var: &str) -> PathBuf {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("{var} must name the artifact (cargo xtask test sets it)"));
    assert!(path.is_file(), "{var}: {} does not exist", path.display());
    path
}

/// Runs `program args`, failing the test with its output unless it exits 0.
pub fn run(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Output {
    let program = program.as_ref();
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", program.to_string_lossy()));
    assert!(
        out.status.success(),
        "{} {args:?} failed ({}):\n{}{}",
        program.to_string_lossy(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A fresh, private copy of the clean root file system; removed on drop.
pub struct Rootfs {
    dir: tempfile::TempDir,
}

impl Rootfs {
    /// Extracts `WBSCOPE_ROOTFS` (a tarball from mmdebstrap) into a new directory.
    pub fn fresh() -> Rootfs {
        let tarball = artifact("WBSCOPE_ROOTFS");
        let dir = tempfile::Builder::new()
            .prefix("wbscope-rootfs-")
            .tempdir_in(tarball.parent().expect("rootfs tarball dir"))
            .expect("temp dir for the root file system");
        run(
            "tar",
            &[
                "-C",
                &dir.path().to_string_lossy(),
                "-xf",
                &tarball.to_string_lossy(),
            ],
        );
        let rootfs = Rootfs { dir };
        // The point of the clean root: nothing that builds wbscope is in it.
        for tool in [
            "usr/bin/cc",
            "usr/bin/gcc",
            "usr/bin/cargo",
            "usr/bin/rustc",
            "usr/bin/ld",
        ] {
            assert!(
                !rootfs.path().join(tool).exists(),
                "/{tool} exists in the clean root file system"
            );
        }
        rootfs
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `argv` chrooted into the root (see [`chroot`]); the output whatever the status.
    pub fn chroot(&self, keep_caps: Option<&[u32]>, argv: &[&str]) -> Output {
        chroot(self.path(), keep_caps, argv)
            .output()
            .expect("run the chrooted command")
    }
}

/// CAP_PERFMON and CAP_BPF: the unit's CapabilityBoundingSet and the DaemonSet's `add`.
pub const UNIT_CAPS: &[u32] = &[38, 39];

/// `argv` (a path inside `root`) chrooted into `root` in a mount namespace of its own, with the
/// host's /proc and /sys bound (so tracefs, BTF and debugfs) and a fresh tmpfs on /run. With
/// `keep_caps`, every other capability is dropped from the bounding set first, so the program
/// runs with exactly those (as root). The mounts go with the namespace when the process exits.
pub fn chroot(root: &Path, keep_caps: Option<&[u32]>, argv: &[&str]) -> Command {
    use std::ffi::CString;
    use std::os::unix::{ffi::OsStrExt as _, process::CommandExt as _};

    for dir in ["proc", "sys", "run"] {
        std::fs::create_dir_all(root.join(dir)).expect("mount point in the root");
    }
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).expect("path without NUL");
    let (proc_at, sys_at, run_at, root_c) = (
        c(&root.join("proc")),
        c(&root.join("sys")),
        c(&root.join("run")),
        c(root),
    );
    let keep: Vec<u32> = keep_caps.map(<[u32]>::to_vec).unwrap_or_default();
    let drop_caps = keep_caps.is_some();
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..]);
    let fail = || Err(std::io::Error::last_os_error());
    // SAFETY: runs in the forked child before exec; it only makes system calls on memory
    // prepared before the fork (no allocation, no locks).
    unsafe {
        cmd.pre_exec(move || {
            let (none, no_data) = (std::ptr::null(), std::ptr::null());
            if libc::unshare(libc::CLONE_NEWNS) != 0
                || libc::mount(
                    none,
                    c"/".as_ptr(),
                    none,
                    libc::MS_REC | libc::MS_PRIVATE,
                    no_data,
                ) != 0
                || libc::mount(
                    c"/proc".as_ptr(),
                    proc_at.as_ptr(),
                    none,
                    libc::MS_BIND | libc::MS_REC,
                    no_data,
                ) != 0
                || libc::mount(
                    c"/sys".as_ptr(),
                    sys_at.as_ptr(),
                    none,
                    libc::MS_BIND | libc::MS_REC,
                    no_data,
                ) != 0
                || libc::mount(
                    c"tmpfs".as_ptr(),
                    run_at.as_ptr(),
                    c"tmpfs".as_ptr(),
                    0,
                    no_data,
                ) != 0
                || libc::chroot(root_c.as_ptr()) != 0
                || libc::chdir(c"/".as_ptr()) != 0
            {
                return fail();
            }
            if drop_caps {
                for cap in 0..64u32 {
                    if !keep.contains(&cap)
                        && libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0
                        && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL)
                    {
                        return fail();
                    }
                }
            }
            Ok(())
        });
    }
    cmd
}

/// The closing line of `wbscope check`: `N of M probes attach on this kernel`.
pub fn check_summary(stdout: &str) -> String {
    stdout
        .lines()
        .find(|l| l.contains("probes attach on this kernel"))
        .unwrap_or_else(|| panic!("no summary line in wbscope check's output:\n{stdout}"))
        .trim()
        .to_owned()
}

/// `wbscope check` of the release binary on this host: what every artifact must match.
pub fn host_check_summary() -> String {
    let bin = artifact("WBSCOPE_BIN");
    let out = run(&bin, &["check"]);
    check_summary(&text(&out.stdout))
}

/// Asserts that `out` is a passing `wbscope check` with the host's verdict.
pub fn assert_checks_like_the_host(out: &Output, what: &str) {
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "{what}: wbscope check failed ({}):\n{stdout}{}",
        out.status,
        text(&out.stderr)
    );
    let summary = check_summary(&stdout);
    eprintln!("{what}: {summary}");
    assert_eq!(
        summary,
        host_check_summary(),
        "{what} differs from the host's binary"
    );
}

/// A loopback address nobody listens on right now.
pub fn free_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local address")
}

/// Polls `/metrics` at `addr` for up to `secs` seconds; the body once it answers.
pub fn wait_for_metrics(addr: SocketAddr, secs: u64) -> Option<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if let Ok(body) = testkit::scrape(addr) {
            return Some(body);
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    None
}
