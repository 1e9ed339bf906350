//! Command-line interface.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// wbscope: why did this fsync stall? Writeback, block and sync-call observability with eBPF.
#[derive(Debug, Parser)]
#[command(name = "wbscope", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunArgs,
}

/// Options of `wbscope run` (also accepted without the subcommand).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunArgs {
    /// Address to serve /metrics on (overrides the config's `listen`; default 0.0.0.0:19617).
    #[arg(long, global = true)]
    pub listen: Option<String>,
    /// TOML configuration file (unknown keys are rejected).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// error, warn, info, debug or trace (overrides the config's `log_level`; RUST_LOG wins).
    #[arg(long, global = true)]
    pub log_level: Option<String>,
    /// Web config file for TLS and basic auth, in the format of Prometheus exporters
    /// (overrides the config's `web_config_file`).
    #[arg(long = "web.config.file", global = true, value_name = "PATH")]
    pub web_config_file: Option<PathBuf>,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve Prometheus metrics (the default).
    Run,
    /// Report, for every probe, whether it attaches on this kernel and why not.
    Check {
        /// Print the kernel's full answer (e.g. the verifier log) for probes that fail.
        #[arg(long)]
        verbose: bool,
        /// Print only the names of the metric families the daemon registers, one per line.
        #[arg(long)]
        metrics: bool,
    },
    /// Print stall events as they happen (from the daemon's stream when it runs, else with
    /// probes of its own).
    Trace(crate::stalls::trace::TraceArgs),
    /// Live view of writeback per device, the processes waiting on it and the latest stalls
    /// (from the local daemon, else with probes of its own).
    Top(crate::top::TopArgs),
    /// Attach an empty program to every hook wbscope uses, until SIGINT or SIGTERM: the
    /// benchmark's per-hook floor (`cargo xtask bench`).
    #[command(hide = true)]
    BenchFloor,
}
