//! Logging through `tracing`, journald-friendly: no ANSI colours unless stderr is a terminal.
//! `log` records (aya and aya-log's bridged kernel-side records) land in the same stream.
//! The level can change at run time (config reload) through a reloadable filter. Lines are
//! text, logfmt or JSON (`log_format`).

pub(crate) mod structured;

use std::{io::IsTerminal, sync::OnceLock};

use tracing_subscriber::{
    EnvFilter, Layer as _, Registry, layer::SubscriberExt as _, reload,
    util::SubscriberInitExt as _,
};

use crate::config::{LogFormat, LogLevel};
use structured::Structured;

/// The handle that swaps the installed filter; set once by [`init`].
static FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// What [`set_level`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LevelChange {
    Applied,
    /// `RUST_LOG` is set and wins over the config, at start and on reload alike.
    OverriddenByRustLog,
    /// Another subscriber was installed before ours (e.g. by a test harness).
    NotOurs,
}

/// The filter for `level`: our records at `level`, aya's own chatter from warn up.
fn filter_for(level: LogLevel) -> EnvFilter {
    EnvFilter::new(format!("{},aya=warn", level.as_str()))
}

fn rust_log_set() -> bool {
    std::env::var_os("RUST_LOG").is_some_and(|v| !v.is_empty())
}

/// Installs the global subscriber, writing `format` lines. `RUST_LOG`, when set, overrides
/// `level`. Calling it twice is harmless (the second call keeps the first subscriber).
pub fn init(level: LogLevel, format: LogFormat) {
    let filter = if rust_log_set() {
        EnvFilter::try_from_default_env().unwrap_or_else(|_| filter_for(level))
    } else {
        filter_for(level)
    };
    let (filter, handle) = reload::Layer::new(filter);
    let lines = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let lines = match format {
        LogFormat::Text => lines
            .with_ansi(std::io::stderr().is_terminal())
            .with_target(false)
            .boxed(),
        LogFormat::Logfmt => lines.event_format(Structured::Logfmt).boxed(),
        LogFormat::Json => lines.event_format(Structured::Json).boxed(),
    };
    let subscriber = tracing_subscriber::registry().with(filter).with(lines);
    // try_init also routes `log` records (aya, aya-log) into tracing.
    if subscriber.try_init().is_ok() {
        let _ = FILTER.set(handle);
    }
}

/// Changes the level of the running subscriber (config reload).
pub fn set_level(level: LogLevel) -> LevelChange {
    if rust_log_set() {
        return LevelChange::OverriddenByRustLog;
    }
    match FILTER.get() {
        Some(handle) if handle.reload(filter_for(level)).is_ok() => LevelChange::Applied,
        _ => LevelChange::NotOurs,
    }
}
