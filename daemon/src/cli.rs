//! Command-line interface. Every subcommand declares only the flags it reads; the spellings of
//! node_exporter and the Prometheus exporter toolkit (`--web.listen-address`, `--log.level`,
//! `--log.format`) are accepted as aliases, so fleet habits carry over.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::config::{ConfigArg, LogFormat};

/// wbscope: why did this fsync stall? Writeback, block and sync-call observability with eBPF.
#[derive(Debug, Parser)]
#[command(
    name = "wbscope",
    version = crate::build_info::LONG_VERSION,
    about,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The options of `run`, which is also the default when no subcommand is named.
    #[command(flatten)]
    pub run: RunArgs,
}

/// Logging flags of the subcommands that log (`run`, `check`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LogArgs {
    /// error, warn, info, debug or trace (overrides the config's `log_level`; RUST_LOG wins).
    #[arg(long, visible_alias = "log.level", value_name = "LEVEL")]
    pub log_level: Option<String>,
    /// text (default), logfmt or json (overrides the config's `log_format`).
    #[arg(long, visible_alias = "log.format", value_name = "FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
}

/// Options of `wbscope run` (also accepted without the subcommand).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Address to serve /metrics on: host:port, [v6]:port, name:port or :port (all addresses).
    /// Overrides the config's `listen`; default :19617.
    #[arg(long, visible_alias = "web.listen-address", value_name = "ADDRESS")]
    pub listen: Option<String>,
    /// Web config file for TLS and basic auth, in the format of Prometheus exporters
    /// (overrides the config's `web_config_file`).
    #[arg(long = "web.config.file", value_name = "PATH")]
    pub web_config_file: Option<PathBuf>,
    #[command(flatten)]
    pub log: LogArgs,
}

/// Options of `wbscope check`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    #[command(flatten)]
    pub log: LogArgs,
    /// Print the kernel's full answer (e.g. the verifier log) for probes that fail.
    #[arg(long)]
    pub verbose: bool,
    /// Print only the names of the metric families the daemon registers, one per line.
    #[arg(long)]
    pub metrics: bool,
    /// Print the metrics reference (docs/metrics.md) from the collectors' descriptors.
    #[arg(long, hide = true)]
    pub metrics_markdown: bool,
    /// Exit 1 when a probe this kernel should support fails to attach (the verifier or the
    /// attach refused it). Probes skipped because the kernel lacks their hook or layout, and
    /// probes disabled by the config, do not count.
    #[arg(long)]
    pub strict: bool,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve Prometheus metrics (the default).
    Run(RunArgs),
    /// Report, for every probe, whether it attaches on this kernel and why not.
    Check(CheckArgs),
    /// Print stall events as they happen (from the daemon's stream or HTTP endpoint when it
    /// runs, else with probes of its own).
    Trace(crate::families::stall_events::trace::TraceArgs),
    /// Live view of writeback per device, the processes waiting on it and the latest stalls
    /// (from the local daemon, else with probes of its own).
    Top(crate::top::TopArgs),
    /// Attach an empty program to every hook wbscope uses, until SIGINT or SIGTERM: the
    /// benchmark's per-hook floor (`cargo xtask bench`).
    #[command(hide = true)]
    BenchFloor(RunArgs),
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("wbscope").chain(args.iter().copied()))
    }

    #[test]
    fn definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn node_exporter_spellings_are_aliases() {
        let cli = parse(&[
            "--web.listen-address=:9100",
            "--log.level=debug",
            "--log.format=json",
        ])
        .unwrap();
        assert_eq!(cli.run.listen.as_deref(), Some(":9100"));
        assert_eq!(cli.run.log.log_level.as_deref(), Some("debug"));
        assert_eq!(cli.run.log.log_format, Some(LogFormat::Json));
        let cli = parse(&["run", "--log.format", "logfmt", "--listen", "localhost:1"]).unwrap();
        let Some(Command::Run(run)) = cli.command else {
            panic!("not run: {cli:?}");
        };
        assert_eq!(run.log.log_format, Some(LogFormat::Logfmt));
        assert!(parse(&["--log.format=xml"]).is_err());
    }

    #[test]
    fn subcommands_refuse_flags_they_do_not_use() {
        assert!(parse(&["trace", "--listen", ":1"]).is_err());
        assert!(parse(&["top", "--web.config.file", "w.yml"]).is_err());
        assert!(parse(&["top", "--log-level", "debug"]).is_err());
        assert!(parse(&["check", "--listen", ":1"]).is_err());
        // Run flags before a subcommand are not silently ignored either.
        assert!(parse(&["--listen", ":1", "check"]).is_err());
        assert!(parse(&["trace", "--config", "c.toml"]).is_ok());
        assert!(parse(&["top", "--config", "c.toml"]).is_ok());
    }

    #[test]
    fn help_of_a_subcommand_lists_only_its_flags() {
        let mut cmd = Cli::command();
        let top = cmd.find_subcommand_mut("top").unwrap();
        let help = top.render_long_help().to_string();
        assert!(help.contains("--url"), "{help}");
        assert!(!help.contains("--listen"), "{help}");
        assert!(!help.contains("--web.config.file"), "{help}");
        assert!(!help.contains("--log-level"), "{help}");
    }

    #[test]
    fn check_has_a_strict_mode() {
        let cli = parse(&["check", "--strict"]).unwrap();
        assert!(matches!(
            cli.command,
            Some(Command::Check(CheckArgs { strict: true, .. }))
        ));
    }
}
