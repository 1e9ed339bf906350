//! One boot: virtiofsd exporting the host's root, QEMU (software emulation, under `timeout`)
//! with that share, a scratch virtio disk and the serial console on stdout, which is echoed
//! and kept for parsing.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::vmtest::initramfs::ROOT_TAG;

/// What to boot.
pub struct Boot<'a> {
    pub vmlinuz: &'a Path,
    pub initramfs: &'a Path,
    /// Raw image attached as the guest's `/dev/vda`.
    pub scratch: &'a Path,
    /// Executable on the host's filesystem, run by the guest's init in a chroot of the host root.
    pub guest_script: &'a Path,
    /// Guest memory in MiB.
    pub memory_mib: u32,
    /// `timeout` for QEMU: TCG can hang instead of exiting when something goes wrong.
    pub timeout: Duration,
    /// Where the serial console output is written.
    pub log: &'a Path,
    /// How long the console may stay silent before the guest is taken for dead (longer than
    /// the guest's own per-test watchdog, which prints when it fires).
    pub silence_limit: Duration,
    /// How QEMU runs the guest's two vCPUs.
    pub emulation: Emulation,
}

/// How QEMU's TCG runs the guest's two vCPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emulation {
    /// One host thread taking the vCPUs in turn (`tcg,thread=single`), the default: a guest
    /// CPU's rewrite of kernel code (tracepoints turned on and off, BPF trampolines) never
    /// overlaps another CPU's run of that code in the emulator, the condition under which
    /// threaded guests oopsed on an int3 while booting and hung after the NFS measurement. About
    /// as fast here: 5.10, 6.1, 6.12 and newest took 94, 146, 153 and 164 s against 86, 152, 141
    /// and 158 s threaded.
    OneThread,
    /// A host thread per vCPU (`tcg,thread=multi`, `--threaded`): the vCPUs really run at the
    /// same time.
    Threaded,
}

impl Emulation {
    fn accel(self) -> &'static str {
        match self {
            Emulation::Threaded => "tcg,thread=multi",
            Emulation::OneThread => "tcg,thread=single",
        }
    }
}

/// Where Debian's C virtiofsd lives (shipped in qemu-system-common).
const VIRTIOFSD: &str = "/usr/lib/qemu/virtiofsd";

/// Boots and returns the console output. Fails only when QEMU cannot be started; a guest that
/// timed out or crashed shows in the output (the caller looks for the markers).
pub fn run(boot: &Boot) -> Result<String> {
    let socket = std::env::temp_dir().join(format!("wbscope-vmtest-{}.sock", std::process::id()));
    let _ = fs::remove_file(&socket);
    let mut virtiofsd = Daemon(
        Command::new(VIRTIOFSD)
            .arg(format!("--socket-path={}", socket.display()))
            .args([
                "-o",
                "source=/",
                "-o",
                "cache=always",
                "-o",
                "sandbox=chroot",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("start {VIRTIOFSD} (apt package qemu-system-common)"))?,
    );
    let start = Instant::now();
    while !socket.exists() {
        if start.elapsed() > Duration::from_secs(10) {
            bail!("virtiofsd made no socket at {} in 10 s", socket.display());
        }
        if let Ok(Some(status)) = virtiofsd.0.try_wait() {
            bail!("virtiofsd exited at once ({status})");
        }
        thread::sleep(Duration::from_millis(50));
    }

    let args = qemu_args(boot, &socket);
    println!(
        "$ timeout {} qemu-system-x86_64 {}",
        boot.timeout.as_secs(),
        args.join(" ")
    );
    let mut qemu = Command::new("timeout")
        .args(["--kill-after=10", &boot.timeout.as_secs().to_string()])
        .arg("qemu-system-x86_64")
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("start qemu-system-x86_64 (apt package qemu-system-x86)")?;
    let stdout = qemu.stdout.take().context("qemu stdout")?;
    let mut log = fs::File::create(boot.log).with_context(|| format!("{}", boot.log.display()))?;
    let mut console = String::new();
    // The console is read on its own thread so that this one can notice a dead guest: a kernel
    // that locked up (or whose watchdog already reported a lockup) would otherwise hold the run
    // until the whole boot's `timeout`, which covers every test's own limit.
    let (lines, received) = mpsc::channel::<String>();
    let reader = thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap_or_default();
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut dead = DeadGuest::new(boot.silence_limit);
    loop {
        match received.recv_timeout(Duration::from_secs(1)) {
            Ok(line) => {
                // The serial console ends lines with CR LF.
                let line = line.trim_end_matches('\r');
                println!("  | {line}");
                let _ = writeln!(log, "{line}");
                console.push_str(line);
                console.push('\n');
                dead.saw(line);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if let Some(why) = dead.verdict() {
            println!("  | @@VMTEST {why}; stopping QEMU");
            console.push_str(&format!("@@VMTEST {why}; QEMU stopped\n"));
            // SAFETY: kill(2) on the pid of our own child (`timeout`, which passes SIGTERM on to
            // QEMU), not reaped yet.
            unsafe { libc::kill(qemu.id() as i32, libc::SIGTERM) };
            break;
        }
    }
    let status = qemu.wait().context("wait for qemu")?;
    let _ = reader.join();
    if status.code() == Some(124) || status.code() == Some(137) {
        console.push_str(&format!(
            "@@VMTEST timeout after {} s\n",
            boot.timeout.as_secs()
        ));
    }
    drop(virtiofsd);
    let _ = fs::remove_file(&socket);
    Ok(console)
}

fn qemu_args(boot: &Boot, socket: &Path) -> Vec<String> {
    let mem = boot.memory_mib;
    let pairs: [(&str, String); 16] = [
        // KVM on these hosts cannot run stock kernels; TCG always works (and is slower).
        ("-accel", boot.emulation.accel().into()),
        ("-cpu", "max".into()),
        ("-smp", "2".into()),
        ("-m", format!("{mem}M")),
        // vhost-user-fs needs guest memory that virtiofsd can map.
        (
            "-object",
            format!("memory-backend-memfd,id=mem,size={mem}M,share=on"),
        ),
        ("-numa", "node,memdev=mem".into()),
        (
            "-chardev",
            format!("socket,id=vfs,path={}", socket.display()),
        ),
        (
            "-device",
            format!("vhost-user-fs-pci,chardev=vfs,tag={ROOT_TAG}"),
        ),
        (
            "-drive",
            format!(
                "file={},if=virtio,format=raw,cache=unsafe",
                boot.scratch.display()
            ),
        ),
        ("-kernel", boot.vmlinuz.display().to_string()),
        ("-initrd", boot.initramfs.display().to_string()),
        ("-display", "none".into()),
        ("-serial", "stdio".into()),
        ("-nic", "none".into()),
        ("-no-reboot", String::new()),
        // `quiet` keeps the boot's chatter off the console, `loglevel=5` lets warnings through:
        // the registers and call trace of a lockup report are printed at warning level, and
        // without them a hung guest's console does not say where its CPUs were.
        (
            "-append",
            format!(
                "console=ttyS0 panic=-1 quiet loglevel=5 cgroup_no_v1=all guestcmd={}",
                boot.guest_script.display()
            ),
        ),
    ];
    pairs
        .into_iter()
        .flat_map(|(flag, value)| [flag.to_owned(), value])
        .filter(|s| !s.is_empty())
        .collect()
}

/// A child process killed on drop.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A fresh sparse scratch image with an ext4 filesystem, `size_mib` large.
pub fn scratch_disk(path: &Path, size_mib: u64) -> Result<PathBuf> {
    let file = fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
    file.set_len(size_mib * 1024 * 1024)
        .with_context(|| format!("size {}", path.display()))?;
    drop(file);
    crate::cmd::Cmd::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(path)
        .run()?;
    Ok(path.to_owned())
}

/// What the kernel prints when it has locked up: after one of these the guest rarely recovers.
const LOCKUP_MARKERS: &[&str] = &[
    "soft lockup - CPU#",
    "rcu_sched self-detected stall",
    "rcu: INFO: rcu_sched detected stalls",
    "Kernel panic - not syncing",
];

/// Time the kernel gets after a lockup report to print the rest of its traces.
const LOCKUP_GRACE: Duration = Duration::from_secs(60);

/// Tells a guest that is dead (silent too long, or locked up) from one that is slow.
struct DeadGuest {
    silence_limit: Duration,
    last_line: Instant,
    lockup_since: Option<(Instant, String)>,
}

impl DeadGuest {
    fn new(silence_limit: Duration) -> DeadGuest {
        DeadGuest {
            silence_limit,
            last_line: Instant::now(),
            lockup_since: None,
        }
    }

    fn saw(&mut self, line: &str) {
        self.last_line = Instant::now();
        if self.lockup_since.is_none()
            && let Some(marker) = LOCKUP_MARKERS.iter().find(|m| line.contains(*m))
        {
            self.lockup_since = Some((Instant::now(), (*marker).to_owned()));
        }
    }

    /// Why the guest counts as dead, once it does.
    fn verdict(&self) -> Option<String> {
        if let Some((since, marker)) = &self.lockup_since
            && since.elapsed() > LOCKUP_GRACE
        {
            return Some(format!(
                "guest kernel reported \"{marker}\" {} s ago",
                since.elapsed().as_secs()
            ));
        }
        let silent = self.last_line.elapsed();
        (silent > self.silence_limit)
            .then(|| format!("guest console silent for {} s", silent.as_secs()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ago(secs: u64) -> Instant {
        Instant::now()
            .checked_sub(Duration::from_secs(secs))
            .expect("clock far enough from its start")
    }

    #[test]
    fn a_slow_guest_is_not_dead_a_silent_one_is() {
        let mut guest = DeadGuest::new(Duration::from_secs(420));
        guest.saw("test nfs::x ... ok");
        assert_eq!(guest.verdict(), None);
        guest.last_line = ago(421);
        assert_eq!(
            guest.verdict().as_deref(),
            Some("guest console silent for 421 s")
        );
    }

    #[test]
    fn a_lockup_report_gets_its_grace_then_ends_the_boot() {
        let mut guest = DeadGuest::new(Duration::from_secs(420));
        guest.saw("[  812.1] watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [wbscope:311]");
        assert_eq!(guest.verdict(), None, "the traces that follow are wanted");
        let marker = guest.lockup_since.take().map(|(_, m)| m);
        guest.lockup_since = marker.map(|m| (ago(61), m));
        guest.saw("[  834.1] watchdog: BUG: soft lockup - CPU#1 stuck for 44s!");
        assert_eq!(
            guest.verdict().as_deref(),
            Some("guest kernel reported \"soft lockup - CPU#\" 61 s ago")
        );
    }

    #[test]
    fn each_emulation_picks_its_tcg_threads_and_lockups_print_their_traces() {
        let path = Path::new("/nonexistent");
        let args = |emulation| {
            qemu_args(
                &Boot {
                    vmlinuz: path,
                    initramfs: path,
                    scratch: path,
                    guest_script: path,
                    memory_mib: 512,
                    timeout: Duration::from_secs(1),
                    log: path,
                    silence_limit: Duration::from_secs(1),
                    emulation,
                },
                path,
            )
        };
        let after = |args: &[String], flag: &str| {
            let at = args.iter().position(|a| a == flag).expect("flag");
            args[at + 1].clone()
        };
        let threaded = args(Emulation::Threaded);
        assert_eq!(after(&threaded, "-accel"), "tcg,thread=multi");
        assert!(after(&threaded, "-append").contains(" loglevel=5 "));
        assert_eq!(
            after(&args(Emulation::OneThread), "-accel"),
            "tcg,thread=single"
        );
    }
}
