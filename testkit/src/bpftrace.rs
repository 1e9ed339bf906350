//! An independent tracer running alongside a test: a bpftrace script whose output the test
//! compares with wbscope's numbers. bpftrace is installed by `cargo xtask setup`.
//!
//! bpftrace prints "Attaching N probes..." *before* it attaches them, so readiness is signalled
//! by the script's own `BEGIN` probe, which bpftrace triggers only after every other probe is
//! attached. Output is line-buffered (`-B line`) so that the marker arrives while it runs.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::sys::warn;

/// The line the `BEGIN` probe added by [`Bpftrace::start`] prints.
const READY: &str = "wbscope-tracer-ready";
/// How long attaching may take (bpftrace compiles the script first).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running bpftrace; stopped with SIGINT (so it prints its maps) by [`Bpftrace::stop`], or
/// killed when dropped.
pub struct Bpftrace {
    child: Option<Child>,
    stdout: Arc<Mutex<String>>,
    stdout_reader: Option<JoinHandle<()>>,
    stderr_reader: Option<JoinHandle<String>>,
}

impl Bpftrace {
    /// Starts `bpftrace -e <script>` with a `BEGIN` probe prepended, and returns once every
    /// probe of the script is attached.
    pub fn start(script: &str) -> Result<Bpftrace> {
        let program = format!("BEGIN {{ printf(\"{READY}\\n\"); }}\n{script}");
        let mut child = Command::new("bpftrace")
            .args(["-B", "line", "-e", &program])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::Command {
                command: "bpftrace".into(),
                detail: e.to_string(),
            })?;
        let stdout = Arc::new(Mutex::new(String::new()));
        let out = child.stdout.take().map(|pipe| {
            let sink = Arc::clone(&stdout);
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(|l| l.ok()) {
                    if let Ok(mut text) = sink.lock() {
                        text.push_str(&line);
                        text.push('\n');
                    }
                }
            })
        });
        let err = child.stderr.take().map(|mut pipe| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = pipe.read_to_string(&mut text);
                text
            })
        });
        let mut tracer = Bpftrace {
            child: Some(child),
            stdout,
            stdout_reader: out,
            stderr_reader: err,
        };
        tracer.wait_ready()?;
        Ok(tracer)
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if self.output().lines().any(|l| l == READY) {
                return Ok(());
            }
            let exited = !matches!(self.child.as_mut().map(Child::try_wait), Some(Ok(None)));
            if exited || Instant::now() > deadline {
                let stderr = self.finish();
                return Err(Error::Command {
                    command: "bpftrace".into(),
                    detail: format!("not ready (exited: {exited}); stderr: {}", stderr.trim()),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What it printed so far.
    fn output(&self) -> String {
        self.stdout.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Stops it with SIGINT, waits for it to print its maps and exit, and returns its stdout
    /// (without the readiness line).
    pub fn stop(mut self) -> Result<String> {
        if let Some(child) = &self.child {
            let pid = libc::pid_t::try_from(child.id())
                .map_err(|_| Error::Invalid("bpftrace pid out of range".into()))?;
            // SAFETY: kill only sends a signal to the child this struct spawned and still owns
            // (it has not been waited for, so the pid cannot have been reused).
            if unsafe { libc::kill(pid, libc::SIGINT) } != 0 {
                return Err(crate::error::last_os_error("SIGINT to bpftrace"));
            }
        }
        self.finish();
        Ok(self
            .output()
            .lines()
            .filter(|l| *l != READY)
            .map(|l| format!("{l}\n"))
            .collect())
    }

    /// Waits for the child (killing it if it does not exit on its own within a few seconds) and
    /// its reader threads; returns its stderr.
    fn finish(&mut self) -> String {
        if let Some(mut child) = self.child.take() {
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if matches!(child.try_wait(), Ok(None)) {
                warn("bpftrace did not exit after SIGINT; killing it");
                let _ = child.kill();
            }
            let _ = child.wait();
        }
        if let Some(reader) = self.stdout_reader.take() {
            let _ = reader.join();
        }
        self.stderr_reader
            .take()
            .and_then(|r| r.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Bpftrace {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
        }
        self.finish();
    }
}

/// The value of a scalar map line such as `@issued: 33` in bpftrace's output; 0 when the map
/// was never written (bpftrace then prints nothing for it).
pub fn scalar(output: &str, map: &str) -> u64 {
    let prefix = format!("@{map}: ");
    output
        .lines()
        .find_map(|l| l.strip_prefix(&prefix)?.trim().parse().ok())
        .unwrap_or(0)
}

/// The numbers of every line `<tag> <number>` printed by the script, in order.
pub fn tagged_values(output: &str, tag: &str) -> Vec<u64> {
    output
        .lines()
        .filter_map(|l| {
            let (t, v) = l.split_once(' ')?;
            (t == tag).then(|| v.trim().parse().ok())?
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_scalars_and_tagged_lines() {
        let out = "Attaching 3 probes...\nlat 1200\nlat 5\nother 7\n\n@issued: 33\n";
        assert_eq!(scalar(out, "issued"), 33);
        assert_eq!(scalar(out, "missing"), 0);
        assert_eq!(tagged_values(out, "lat"), vec![1200, 5]);
    }
}
