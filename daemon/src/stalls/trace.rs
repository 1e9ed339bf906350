//! `wbscope trace`: stall events as they happen, from the daemon's event stream when one runs,
//! otherwise from probes this command loads itself.

use std::{
    io::{BufRead, BufReader, Write},
    os::unix::net::UnixStream,
    path::PathBuf,
    process::ExitCode,
};

use anyhow::Context as _;

use super::{
    config::DEFAULT_SOCKET,
    duration::parse_duration_ns,
    event::Stall,
    format,
    recorder::Filter,
    source::{ThresholdMap, drain, read_drops, take_drops, take_ring},
};
use crate::{daemon::load_families, privileges::require_bpf_privileges};

/// Options of `wbscope trace`.
#[derive(Debug, Clone, clap::Args)]
pub struct TraceArgs {
    /// Report operations at least this long (e.g. 100ms, 2s; 0 reports everything). When a
    /// daemon's stream is read, the daemon's own threshold (config `stalls.threshold`) is a floor:
    /// shorter events never reach the stream.
    #[arg(long, default_value = "100ms", value_parser = parse_duration_ns)]
    pub min: u64,
    /// Only this device (as in metric labels, e.g. loop3 or nvme0n1).
    #[arg(long)]
    pub device: Option<String>,
    /// Only this process id or thread id.
    #[arg(long)]
    pub pid: Option<u32>,
    /// Only tasks with this command name.
    #[arg(long)]
    pub comm: Option<String>,
    /// One JSON object per line instead of aligned columns.
    #[arg(long)]
    pub json: bool,
    /// The daemon's event stream socket.
    #[arg(long, default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Load probes even when a daemon's stream is available.
    #[arg(long)]
    pub standalone: bool,
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

/// Prints events until interrupted (or until the daemon's stream ends).
pub fn run(args: &TraceArgs) -> anyhow::Result<ExitCode> {
    let filter = args.filter();
    if !args.standalone
        && let Ok(stream) = UnixStream::connect(&args.socket)
    {
        eprintln!(
            "wbscope trace: reading the daemon's stall stream at {} (the daemon's stall \
             threshold is a floor for --min)",
            args.socket.display()
        );
        return from_stream(stream, &filter, args.json);
    }
    standalone(args, filter)
}

/// Prints one event if it passes the filter; `false` once stdout is gone.
fn print(out: &mut impl Write, stall: &Stall, filter: &Filter, json: bool) -> bool {
    if !filter.accepts(stall) {
        return true;
    }
    let text = if json {
        serde_json::to_string(stall).unwrap_or_default()
    } else {
        format::line(stall)
    };
    writeln!(out, "{text}").and_then(|()| out.flush()).is_ok()
}

fn header(json: bool) -> bool {
    json || {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", format::HEADER).is_ok()
    }
}

fn from_stream(stream: UnixStream, filter: &Filter, json: bool) -> anyhow::Result<ExitCode> {
    if !header(json) {
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = std::io::stdout().lock();
    for line in BufReader::new(stream).lines() {
        let line = line.context("reading the daemon's stall stream")?;
        let Ok(stall) = serde_json::from_str::<Stall>(&line) else {
            continue;
        };
        if !print(&mut out, &stall, filter, json) {
            return Ok(ExitCode::SUCCESS);
        }
    }
    eprintln!("wbscope trace: the daemon closed its stall stream");
    Ok(ExitCode::SUCCESS)
}

fn standalone(args: &TraceArgs, filter: Filter) -> anyhow::Result<ExitCode> {
    require_bpf_privileges()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        // The tracer's own writes to the terminal are not what the operator is looking at.
        let mut loaded = load_families(std::process::id(), &[])?;
        let mut threshold = ThresholdMap::take(&mut loaded.probes.ebpf)?;
        let ring = take_ring(&mut loaded.probes.ebpf)?;
        let drops = take_drops(&mut loaded.probes.ebpf);
        threshold.set(args.min)?;
        eprintln!(
            "wbscope trace: {} of {} probes attached; stalls of at least {:.1} ms (Ctrl-C to stop)",
            loaded.probes.attached(),
            loaded.probes.reports.len(),
            args.min as f64 / 1e6
        );
        if !header(args.json) {
            return Ok(ExitCode::SUCCESS);
        }
        let json = args.json;
        let (stop_tx, mut stop_rx) = tokio::sync::mpsc::channel::<()>(1);
        let printer = drain(ring, move |stall| {
            let mut out = std::io::stdout().lock();
            if !print(&mut out, &stall, &filter, json) {
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
