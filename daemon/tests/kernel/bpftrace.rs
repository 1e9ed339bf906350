//! An independent observer: a bpftrace script running alongside a test, whose aggregates the test
//! compares with wbscope's.

use std::{
    collections::BTreeMap,
    io::{BufRead as _, BufReader},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

/// How long bpftrace may take to print its maps and exit after SIGINT.
const EXIT_LIMIT: Duration = Duration::from_secs(60);
/// How long to wait for bpftrace to act on a SIGINT before sending another.
const RESIGNAL_EVERY: Duration = Duration::from_secs(5);

/// A running bpftrace script. Its `BEGIN` block must print a line `ready`; its maps are read from
/// what bpftrace prints when interrupted (`@name: N`).
pub struct Bpftrace {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Bpftrace {
    /// Starts `program` and waits until its probes are attached.
    pub fn start(program: &str) -> Bpftrace {
        // Where bpftrace cannot use kernel BTF (0.17 on 5.10 reports `btf: no`), it compiles
        // each tracepoint's record from its format file, whose fields may use types such as
        // `ino_t` (balance_dirty_pages' cgroup_ino) that only the libc header defines.
        let script = format!("#include <sys/types.h>\nBEGIN {{ printf(\"ready\\n\"); }} {program}");
        // bpftrace warns that it cannot raise RLIMIT_MEMLOCK (no CAP_SYS_RESOURCE here) and
        // carries on: BPF memory is charged to the memory cgroup on this kernel.
        let mut child = Command::new("bpftrace")
            .args(["-e", &script])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run bpftrace");
        let stdout = child.stdout.take().expect("bpftrace stdout");
        // Read on its own thread so that bpftrace never blocks on a full pipe; what it said is
        // shown if it fails to attach.
        let stderr = child.stderr.take().expect("bpftrace stderr");
        let said = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut text);
            text
        });
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let tracer = Bpftrace { child, lines };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tracer.lines.recv_timeout(left) {
                Ok(line) if line.trim() == "ready" => return tracer,
                Ok(_) => continue,
                Err(e) => {
                    let mut tracer = tracer;
                    let _ = tracer.child.kill();
                    let _ = tracer.child.wait();
                    let said = said.join().unwrap_or_default();
                    panic!("bpftrace did not attach: {e}; it said:\n{said}");
                }
            }
        }
    }

    /// Interrupts bpftrace and returns its scalar maps by name (without `@`). A map that never
    /// got a value is absent.
    pub fn finish(mut self) -> BTreeMap<String, u64> {
        // It prints its maps and exits within seconds, also under emulation; one that does not
        // must fail the test, not hang it. bpftrace 0.17 sometimes loses a SIGINT (seen here:
        // handled, yet it stayed in epoll_wait for minutes until a second SIGINT), so the signal
        // is repeated until it exits; its handler only sets a flag, so repeats are harmless.
        let deadline = Instant::now() + EXIT_LIMIT;
        let mut next_signal = Instant::now();
        while matches!(self.child.try_wait(), Ok(None)) {
            assert!(
                Instant::now() < deadline,
                "bpftrace did not exit within {EXIT_LIMIT:?} of SIGINT"
            );
            if Instant::now() >= next_signal {
                // SAFETY: kill only sends a signal to our own, not yet reaped, child process.
                unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
                next_signal = Instant::now() + RESIGNAL_EVERY;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut maps = BTreeMap::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            if let Some((name, value)) = line.strip_prefix('@').and_then(|l| l.split_once(':'))
                && let Ok(value) = value.trim().parse()
            {
                maps.insert(name.to_owned(), value);
            }
        }
        maps
    }
}

impl Drop for Bpftrace {
    fn drop(&mut self) {
        // On a panic before finish(): do not leave bpftrace running.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
