//! The alternatives measured in the same run: the repository's bpftrace script
//! (`bench/alternative.bt`: flusher work, block request latency, fsync/fdatasync latency) and
//! libbpf-tools `biolatency -D -F` (block only). Their programs are found through the fds their
//! process holds, and their cost read with `bpftool` while `kernel.bpf_stats_enabled=1`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::bpfstats::{self, Counters, StatsEnabled};
use super::cost::{self, Cost};
use super::procfs;
use super::workloads::Workload;
use super::{Ctx, interrupt};

/// How long a tool may take to load and attach (bpftrace compiles its script first).
const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// The set of programs must stay the same this long to count as attached.
const SETTLE: Duration = Duration::from_millis(1500);

/// A tool to compare wbscope with.
#[derive(Debug, Clone, Copy)]
pub enum Alternative {
    Bpftrace,
    Biolatency,
}

impl Alternative {
    pub const ALL: [Alternative; 2] = [Alternative::Bpftrace, Alternative::Biolatency];

    /// The tool column of the report.
    pub fn name(self) -> &'static str {
        match self {
            Alternative::Bpftrace => "bpftrace",
            Alternative::Biolatency => "biolatency",
        }
    }

    /// How to run it, as a user would (the installed package's program).
    fn command(self, root: &Path) -> Command {
        match self {
            Alternative::Bpftrace => {
                let mut cmd = Command::new("bpftrace");
                cmd.arg(root.join("bench/alternative.bt"));
                cmd
            }
            // libbpf-tools' biolatency, per disk (-D) and per I/O flags (-F); it prints its
            // histograms when interrupted.
            Alternative::Biolatency => {
                let mut cmd = Command::new("biolatency");
                cmd.args(["-D", "-F"]);
                cmd
            }
        }
    }
}

/// A running tool and the programs it loaded.
struct Running {
    child: Child,
    ids: BTreeSet<u32>,
    /// Program id → the tracepoint it is attached to (bpftool's program names are cut to 15
    /// bytes; the tracepoint names the program the way wbscope's probe names do).
    hooks: BTreeMap<u32, String>,
}

impl Running {
    fn start(alt: Alternative, ctx: &Ctx) -> Result<Running> {
        let log_path = ctx.log_path(&format!("{}.log", alt.name()));
        let log =
            File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
        let child = alt
            .command(&ctx.root)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {} (installed by cargo xtask setup)", alt.name()))?;
        let mut running = Running {
            child,
            ids: BTreeSet::new(),
            hooks: BTreeMap::new(),
        };
        running.wait_attached(alt, &log_path)?;
        running.hooks = bpfstats::attachments()?
            .into_iter()
            .filter(|a| running.ids.contains(&a.prog_id) && !a.tracepoint.is_empty())
            .map(|a| {
                let name = match a.fd_type.as_str() {
                    "raw_tracepoint" => format!("{} (tp_btf)", a.tracepoint),
                    _ => a.tracepoint,
                };
                (a.prog_id, name)
            })
            .collect();
        Ok(running)
    }

    /// Waits until the process holds a non-empty set of programs that stops changing.
    fn wait_attached(&mut self, alt: Alternative, log: &Path) -> Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut stable_since = Instant::now();
        loop {
            interrupt::check()?;
            if let Some(status) = self.child.try_wait()? {
                bail!("{} exited with {status}; see {}", alt.name(), log.display());
            }
            let ids = procfs::bpf_prog_ids(self.child.id())?;
            if ids != self.ids {
                self.ids = ids;
                stable_since = Instant::now();
            } else if !self.ids.is_empty() && stable_since.elapsed() >= SETTLE {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("{} loaded no programs within {READY_TIMEOUT:?}", alt.name());
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Counters of the tool's programs keyed by hook, else by program name (`name#id` when a
    /// name repeats).
    fn snapshot(&self) -> Result<BTreeMap<String, Counters>> {
        let by_id = bpfstats::snapshot(&self.ids)?;
        let mut out = BTreeMap::new();
        for (id, (name, counters)) in by_id {
            let name = self.hooks.get(&id).cloned().unwrap_or(name);
            let key = if out.contains_key(&name) {
                format!("{name}#{id}")
            } else {
                name
            };
            out.insert(key, counters);
        }
        Ok(out)
    }
}

impl Drop for Running {
    /// SIGINT, the way a user stops these tools; killed if it does not exit in 15 s.
    fn drop(&mut self) {
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: kill(2) on our own unreaped child with a valid signal number.
            unsafe { libc::kill(pid, libc::SIGINT) };
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Both workloads under `alt`, with BPF run-time stats on only while a workload runs.
pub fn measure(alt: Alternative, ctx: &Ctx) -> Result<Vec<Cost>> {
    interrupt::check()?;
    let running = Running::start(alt, ctx)?;
    println!(
        "[bench] {} attached {} programs",
        alt.name(),
        running.ids.len()
    );
    let mut costs = Vec::new();
    for workload in Workload::ALL {
        let _stats = StatsEnabled::on()?;
        costs.push(cost::measure(ctx, alt.name(), workload, || {
            running.snapshot()
        })?);
    }
    Ok(costs)
}
