//! An NFSv4.2 server (kernel nfsd) and client mount on the loopback interface, torn down when
//! dropped, also during a panic.
//!
//! NFSv4 only, so nothing needs rpcbind, lockd or rpc.statd: the server's user-space part is
//! `exportfs` and `rpc.mountd` (which answers nfsd's export cache upcalls) from Debian's
//! nfs-kernel-server package, unpacked (not installed) into the directory that
//! [`HELPERS_ENV`] names. They run in a private mount namespace whose `/var/lib` is a tmpfs, so
//! their state files (`/var/lib/nfs/etab`, …) never touch the host, and `rpc.mountd` is killed
//! on drop. The client mount passes the kernel's text options directly (`addr=`,
//! `clientaddr=`), so no `mount.nfs` helper is needed either.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The environment variable naming the unpacked nfs-kernel-server (+ libwrap0) root, set by
/// `cargo xtask vmtest` in the guest.
pub const HELPERS_ENV: &str = "WBSCOPE_NFS_HELPERS";

const NFSD_FS: &str = "/proc/fs/nfsd";

/// Why the fixture cannot be built here, for the test's `SKIPPED:` line.
pub fn unavailable() -> Option<String> {
    let Some(helpers) = std::env::var_os(HELPERS_ENV) else {
        return Some(format!(
            "{HELPERS_ENV} is not set (cargo xtask vmtest unpacks the NFS server helpers)"
        ));
    };
    let mountd = Path::new(&helpers).join("usr/sbin/rpc.mountd");
    if !mountd.is_file() {
        return Some(format!("{} is missing", mountd.display()));
    }
    let filesystems = fs::read_to_string("/proc/filesystems").unwrap_or_default();
    for (fs, module) in [("nfsd", "nfsd"), ("nfs4", "nfsv4")] {
        if !filesystems
            .lines()
            .any(|l| l.split_whitespace().last() == Some(fs))
        {
            return Some(format!(
                "this kernel has no {fs} filesystem (module {module} not loaded)"
            ));
        }
    }
    None
}

/// The server and the mounted client. Fields record what was set up, so that `Drop` undoes
/// exactly that.
pub struct NfsLoopback {
    dir: PathBuf,
    mountpoint: PathBuf,
    mounted: bool,
    nfsd_fs_mounted: bool,
    threads_started: bool,
    mountd: Option<Child>,
}

/// Writes one line to an nfsd control file (several of them refuse a value without the newline).
fn write(path: &str, value: &str) -> Result<(), String> {
    fs::write(path, format!("{value}\n")).map_err(|e| format!("write {value:?} to {path}: {e}"))
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl NfsLoopback {
    /// Exports a fresh directory under `TMPDIR` and starts nfsd (NFSv4 only) on 127.0.0.1;
    /// [`NfsLoopback::mount`] mounts it. Panics with the step that failed, after undoing the
    /// ones before (a panic in `mount` is undone by `Drop`).
    pub fn new() -> NfsLoopback {
        let dir = std::env::temp_dir().join(format!("wbscope-nfs-{}", std::process::id()));
        let mut nfs = NfsLoopback {
            mountpoint: dir.join("mnt"),
            dir,
            mounted: false,
            nfsd_fs_mounted: false,
            threads_started: false,
            mountd: None,
        };
        if let Err(why) = nfs.set_up() {
            drop(nfs);
            panic!("NFS loopback set-up: {why}");
        }
        nfs
    }

    fn set_up(&mut self) -> Result<(), String> {
        let helpers = PathBuf::from(std::env::var_os(HELPERS_ENV).ok_or("no helpers")?);
        let export = self.dir.join("export");
        for d in [&export, &self.mountpoint] {
            fs::create_dir_all(d).map_err(|e| format!("mkdir {}: {e}", d.display()))?;
        }
        let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        if !mounts.lines().any(|l| l.split(' ').nth(1) == Some(NFSD_FS)) {
            run(Command::new("mount").args(["-t", "nfsd", "nfsd", NFSD_FS]))?;
            self.nfsd_fs_mounted = true;
        }
        // NFSv4 only (no rpcbind, lockd or statd). Kernels built without NFSv2 refuse `-2`.
        let versions = format!("{NFSD_FS}/versions");
        let _ = write(&versions, "-2");
        write(&versions, "-3 +4 +4.1 +4.2")?;
        let enabled = fs::read_to_string(&versions).unwrap_or_default();
        if enabled.split_whitespace().any(|v| v == "+2" || v == "+3") {
            return Err(format!("nfsd still serves NFSv2/3: {}", enabled.trim()));
        }
        // The shortest grace period nfsd accepts: a fresh server refuses OPENs until it ends.
        write(&format!("{NFSD_FS}/nfsv4gracetime"), "10")?;
        write(&format!("{NFSD_FS}/nfsv4leasetime"), "10")?;

        let sbin = helpers.join("usr/sbin");
        let script = format!(
            "mount -t tmpfs wbscope-nfs-state /var/lib && mkdir -p /var/lib/nfs \
             && touch /var/lib/nfs/etab /var/lib/nfs/rmtab \
             && {exportfs} -i -o rw,no_root_squash,insecure,no_subtree_check,fsid=0 127.0.0.1:{export} \
             && exec {mountd} --foreground --no-nfs-version 2 --no-nfs-version 3 --no-udp",
            exportfs = shell_quote(&sbin.join("exportfs").to_string_lossy()),
            mountd = shell_quote(&sbin.join("rpc.mountd").to_string_lossy()),
            export = shell_quote(&export.to_string_lossy()),
        );
        let mountd = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .env("LD_LIBRARY_PATH", helpers.join("usr/lib/x86_64-linux-gnu"))
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| format!("start rpc.mountd: {e}"))?;
        self.mountd = Some(mountd);
        wait_for_mountd(self.mountd.as_mut())?;

        write(&format!("{NFSD_FS}/portlist"), "tcp 2049")?;
        write(&format!("{NFSD_FS}/threads"), "4")?;
        self.threads_started = true;
        Ok(())
    }

    /// Mounts the export, once nfsd's grace period is over (ended at once where the kernel
    /// allows it, else waited out).
    pub fn mount(&mut self) {
        if let Err(why) = self.try_mount() {
            panic!("NFS loopback mount: {why}");
        }
    }

    fn try_mount(&mut self) -> Result<(), String> {
        let mnt = self.mountpoint.to_string_lossy().into_owned();
        run(Command::new("timeout").args([
            "60",
            "mount",
            "-t",
            "nfs4",
            "-o",
            "vers=4.2,addr=127.0.0.1,clientaddr=127.0.0.1",
            "127.0.0.1:/",
            &mnt,
        ]))?;
        self.mounted = true;
        wait_for_grace_end()
    }

    /// Where the export is mounted.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// The mount's `device` label: its superblock's `MAJ:MIN` (an anonymous device).
    pub fn device_label(&self) -> String {
        let dev = fs::metadata(&self.mountpoint)
            .expect("stat the NFS mount")
            .dev();
        format!("{}:{}", libc::major(dev), libc::minor(dev))
    }
}

/// Waits until `rpc.mountd` serves nfsd's export upcalls (after `exportfs` wrote the private
/// etab): the client's mount needs them answered.
fn wait_for_mountd(mountd: Option<&mut Child>) -> Result<(), String> {
    let mountd = mountd.ok_or("no mountd")?;
    let start = Instant::now();
    while !channel_has_reader() {
        if let Ok(Some(status)) = mountd.try_wait() {
            return Err(format!("exportfs or rpc.mountd exited: {status}"));
        }
        if start.elapsed() > Duration::from_secs(20) {
            return Err("rpc.mountd did not open nfsd's export channel in 20 s".into());
        }
        thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// Ends nfsd's NFSv4 grace period, or waits for it to end (`nfsv4gracetime`, 10 s): a client
/// that OPENs during it is refused and backs off for up to 13 s.
fn wait_for_grace_end() -> Result<(), String> {
    let grace = format!("{NFSD_FS}/v4_end_grace");
    // Refused (EBUSY) by some kernels; the grace period then runs out by itself.
    let _ = write(&grace, "Y");
    let start = Instant::now();
    while fs::read_to_string(&grace).unwrap_or_default().trim() != "Y" {
        if start.elapsed() > Duration::from_secs(30) {
            return Err("nfsd's grace period did not end in 30 s".into());
        }
        thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// Whether a process holds `/proc/net/rpc/nfsd.export/channel` open (rpc.mountd does once it
/// serves upcalls).
fn channel_has_reader() -> bool {
    let Ok(procs) = fs::read_dir("/proc") else {
        return false;
    };
    procs.flatten().any(|p| {
        fs::read_dir(p.path().join("fd")).is_ok_and(|fds| {
            fds.flatten().any(|fd| {
                // `/proc/net` is `/proc/self/net`: the link names the opener's pid.
                fs::read_link(fd.path()).is_ok_and(|t| {
                    t.to_string_lossy()
                        .ends_with("/net/rpc/nfsd.export/channel")
                })
            })
        })
    })
}

impl Drop for NfsLoopback {
    fn drop(&mut self) {
        let mnt = self.mountpoint.to_string_lossy().into_owned();
        if self.mounted && run(Command::new("umount").arg(&mnt)).is_err() {
            // A writer that has not closed its file yet; do not leave the mount behind.
            if let Err(why) = run(Command::new("umount").args(["-f", "-l", &mnt])) {
                eprintln!("NFS loopback: could not unmount {mnt}: {why}");
            }
        }
        if self.threads_started
            && let Err(why) = write(&format!("{NFSD_FS}/threads"), "0")
        {
            eprintln!("NFS loopback: could not stop nfsd: {why}");
        }
        if let Some(mut mountd) = self.mountd.take() {
            // SAFETY: kill(2) on the pid of our own child, which we have not reaped yet.
            unsafe { libc::kill(mountd.id() as i32, libc::SIGTERM) };
            let start = Instant::now();
            while !matches!(mountd.try_wait(), Ok(Some(_))) {
                if start.elapsed() > Duration::from_secs(5) {
                    let _ = mountd.kill();
                    let _ = mountd.wait();
                    break;
                }
                thread::sleep(Duration::from_millis(50));
            }
        }
        if self.nfsd_fs_mounted
            && let Err(why) = run(Command::new("umount").arg(NFSD_FS))
        {
            eprintln!("NFS loopback: could not unmount {NFSD_FS}: {why}");
        }
        if let Err(e) = fs::remove_dir_all(&self.dir) {
            eprintln!("NFS loopback: could not remove {}: {e}", self.dir.display());
        }
    }
}
