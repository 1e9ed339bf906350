//! Running the release binary as a child process: its log collected as it is written, signals,
//! bounded waits, and the BPF programs it leaves loaded.

use std::{
    io::{BufRead as _, BufReader},
    net::{SocketAddr, TcpListener},
    path::PathBuf,
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Mutex},
    thread::JoinHandle,
    time::{Duration, Instant},
};

/// The release binary under test (`WBSCOPE_BIN`, set by `cargo xtask test`).
pub fn binary() -> PathBuf {
    let path = std::env::var_os("WBSCOPE_BIN")
        .map(PathBuf::from)
        .expect("WBSCOPE_BIN must name the release binary (cargo xtask test sets it)");
    assert!(path.is_file(), "{} does not exist", path.display());
    path
}

/// A loopback address nobody listens on right now.
pub fn free_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local address")
}

/// A running `wbscope`; killed on drop if the test did not stop it.
pub struct Wbscope {
    child: Option<Child>,
    log: Arc<Mutex<String>>,
    reader: Option<JoinHandle<()>>,
}

impl Wbscope {
    /// Spawns `wbscope ARGS` with `envs` added, collecting stderr (its log) line by line.
    pub fn spawn(args: &[&str], envs: &[(&str, &str)]) -> Wbscope {
        let mut command = Command::new(binary());
        command.args(args).envs(envs.iter().copied());
        Wbscope::spawn_command(command)
    }

    /// Spawns `command` (which runs wbscope, e.g. through a wrapper), collecting stderr.
    pub fn spawn_command(mut command: Command) -> Wbscope {
        let mut child = command
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn wbscope");
        let stderr = child.stderr.take().expect("stderr pipe");
        let log = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&log);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut log = sink.lock().expect("log lock");
                log.push_str(&line);
                log.push('\n');
            }
        });
        Wbscope {
            child: Some(child),
            log,
            reader: Some(reader),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Everything logged so far.
    pub fn log(&self) -> String {
        self.log.lock().expect("log lock").clone()
    }

    /// How many times `needle` occurs in the log so far.
    pub fn count(&self, needle: &str) -> usize {
        self.log().matches(needle).count()
    }

    /// Waits until the log contains `needle` at least `times` times; panics with the log after
    /// `timeout`.
    pub fn wait_log(&self, needle: &str, times: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.count(needle) < times {
            assert!(
                Instant::now() < deadline,
                "no {times}× {needle:?} in the log within {timeout:?}; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends `signal` to the daemon.
    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on a child we spawned and have not reaped, so the pid is ours.
        let rc = unsafe { libc::kill(self.pid() as libc::pid_t, signal) };
        assert_eq!(rc, 0, "kill({}, {signal})", self.pid());
    }

    /// Waits for the exit (killing the daemon after `timeout`) and returns the status and how
    /// long it took from this call.
    pub fn wait_exit(&mut self, timeout: Duration) -> (ExitStatus, Duration) {
        let started = Instant::now();
        let mut child = self.child.take().expect("running");
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                if let Some(reader) = self.reader.take() {
                    let _ = reader.join();
                }
                return (status, started.elapsed());
            }
            if started.elapsed() > timeout {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "wbscope did not exit within {timeout:?}; log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Wbscope {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The probe names `wbscope check` lists (`testkit::check_table::probe_names`).
pub fn probe_names() -> Vec<String> {
    let output = Command::new(binary())
        .arg("check")
        .output()
        .expect("run wbscope check");
    assert!(output.status.success(), "wbscope check failed");
    testkit::check_table::probe_names(&String::from_utf8_lossy(&output.stdout))
}
