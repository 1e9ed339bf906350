//! Logging through `tracing`, journald-friendly: no ANSI colours unless stderr is a terminal.
//! `log` records (aya and aya-log's bridged kernel-side records) land in the same stream.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::LogLevel;

/// Installs the global subscriber. `RUST_LOG`, when set, overrides `level`. Calling it twice is
/// harmless (the second call keeps the first subscriber).
pub fn init(level: LogLevel) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("{},aya=warn", level.as_str())));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}
