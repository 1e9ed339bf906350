//! The alternatives measured in the same run: the repository's bpftrace script
//! (`bench/alternative.bt`: flusher work, block request latency, fsync/fdatasync latency) and
//! libbpf-tools `biolatency -D -F` (block only); and the floor, `wbscope bench-floor`: an empty
//! program on every hook wbscope uses. Their programs are found through the fds their process
//! holds, and their cost read with `bpftool` while `kernel.bpf_stats_enabled=1`.

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
    /// Empty programs on wbscope's hooks: what any program there costs on this host.
    Floor,
    Bpftrace,
    Biolatency,
}

impl Alternative {
    pub const ALL: [Alternative; 3] = [
        Alternative::Floor,
        Alternative::Bpftrace,
        Alternative::Biolatency,
    ];

    /// The tool column of the report.
    pub fn name(self) -> &'static str {
        match self {
            Alternative::Floor => "floor",
            Alternative::Bpftrace => "bpftrace",
            Alternative::Biolatency => "biolatency",
        }
    }

    /// How to run it, as a user would (the installed package's program).
    fn command(self, ctx: &Ctx) -> Command {
        match self {
            Alternative::Floor => {
                let mut cmd = Command::new(&ctx.binary);
                cmd.arg("bench-floor");
                cmd
            }
            Alternative::Bpftrace => {
                let mut cmd = Command::new("bpftrace");
                cmd.arg(ctx.root.join("bench/alternative.bt"));
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
            .command(ctx)
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
        if let Alternative::Floor = alt {
            // aya attaches classic tracepoints through BPF links, which bpftool's perf listing
            // does not show; bench-floor prints each hook's program id instead.
            let log = std::fs::read_to_string(&log_path)
                .with_context(|| format!("reading {}", log_path.display()))?;
            running.hooks = floor_hooks(&log);
            return Ok(running);
        }
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

/// Program id → hook name (as bpftool names attachments) from bench-floor's
/// `<hook as check prints it>: attached as program <id>` lines.
fn floor_hooks(log: &str) -> BTreeMap<u32, String> {
    log.lines()
        .filter_map(|line| {
            let (hook, id) = line.split_once(": attached as program ")?;
            Some((id.trim().parse().ok()?, super::floor::floor_key(hook)?))
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_hooks_from_bench_floor_output() {
        let log = "tracepoint syscalls/sys_enter_fsync: attached as program 12\n\
                   tp_btf io_uring_submit_req (or io_uring_submit_sqe): attached as program 13\n\
                   tp_btf block_rq_issue: FAILED: no\n\
                   2 of 3 hooks have an empty program\n";
        let hooks = floor_hooks(log);
        assert_eq!(hooks.len(), 2);
        assert_eq!(hooks[&12], "sys_enter_fsync");
        assert_eq!(hooks[&13], "io_uring_submit_req (tp_btf)");
    }
}
