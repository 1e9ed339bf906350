//! `wbscope trace`: stall events as they happen, from the daemon's event stream when one runs
//! (its Unix socket, or its HTTP endpoint with `--url`, also over https with basic auth),
//! otherwise from probes this command loads itself. bcc-style short flags: `-p PID`,
//! `-d DEVICE`, `-m MIN` (a bare number is milliseconds, as in bcc's tools and `/stalls`).

use std::{
    collections::HashSet,
    io::{BufRead, BufReader, ErrorKind, Write},
    os::unix::net::UnixStream,
    path::PathBuf,
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::Context as _;

use super::{
    duration::{parse_duration_ns, parse_min_ns},
    event::Stall,
    format,
    recorder::Filter,
    source::{ThresholdMap, drain, read_drops, take_drops, take_ring},
};
use crate::{
    Config,
    client::{ClientArgs, Endpoint},
    config::ConfigArg,
    daemon::load_families,
    privileges::require_bpf_privileges,
};

/// How often `--url` asks the daemon's `/stalls` for new events.
const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// How far back each poll reaches: an event is listed once it has ended, by its start time, so
/// a poll must reach back past the longest stall still to be printed.
const POLL_REACH_SECS: u64 = 120;

/// Options of `wbscope trace`.
#[derive(Debug, Clone, clap::Args)]
pub struct TraceArgs {
    /// The daemon's configuration file: its event stream socket, its HTTP endpoint (when the
    /// socket does not answer) and, for probes of our own, `[probes] disable`.
    #[command(flatten)]
    pub config: ConfigArg,
    /// Report operations at least this long: a bare number is milliseconds (5), or with a unit
    /// (250us, 2s); 0 reports everything. When a daemon's stream is read, the daemon's own
    /// threshold (config `stalls.threshold`) is a floor: shorter events never reach the stream.
    #[arg(short, long, default_value = "100ms", value_parser = parse_min_ns, value_name = "MIN")]
    pub min: u64,
    /// Only this device (as in metric labels, e.g. loop3 or nvme0n1).
    #[arg(short, long)]
    pub device: Option<String>,
    /// Only this process id or thread id.
    #[arg(short, long)]
    pub pid: Option<u32>,
    /// Only tasks with this command name.
    #[arg(long)]
    pub comm: Option<String>,
    /// Stop after this long (e.g. 30s, 5m).
    #[arg(long, value_parser = parse_duration_ns, value_name = "DURATION")]
    pub duration: Option<u64>,
    /// Stop after printing this many events.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// One JSON object per line instead of aligned columns.
    #[arg(long)]
    pub json: bool,
    /// The daemon's event stream socket (default: the config's `stalls.socket`, else
    /// /run/wbscope/stalls.sock).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Read the daemon's HTTP endpoint (`/stalls`) at --url instead of its socket.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Load probes even when a daemon's stream is available.
    #[arg(long)]
    pub standalone: bool,
    /// Instead of following events, summarize the causes of the stalls the daemon's flight
    /// recorder (`/stalls`) kept over this window (e.g. 10m): count, total and longest by kind,
    /// cause and dominant device-write source. Honours the filters and --json.
    #[arg(long, value_parser = parse_duration_ns, value_name = "WINDOW")]
    pub summary: Option<u64>,
}

impl TraceArgs {
    fn filter(&self) -> Filter {
        Filter {
            since_unix_ns: None,
            device: self.device.clone(),
            pid: self.pid,
            comm: self.comm.clone(),
            min_ns: Some(self.min),
        }
    }
}

/// When to stop: `--duration` and `--count`.
#[derive(Clone, Copy, Debug)]
struct Limits {
    deadline: Option<Instant>,
    remaining: Option<u64>,
}

impl Limits {
    fn new(args: &TraceArgs) -> Limits {
        Limits {
            deadline: args
                .duration
                .map(|ns| Instant::now() + Duration::from_nanos(ns)),
            remaining: args.count,
        }
    }

    fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d) || self.remaining == Some(0)
    }

    /// Counts one printed event.
    fn printed(&mut self) {
        if let Some(n) = &mut self.remaining {
            *n = n.saturating_sub(1);
        }
    }
}

/// Prints events until interrupted, until `--duration` or `--count` is reached, or until the
/// daemon's stream ends.
pub fn run(args: &TraceArgs) -> anyhow::Result<ExitCode> {
    let config = crate::config::load(args.config.config.as_deref())?;
    let filter = args.filter();
    let limits = Limits::new(args);
    if let Some(window_ns) = args.summary {
        let endpoint = Endpoint::new(&args.client, Some(&config))?;
        return summary(&endpoint, &filter, args.json, window_ns);
    }
    if args.client.url.is_some() {
        let endpoint = Endpoint::new(&args.client, Some(&config))?;
        return from_http(&endpoint, &filter, args.json, limits);
    }
    let socket = args
        .socket
        .clone()
        .or_else(|| config.stalls.socket.clone())
        .unwrap_or_else(|| PathBuf::from(super::config::DEFAULT_SOCKET));
    if !args.standalone {
        if let Ok(stream) = UnixStream::connect(&socket) {
            eprintln!(
                "wbscope trace: reading the daemon's stall stream at {} (the daemon's stall \
                 threshold is a floor for --min)",
                socket.display()
            );
            return from_stream(stream, &filter, args.json, limits);
        }
        // A daemon named by --config without a reachable socket (another host, another
        // namespace): its HTTP endpoint.
        if args.config.config.is_some() {
            let endpoint = Endpoint::new(&args.client, Some(&config))?;
            if endpoint.get("/stalls?since=0").is_ok() {
                return from_http(&endpoint, &filter, args.json, limits);
            }
        }
    }
    standalone(args, &config, filter, limits)
}

/// What [`print`] did with an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shown {
    Filtered,
    Yes,
    /// stdout is gone: stop.
    Closed,
}

/// Prints one event if it passes the filter.
fn print(out: &mut impl Write, stall: &Stall, filter: &Filter, json: bool) -> Shown {
    if !filter.accepts(stall) {
        return Shown::Filtered;
    }
    let text = if json {
        serde_json::to_string(stall).unwrap_or_default()
    } else if stall.verdict.is_empty() {
        // Standalone: no history, so the verdict names the breakdown's part only.
        let mut s = stall.clone();
        s.verdict = super::context::verdict::verdict(stall, None);
        format::line(&s)
    } else {
        format::line(stall)
    };
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Ok(()) => Shown::Yes,
        Err(_) => Shown::Closed,
    }
}

/// Prints `stall` and counts it; `false` when tracing should stop.
fn emit(stall: &Stall, filter: &Filter, json: bool, limits: &mut Limits) -> bool {
    let mut out = std::io::stdout().lock();
    match print(&mut out, stall, filter, json) {
        Shown::Closed => false,
        Shown::Filtered => !limits.expired(),
        Shown::Yes => {
            limits.printed();
            !limits.expired()
        }
    }
}

fn header(json: bool) -> bool {
    json || {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", format::HEADER).is_ok()
    }
}

fn from_stream(
    stream: UnixStream,
    filter: &Filter,
    json: bool,
    mut limits: Limits,
) -> anyhow::Result<ExitCode> {
    if !header(json) || limits.expired() {
        return Ok(ExitCode::SUCCESS);
    }
    // A read timeout so that --duration ends a quiet stream too.
    stream
        .set_read_timeout(Some(Duration::from_millis(250)))
        .context("setting a read timeout on the stall stream")?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        // After a timeout `line` keeps what was read so far; the next read completes it.
        match reader.read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => {
                if let Ok(stall) = serde_json::from_str::<Stall>(&line)
                    && !emit(&stall, filter, json, &mut limits)
                {
                    return Ok(ExitCode::SUCCESS);
                }
                line.clear();
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(e).context("reading the daemon's stall stream"),
        }
        if limits.expired() {
            return Ok(ExitCode::SUCCESS);
        }
    }
    eprintln!("wbscope trace: the daemon closed its stall stream");
    Ok(ExitCode::SUCCESS)
}

/// `--summary`: one read of the flight recorder over the window, grouped.
fn summary(
    endpoint: &Endpoint,
    filter: &Filter,
    json: bool,
    window_ns: u64,
) -> anyhow::Result<ExitCode> {
    let secs = window_ns.div_ceil(1_000_000_000).max(1);
    let path = format!("/stalls?since={secs}");
    let body = endpoint.get(&path)?;
    let events = serde_json::from_str::<StallsReply>(&body)
        .with_context(|| format!("{}{path}: not a stall list", endpoint.url))?
        .events;
    let groups = super::summary::summarize(events.iter().filter(|s| filter.accepts(s)));
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string(&groups)?)?;
    } else {
        writeln!(out, "{}", super::summary::HEADER)?;
        for g in &groups {
            writeln!(out, "{}", super::summary::line(g))?;
            writeln!(out, "      worst: {}", g.worst)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(serde::Deserialize)]
struct StallsReply {
    events: Vec<Stall>,
}

/// An event's identity across polls.
fn key(s: &Stall) -> (u64, u32, String, u64) {
    (s.start_unix_ns, s.pid, s.kind.clone(), s.duration_ns)
}

/// Polls the daemon's `/stalls` and prints the events not seen before; those already recorded
/// when tracing starts are not printed (as with the stream).
fn from_http(
    endpoint: &Endpoint,
    filter: &Filter,
    json: bool,
    mut limits: Limits,
) -> anyhow::Result<ExitCode> {
    let path = format!("/stalls?since={POLL_REACH_SECS}");
    let poll = || -> anyhow::Result<Vec<Stall>> {
        let body = endpoint.get(&path)?;
        let mut events = serde_json::from_str::<StallsReply>(&body)
            .with_context(|| format!("{}{path}: not a stall list", endpoint.url))?
            .events;
        events.sort_by_key(|s| s.start_unix_ns);
        Ok(events)
    };
    let mut seen: HashSet<_> = poll()?.iter().map(key).collect();
    eprintln!(
        "wbscope trace: reading {}/stalls every {POLL_INTERVAL:?} (the daemon's stall threshold \
         is a floor for --min)",
        endpoint.url
    );
    if !header(json) {
        return Ok(ExitCode::SUCCESS);
    }
    while !limits.expired() {
        std::thread::sleep(POLL_INTERVAL);
        let events = poll()?;
        let current: HashSet<_> = events.iter().map(key).collect();
        for stall in events.iter().filter(|s| !seen.contains(&key(s))) {
            if !emit(stall, filter, json, &mut limits) {
                return Ok(ExitCode::SUCCESS);
            }
        }
        // Only what the daemon still lists can come again.
        seen = current;
    }
    Ok(ExitCode::SUCCESS)
}

fn standalone(
    args: &TraceArgs,
    config: &Config,
    filter: Filter,
    limits: Limits,
) -> anyhow::Result<ExitCode> {
    require_bpf_privileges()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        // The tracer's own writes to the terminal are not what the operator is looking at.
        let mut loaded = load_families(std::process::id(), config)?;
        let mut threshold = ThresholdMap::take(&mut loaded.probes.ebpf)?;
        let ring = take_ring(&mut loaded.probes.ebpf)?;
        let drops = take_drops(&mut loaded.probes.ebpf);
        threshold.set(args.min)?;
        eprintln!(
            "wbscope trace: {} of {} probes attached; stalls of at least {:.1} ms (Ctrl-C to stop)",
            loaded.probes.attached(),
            loaded.probes.applicable(),
            args.min as f64 / 1e6
        );
        if !header(args.json) || limits.expired() {
            return Ok(ExitCode::SUCCESS);
        }
        let json = args.json;
        let (stop_tx, mut stop_rx) = tokio::sync::mpsc::channel::<()>(1);
        let mut counted = limits;
        let printer = drain(ring, move |stall| {
            if !emit(&stall, &filter, json, &mut counted) {
                let _ = stop_tx.try_send(());
            }
        });
        let mut reported = 0;
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        tokio::pin!(printer);
        loop {
            tokio::select! {
                err = &mut printer => return Err(err.into()),
                _ = stop_rx.recv() => return Ok(ExitCode::SUCCESS),
                _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
                _ = tick.tick() => {
                    if limits.expired() {
                        return Ok(ExitCode::SUCCESS);
                    }
                    if let Some(Ok(lost)) = drops.as_ref().map(read_drops)
                        && lost > reported
                    {
                        eprintln!("wbscope trace: {} events lost (ring buffer full)", lost - reported);
                        reported = lost;
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[derive(clap::Parser)]
    struct Wrapper {
        #[command(flatten)]
        trace: TraceArgs,
    }

    fn parse(args: &[&str]) -> TraceArgs {
        Wrapper::try_parse_from(std::iter::once("trace").chain(args.iter().copied()))
            .unwrap()
            .trace
    }

    #[test]
    fn bcc_style_short_flags_and_bare_milliseconds() {
        let args = parse(&["-p", "42", "-d", "nvme0n1", "-m", "5"]);
        assert_eq!(args.pid, Some(42));
        assert_eq!(args.device.as_deref(), Some("nvme0n1"));
        assert_eq!(args.min, 5_000_000);
        assert_eq!(parse(&["--min", "2s"]).min, 2_000_000_000);
        assert_eq!(parse(&[]).min, 100_000_000);
    }

    #[test]
    fn duration_and_count_stop_tracing() {
        let args = parse(&["--duration", "1ms", "--count", "2"]);
        assert_eq!(args.duration, Some(1_000_000));
        let mut limits = Limits::new(&args);
        limits.deadline = None;
        assert!(!limits.expired());
        limits.printed();
        assert!(!limits.expired());
        limits.printed();
        assert!(limits.expired());
        let limits = Limits::new(&parse(&["--duration", "1ms"]));
        std::thread::sleep(Duration::from_millis(5));
        assert!(limits.expired());
        assert!(!Limits::new(&parse(&[])).expired());
    }
}
