//! The release daemon as a child process: `wbscope check` for the probe set, and `wbscope run
//! --listen 127.0.0.1:<port>` started, scraped and stopped. Dropping a running daemon stops it,
//! so no program stays attached after an error.

use std::collections::BTreeMap;
use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use testkit::Scrape;

use super::bpfstats::Counters;

/// How long the daemon may take to answer its first scrape.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long it may take to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// One line of `wbscope check`'s probe table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub name: String,
    /// As printed, e.g. `tracepoint syscalls/sys_enter_fsync` or `tp_btf block_rq_issue`.
    pub hook: String,
    pub attached: bool,
}

/// Runs `wbscope check` and returns its probe table. Fails if the command fails (no probe
/// attaches), since there would be nothing to measure.
pub fn check(binary: &Path) -> Result<Vec<Probe>> {
    let out = Command::new(binary)
        .arg("check")
        .output()
        .with_context(|| format!("running {} check", binary.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "wbscope check failed:\n{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(parse_check(&stdout))
}

/// The rows between the `PROBE HOOK STATUS` header and the blank line after the table. The hook
/// is the two words after the name (kind and target).
fn parse_check(stdout: &str) -> Vec<Probe> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("PROBE "))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let name = words.next()?.to_owned();
            let hook = format!("{} {}", words.next()?, words.next()?);
            let status: Vec<&str> = words.collect();
            Some(Probe {
                name,
                hook,
                attached: status.first() == Some(&"attached"),
            })
        })
        .collect()
}

/// A running `wbscope run`.
pub struct Daemon {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl Daemon {
    /// Starts the daemon (default configuration: every probe) on a free loopback port, its
    /// output going to `log`, and waits until it serves `/metrics` (it attaches every probe
    /// before it listens).
    pub fn start(binary: &Path, log: &Path) -> Result<Daemon> {
        Self::start_with(binary, log, None)
    }

    /// Like `start`, with `wbscope run --config config` when given.
    pub fn start_with(binary: &Path, log: &Path, config: Option<&Path>) -> Result<Daemon> {
        // A port freed just now can be taken by someone else before the daemon binds it; one
        // retry on a new port makes that race harmless.
        match Self::try_start(binary, log, config) {
            Ok(daemon) => Ok(daemon),
            Err(first) => Self::try_start(binary, log, config)
                .with_context(|| format!("first attempt: {first:#}")),
        }
    }

    fn try_start(binary: &Path, log: &Path, config: Option<&Path>) -> Result<Daemon> {
        let addr = free_port()?;
        let out = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone().context("duplicating the log file")?;
        let mut cmd = Command::new(binary);
        cmd.args(["run", "--listen", &addr.to_string()]);
        if let Some(config) = config {
            cmd.arg("--config").arg(config);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let mut daemon = Daemon {
            child,
            addr,
            log: log.to_owned(),
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = daemon.child.try_wait()? {
                bail!(
                    "wbscope exited with {status} while starting: {}",
                    daemon.log_tail()
                );
            }
            if testkit::scrape(addr).is_ok() {
                return Ok(daemon);
            }
            if Instant::now() > deadline {
                bail!(
                    "wbscope did not serve /metrics within {START_TIMEOUT:?}: {}",
                    daemon.log_tail()
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Scrapes and parses `/metrics`.
    pub fn scrape(&self) -> Result<Scrape> {
        let text = testkit::scrape(self.addr).context("scraping wbscope")?;
        Scrape::parse(&text).context("parsing wbscope's /metrics")
    }

    /// Run time and run count of each of the daemon's programs, from its
    /// `wbscope_bpf_program_*` metrics (the daemon keeps BPF run-time stats on while it runs).
    pub fn program_stats(&self) -> Result<BTreeMap<String, Counters>> {
        Ok(program_stats(&self.scrape()?))
    }

    /// SIGTERM, then waits for a clean exit; fails if the daemon does not exit 0.
    pub fn stop(mut self) -> Result<()> {
        let status = self.terminate();
        match status {
            Some(s) if s.success() => Ok(()),
            Some(s) => bail!("wbscope exited with {s} on SIGTERM: {}", self.log_tail()),
            None => bail!("wbscope did not exit within {STOP_TIMEOUT:?} of SIGTERM; killed"),
        }
    }

    /// Sends SIGTERM and waits; kills after the timeout. `None` if it had to be killed.
    fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Some(status);
        }
        let pid = libc::pid_t::try_from(self.child.id()).ok()?;
        // SAFETY: kill(2) with a pid of our own unreaped child and a valid signal number.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }

    /// The end of the daemon's log, for error messages.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(5)..].join("\n");
        format!("log {}:\n{tail}", self.log.display())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// The `wbscope_bpf_program_*` counters by program (run seconds converted to ns).
pub fn program_stats(scrape: &Scrape) -> BTreeMap<String, Counters> {
    let mut stats: BTreeMap<String, Counters> = BTreeMap::new();
    for (labels, secs) in scrape.samples("wbscope_bpf_program_run_seconds_total") {
        if let Some(program) = labels.get("program") {
            stats.entry(program.clone()).or_default().run_ns = (secs * 1e9).round() as u64;
        }
    }
    for (labels, runs) in scrape.samples("wbscope_bpf_program_runs_total") {
        if let Some(program) = labels.get("program") {
            stats.entry(program.clone()).or_default().runs = runs as u64;
        }
    }
    stats
}

/// A loopback address with a port the kernel just handed out.
fn free_port() -> Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").context("binding an ephemeral port")?;
    listener.local_addr().context("reading the ephemeral port")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_check_table() {
        let out = "wbscope 0.1.0 on kernel 6.18\n\nPROBE  HOOK  STATUS\n\
                   writeback_start  tracepoint writeback/writeback_start  attached\n\
                   rq_issue  tp_btf block_rq_issue  skipped: no btf_trace_block_rq_issue\n\
                   \n2 of 3 probes attach on this kernel\n";
        let probes = parse_check(out);
        assert_eq!(probes.len(), 2);
        assert_eq!(probes[0].hook, "tracepoint writeback/writeback_start");
        assert!(probes[0].attached);
        assert_eq!(probes[1].name, "rq_issue");
        assert!(!probes[1].attached);
    }

    #[test]
    fn reads_program_stats_from_metrics() {
        let text = "wbscope_bpf_program_run_seconds_total{program=\"a\"} 0.000001295\n\
                    wbscope_bpf_program_runs_total{program=\"a\"} 1\n";
        let stats = program_stats(&Scrape::parse(text).unwrap());
        assert_eq!(
            stats["a"],
            Counters {
                run_ns: 1295,
                runs: 1
            }
        );
    }
}
