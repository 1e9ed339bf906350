//! `wbscope top`: a live terminal view of writeback per device (dirty and writeback bytes, write
//! bandwidth, flusher work, sync-call and block latency), the processes spending most time in
//! sync calls or dirty throttling, and the latest stalls.
//!
//! It reads a daemon's HTTP endpoints (the host's daemon by default, else one started in this
//! process), so the same code path serves both cases. The daemon side of the per-process table
//! is the `top_processes` family (`crate::families::top_processes`).

pub mod app;
pub mod expo;
pub mod fmt;
pub mod hist;
pub mod model;
pub mod ranking;
pub mod render;
pub mod sections;
pub mod source;
pub mod text;

use std::{io::IsTerminal as _, time::Duration};

use crate::{
    client::{ClientArgs, Endpoint},
    config::ConfigArg,
    families::stall_events::duration::parse_duration_ns,
};

/// Options of `wbscope top`.
#[derive(Debug, Clone, clap::Args)]
pub struct TopArgs {
    /// The configuration file of the daemon to read: its `listen` address, and the scheme and
    /// certificate of its web config file.
    #[command(flatten)]
    pub config: ConfigArg,
    /// The daemon to read (`/metrics`, `/top/processes`, `/stalls`). When none answers, `top`
    /// loads probes itself (root) on an ephemeral loopback port.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Refresh interval (e.g. 1s, 500ms).
    #[arg(long, default_value = "1s", value_parser = parse_duration_ns)]
    pub interval: u64,
    /// Stop after this many refreshes (plain output only; the terminal view runs until `q`).
    #[arg(long)]
    pub iterations: Option<u64>,
    /// Start with this device selected (as in metric labels, e.g. loop3).
    #[arg(long)]
    pub device: Option<String>,
    /// Fail instead of loading probes when the daemon does not answer.
    #[arg(long)]
    pub no_local: bool,
}

/// Why `top` stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum TopError {
    #[error(transparent)]
    Source(#[from] source::SourceError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Client(#[from] crate::client::ClientError),
    #[error("terminal")]
    Terminal(#[source] std::io::Error),
    #[error("--interval must be at least 100ms")]
    Interval,
}

/// Runs the terminal view, or prints summaries when stdout is not a terminal.
pub fn run(args: &TopArgs) -> Result<(), TopError> {
    let interval = Duration::from_nanos(args.interval);
    if interval < Duration::from_millis(100) {
        return Err(TopError::Interval);
    }
    let config = match &args.config.config {
        Some(path) => Some(crate::Config::from_file(path)?),
        None => None,
    };
    let endpoint = Endpoint::new(&args.client, config.as_ref())?;
    let source = source::Source::open(endpoint, args.no_local)?;
    let controls = app::Controls {
        device: args.device.clone(),
        ..app::Controls::default()
    };
    if std::io::stdout().is_terminal() {
        app::interactive(&source, interval, controls)
    } else {
        app::plain(&source, interval, &controls, args.iterations)
    }
}
