//! `wbscope top` in a real terminal (tmux): while a process with a distinctive name fsyncs in a
//! loop on a throttled loop device, the device and the process are on screen, the keys work and
//! `q` exits with status 0. Once with top's own probes (no daemon at --url), once reading a
//! running daemon.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use testkit::{FsKind, LoopFs, wait_until};

use super::{binary, free_addr};

/// The workload's command name (a symlink to dd: the kernel names the task after it).
const COMM: &str = "wbtop-fsyncer";
/// 1 MiB per dd at 2 MiB/s: each fsync takes about half a second, each dd lives as long.
const THROTTLE_BPS: u64 = 2 << 20;
const SCREEN: Duration = Duration::from_secs(40);

/// A shell loop running `COMM` (dd with conv=fsync) until its stop file exists.
struct Fsyncer {
    child: Child,
    stop: PathBuf,
}

impl Fsyncer {
    fn start(fs: &LoopFs, dir: &Path) -> Fsyncer {
        let dd = dir.join(COMM);
        std::os::unix::fs::symlink("/bin/dd", &dd).expect("symlink dd");
        let stop = dir.join("stop");
        let child = Command::new("sh")
            .args([
                "-c",
                "while [ ! -e \"$2\" ]; do \"$0\" if=/dev/zero of=\"$1\" bs=256k count=4 \
                 conv=fsync status=none || exit 1; done",
            ])
            .arg(&dd)
            .arg(fs.mountpoint().join("fsync-loop"))
            .arg(&stop)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn the fsync loop");
        Fsyncer { child, stop }
    }
}

impl Drop for Fsyncer {
    /// Lets the running dd finish (it holds a file on the loop filesystem, which must unmount).
    fn drop(&mut self) {
        let _ = std::fs::write(&self.stop, b"");
        let done = wait_until(Duration::from_secs(15), Duration::from_millis(100), || {
            self.child.try_wait().ok().flatten()
        });
        if done.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A tmux server of our own (its own socket), killed on drop, also when the test fails.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux (installed by cargo xtask setup)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "top"])
    }

    /// Polls the screen until `ok` accepts it; panics with the last screen after `timeout`.
    fn wait_screen(&self, what: &str, timeout: Duration, ok: impl Fn(&str) -> bool) -> String {
        let mut last = String::new();
        let found = wait_until(timeout, Duration::from_millis(250), || {
            last = self.screen();
            ok(&last).then(|| last.clone())
        });
        found.unwrap_or_else(|| panic!("timed out waiting for {what}; screen:\n{last}"))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}

/// Runs top against `url` and checks the screen; `source` is what its header must name.
fn top_in_tmux(url: &str, source: &str) {
    let fs = LoopFs::new(FsKind::Ext4, 128).expect("loop filesystem");
    fs.throttle_write_bps(THROTTLE_BPS).expect("throttle");
    let dir = tempfile::tempdir().expect("temp dir");
    let _fsyncer = Fsyncer::start(&fs, dir.path());
    let exit_file = dir.path().join("exit");
    let tmux = Tmux {
        socket: format!("wbscope-top-{}", std::process::id()),
    };
    let command = format!(
        "{} top --url {url}; echo EXIT:$? > {}",
        binary().display(),
        exit_file.display()
    );
    tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "200",
        "-y",
        "50",
        &command,
    ]);

    let device = fs.loop_name();
    let screen = tmux.wait_screen("the device and the process", SCREEN, |s| {
        s.contains(&format!("│{device} "))
            && s.contains(COMM)
            && s.contains("last 1.")
            && s.contains(source)
    });
    println!("{screen}");
    tmux.run(&["send-keys", "-t", "top", "s"]);
    tmux.wait_screen("the throttle-time sort", Duration::from_secs(5), |s| {
        s.contains("sort: throttle time")
    });
    tmux.run(&["send-keys", "-t", "top", "?"]);
    tmux.wait_screen("the help overlay", Duration::from_secs(5), |s| {
        s.contains("q  quit")
    });
    tmux.run(&["send-keys", "-t", "top", "?"]);
    tmux.run(&["send-keys", "-t", "top", "q"]);
    // The shell creates the file before `echo` writes to it: an empty file is not the status yet.
    let exit = wait_until(Duration::from_secs(15), Duration::from_millis(100), || {
        std::fs::read_to_string(&exit_file)
            .ok()
            .filter(|status| status.ends_with('\n'))
    });
    assert_eq!(
        exit.as_deref().map(str::trim),
        Some("EXIT:0"),
        "top did not exit with 0 after q; screen:\n{}",
        tmux.screen()
    );
}

#[test]
#[ignore = "needs root, tmux and the release binary: run with cargo xtask test"]
fn top_with_own_probes_shows_device_and_process_and_quits_on_q() {
    // Nobody listens there: top loads its own probes.
    top_in_tmux(&format!("http://{}", free_addr()), "own probes");
}

#[test]
#[ignore = "needs root, tmux and the release binary: run with cargo xtask test"]
fn top_reading_a_daemon_shows_device_and_process_and_quits_on_q() {
    let addr = free_addr();
    let mut daemon = Command::new(binary())
        .args(["run", "--listen", &addr.to_string(), "--log-level", "warn"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the daemon");
    let up = wait_until(Duration::from_secs(30), Duration::from_millis(200), || {
        testkit::scrape(addr).ok()
    });
    let result = std::panic::catch_unwind(|| {
        assert!(up.is_some(), "the daemon did not serve /metrics at {addr}");
        top_in_tmux(
            &format!("http://{addr}"),
            &format!("daemon at http://{addr}"),
        );
    });
    // SIGTERM, so the daemon detaches its probes.
    let _ = Command::new("kill").arg(daemon.id().to_string()).status();
    let _ = daemon.wait();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}
