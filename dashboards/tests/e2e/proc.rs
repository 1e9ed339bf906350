//! Child processes of the test: the release wbscope daemon, and stopping children politely
//! (SIGTERM, then SIGKILL after a grace period) so nothing outlives the test.

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// How long a child gets to exit after SIGTERM before it is killed.
const GRACE: Duration = Duration::from_secs(10);

/// A loopback address nobody listens on right now.
pub fn free_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local address")
}

/// SIGTERM, wait up to [`GRACE`], then SIGKILL; always reaps the child.
pub fn stop(mut child: Child, what: &str) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) with a pid we spawned and still own (not yet reaped) and a valid
        // signal number has no memory-safety preconditions.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let deadline = Instant::now() + GRACE;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("{what} ignored SIGTERM for {GRACE:?}; killing it");
    let _ = child.kill();
    let _ = child.wait();
}

/// The release daemon (`WBSCOPE_BIN`) serving /metrics on a free loopback port.
pub struct Daemon {
    child: Option<Child>,
    pub addr: SocketAddr,
    log: TempDir,
}

impl Daemon {
    /// Starts `wbscope run --listen ADDR` with the default configuration except
    /// `[metrics] bpf_stats = true` (the self-cost panels read the kernel's BPF run-time
    /// statistics, which are opt-in), and waits for /metrics to answer.
    pub fn start() -> Daemon {
        let bin = std::env::var_os("WBSCOPE_BIN")
            .map(PathBuf::from)
            .expect("WBSCOPE_BIN must name the release binary (cargo xtask test sets it)");
        let log = tempfile::Builder::new()
            .prefix("wbscope-e2e-daemon-")
            .tempdir()
            .expect("temp dir for the daemon log");
        let file = File::create(log.path().join("wbscope.log")).expect("daemon log");
        let config = log.path().join("wbscope.toml");
        std::fs::write(&config, "[metrics]\nbpf_stats = true\n").expect("daemon config");
        let addr = free_addr();
        let child = Command::new(&bin)
            .arg("run")
            .arg("--config")
            .arg(&config)
            .args(["--listen", &addr.to_string()])
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("dup log"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
        let daemon = Daemon {
            child: Some(child),
            addr,
            log,
        };
        let up = testkit::wait_until(Duration::from_secs(30), Duration::from_millis(100), || {
            testkit::scrape(addr).ok()
        });
        assert!(
            up.is_some(),
            "wbscope /metrics never answered:\n{}",
            daemon.log()
        );
        daemon
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path().join("wbscope.log")).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            stop(child, "wbscope");
        }
    }
}
