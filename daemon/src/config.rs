//! The daemon's configuration: a strict TOML file, every key documented with its default, and
//! validated before anything touches the kernel.

mod location;

use std::{
    net::{SocketAddr, ToSocketAddrs as _},
    path::{Path, PathBuf},
    str::FromStr,
};

use serde::Deserialize;

use crate::probes::{HookChoice, Selection};

pub use crate::metrics::detail::Detail;
pub use location::Location;

/// `--config`, shared by every subcommand that reads the configuration file (here rather than
/// in `cli`, which the subcommands' own argument types are part of).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConfigArg {
    /// TOML configuration file (unknown keys are rejected).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
}

/// Default port. Prometheus' default port allocation list has assigned every port of 9100–9999,
/// so wbscope uses one outside that range.
pub const DEFAULT_PORT: u16 = 19617;

/// Errors reading or validating a configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// The file is not valid TOML, or a value has the wrong type or an unknown key.
    #[error("{path}:{at}: {}{message}", key.as_deref().map(|k| format!("`{k}`: ")).unwrap_or_default())]
    Parse {
        path: String,
        at: Location,
        /// The key path (`stalls.threshold`) where one can be named.
        key: Option<String>,
        message: String,
    },
    /// A value of the right type that is not allowed, located in the file.
    #[error("{path}:{at}: `{key}`: {message}")]
    InvalidAt {
        path: String,
        at: Location,
        key: &'static str,
        message: String,
    },
    /// A value that is not allowed (from the command line, or not locatable in the file).
    #[error("config key `{key}`: {message}")]
    Invalid { key: &'static str, message: String },
}

impl From<crate::invalid_value::InvalidValue> for ConfigError {
    fn from(e: crate::invalid_value::InvalidValue) -> ConfigError {
        ConfigError::Invalid {
            key: e.key,
            message: e.message,
        }
    }
}

/// Log verbosity, from the config's `log_level` or `--log-level`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Error,
    Warn,
    #[default]
    Info,
    Debug,
    Trace,
}

impl FromStr for LogLevel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "error" => Ok(LogLevel::Error),
            "warn" => Ok(LogLevel::Warn),
            "info" => Ok(LogLevel::Info),
            "debug" => Ok(LogLevel::Debug),
            "trace" => Ok(LogLevel::Trace),
            other => Err(format!(
                "unknown log level '{other}' (expected error, warn, info, debug or trace)"
            )),
        }
    }
}

impl LogLevel {
    /// The level as a `tracing` filter directive.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }
}

/// Log line format, from the config's `log_format` or `--log-format` / `--log.format`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines (tracing's default format).
    #[default]
    Text,
    /// `ts=… level=… msg=…` pairs, as the Prometheus exporters print.
    Logfmt,
    /// One JSON object per line.
    Json,
}

/// The `[metrics]` table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MetricsConfig {
    pub detail: Detail,
    /// `[metrics] bpf_stats`: hold the kernel's BPF run-time statistics on while the daemon runs,
    /// so that `wbscope_bpf_program_*` count. Off by default: the switch is host-wide, and while
    /// it is on every BPF program on the host (not only ours) pays two clock reads per run.
    pub bpf_stats: bool,
}

/// The `[metrics]` table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMetrics {
    /// `basic` (default) or `full`.
    detail: Option<Detail>,
    /// Enable BPF run-time statistics while the daemon runs (default `false`).
    bpf_stats: Option<bool>,
}

/// The configuration file as written. Unknown keys are rejected so that a typo never silently
/// falls back to a default.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    /// Address of the HTTP listener for `/metrics` and `/`. Default `0.0.0.0:19617`.
    listen: Option<String>,
    /// `error`, `warn`, `info` (default), `debug` or `trace`. `RUST_LOG` overrides it.
    log_level: Option<LogLevel>,
    /// `text` (default), `logfmt` or `json`.
    log_format: Option<LogFormat>,
    /// Ignore sync calls made by the daemon itself (default `true`).
    ignore_own_io: Option<bool>,
    /// Probe selection.
    probes: Option<RawProbes>,
    /// Stall events: threshold, flight recorder, event stream.
    stalls: Option<crate::families::stall_events::config::RawStalls>,
    /// What the exposition holds.
    metrics: Option<RawMetrics>,
    /// Web config file (TLS, basic auth) in the format of Prometheus exporters; `""` = none.
    web_config_file: Option<String>,
    /// HTTP connection limits: timeouts and the connection cap.
    http: Option<crate::web::limits::RawHttp>,
    /// Per-cgroup metrics (opt-in): enabled, allow-list, cap on named cgroups.
    cgroups: Option<crate::families::cgroups::RawCgroups>,
}

/// The `[probes]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProbes {
    /// Probe names or family names (as listed by `wbscope check`) not to attach. Default: none.
    disable: Option<Vec<String>>,
    /// `auto` (default), `fentry` or `tracepoint`: the hooks of the sync-call probes.
    sync_call_hook: Option<String>,
}

/// A validated configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub listen: SocketAddr,
    pub log_level: LogLevel,
    pub log_format: LogFormat,
    pub ignore_own_io: bool,
    /// `probes.disable`: probe or family names not to attach.
    pub disabled_probes: Vec<String>,
    /// `probes.sync_call_hook`: fentry/fexit where the kernel accepts them (`auto`), always, or
    /// never (the `syscalls:` tracepoints).
    pub sync_call_hook: HookChoice,
    /// The `[stalls]` table.
    pub stalls: crate::families::stall_events::StallsConfig,
    /// The `[metrics]` table.
    pub metrics: MetricsConfig,
    /// `web_config_file`: TLS and basic auth for every route (see [`crate::web`]).
    pub web_config_file: Option<PathBuf>,
    /// The `[http]` table.
    pub http: crate::web::limits::HttpLimits,
    /// The `[cgroups]` table.
    pub cgroups: crate::families::cgroups::CgroupsConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([0, 0, 0, 0], DEFAULT_PORT)),
            log_level: LogLevel::Info,
            log_format: LogFormat::Text,
            ignore_own_io: true,
            disabled_probes: Vec::new(),
            sync_call_hook: HookChoice::Auto,
            stalls: crate::families::stall_events::StallsConfig::default(),
            metrics: MetricsConfig::default(),
            web_config_file: None,
            http: crate::web::limits::HttpLimits::default(),
            cgroups: crate::families::cgroups::CgroupsConfig::default(),
        }
    }
}

impl Config {
    /// Reads and validates a TOML configuration file.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = crate::files::read_text(path, crate::files::CONFIG_LIMIT).map_err(|e| {
            ConfigError::Read {
                path: path.display().to_string(),
                source: e.into(),
            }
        })?;
        Config::parse_named(&text, &path.display().to_string())
    }

    /// Parses and validates TOML text (errors name the file as `<text>`).
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        Config::parse_named(text, "<text>")
    }

    /// Parses and validates `text`, the contents of `path`: every error names the key, and
    /// the line and column where it is.
    fn parse_named(text: &str, path: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let offset = e.span().map_or(0, |span| span.start);
            ConfigError::Parse {
                path: path.to_owned(),
                at: Location::of_offset(text, offset),
                key: e.span().and_then(|_| location::key_at(text, offset)),
                message: e.message().trim_end().to_owned(),
            }
        })?;
        Config::validate(raw).map_err(|err| match err {
            ConfigError::Invalid { key, message } => match location::find_key(text, key) {
                Some(at) => ConfigError::InvalidAt {
                    path: path.to_owned(),
                    at,
                    key,
                    message,
                },
                None => ConfigError::Invalid { key, message },
            },
            other => other,
        })
    }

    fn validate(raw: RawConfig) -> Result<Config, ConfigError> {
        let defaults = Config::default();
        let probes = raw.probes.unwrap_or_default();
        let disabled_probes = probes.disable.unwrap_or_default();
        check_probe_names(&disabled_probes)?;
        let sync_call_hook = match probes.sync_call_hook {
            None => HookChoice::Auto,
            Some(value) => parse_hook_choice(&value)?,
        };
        Ok(Config {
            listen: match raw.listen {
                Some(s) => parse_listen(&s)?,
                None => defaults.listen,
            },
            log_level: raw.log_level.unwrap_or(defaults.log_level),
            log_format: raw.log_format.unwrap_or(defaults.log_format),
            ignore_own_io: raw.ignore_own_io.unwrap_or(defaults.ignore_own_io),
            disabled_probes,
            sync_call_hook,
            stalls: raw.stalls.unwrap_or_default().validate()?,
            metrics: {
                let m = raw.metrics.unwrap_or_default();
                MetricsConfig {
                    detail: m.detail.unwrap_or_default(),
                    bpf_stats: m.bpf_stats.unwrap_or(false),
                }
            },
            web_config_file: raw
                .web_config_file
                .filter(|p| !p.is_empty())
                .map(PathBuf::from),
            http: raw.http.unwrap_or_default().validate()?,
            cgroups: raw.cgroups.unwrap_or_default().validate()?,
        })
    }
}

impl Config {
    /// What the `[probes]` table selects.
    pub fn probe_selection(&self) -> Selection {
        Selection {
            disabled: self.disabled_probes.clone(),
            sync_call_hook: self.sync_call_hook,
        }
    }
}

/// `probes.sync_call_hook`: one of [`HookChoice::VALUES`].
fn parse_hook_choice(value: &str) -> Result<HookChoice, ConfigError> {
    HookChoice::parse(value).ok_or_else(|| ConfigError::Invalid {
        key: "probes.sync_call_hook",
        message: format!(
            "\"{value}\" is not one of {}",
            HookChoice::VALUES
                .iter()
                .map(|v| format!("\"{v}\""))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// The configuration at `path`, or the defaults without one.
pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
    path.map_or_else(|| Ok(Config::default()), Config::from_file)
}

/// The names `[probes] disable` accepts: every family's name and every probe's program name
/// (`wbscope check` prints both).
pub fn probe_names() -> (Vec<&'static str>, Vec<&'static str>) {
    let families = crate::families::all();
    let family_names = families.iter().map(|f| f.name()).collect();
    let probe_names = families
        .iter()
        .flat_map(|f| f.probes().iter().map(|p| p.program))
        .collect();
    (family_names, probe_names)
}

/// Refuses names in `[probes] disable` that name no family and no probe: a typo would
/// otherwise leave the probe attached without a word.
fn check_probe_names(disabled: &[String]) -> Result<(), ConfigError> {
    let (families, probes) = probe_names();
    let unknown: Vec<&str> = disabled
        .iter()
        .map(String::as_str)
        .filter(|d| !families.contains(d) && !probes.contains(d))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let quoted = |names: &[&str]| {
        names
            .iter()
            .map(|n| format!("\"{n}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Err(ConfigError::Invalid {
        key: "probes.disable",
        message: format!(
            "unknown name {}; valid family names: {}; valid probe names: {}",
            quoted(&unknown),
            quoted(&families),
            quoted(&probes)
        ),
    })
}

/// Parses a listen address as the Prometheus exporters take it: `host:port`, `[v6]:port`,
/// a host name (`localhost:19617`, resolved now) or `:port` (every IPv4 address). Errors name
/// the `listen` key.
pub fn parse_listen(s: &str) -> Result<SocketAddr, ConfigError> {
    let invalid = |why: String| ConfigError::Invalid {
        key: "listen",
        message: format!(
            "'{s}' is not a listen address like :19617, 0.0.0.0:19617, [::1]:19617 or \
             localhost:19617 ({why})"
        ),
    };
    if let Some(port) = s.strip_prefix(':') {
        let port: u16 = port
            .parse()
            .map_err(|_| invalid(format!("'{port}' is not a port number")))?;
        return Ok(SocketAddr::from(([0, 0, 0, 0], port)));
    }
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let Some((_, port)) = s.rsplit_once(':') else {
        return Err(invalid("no port".into()));
    };
    if port.parse::<u16>().is_err() {
        return Err(invalid(format!("'{port}' is not a port number")));
    }
    s.to_socket_addrs()
        .map_err(|e| invalid(e.to_string()))?
        .next()
        .ok_or_else(|| invalid("the name resolves to no address".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_defaults() {
        let c = Config::from_toml("").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.listen.port(), 19617);
        assert!(c.ignore_own_io);
        assert!(!c.metrics.bpf_stats);
    }

    #[test]
    fn bpf_stats_is_opt_in() {
        let c = Config::from_toml("[metrics]\nbpf_stats = true\n").unwrap();
        assert!(c.metrics.bpf_stats);
        assert_eq!(c.metrics.detail, Detail::Basic);
        let err = Config::from_toml("[metrics]\nbpf_stats = 1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`metrics.bpf_stats`"), "{err}");
    }

    #[test]
    fn every_key_is_read() {
        let c = Config::from_toml(
            "listen = \"127.0.0.1:1234\"\nlog_level = \"debug\"\nignore_own_io = false\n[probes]\ndisable = [\"writeback_queue\"]\n",
        )
        .unwrap();
        assert_eq!(c.listen, "127.0.0.1:1234".parse().unwrap());
        assert_eq!(c.log_level, LogLevel::Debug);
        assert!(!c.ignore_own_io);
        assert_eq!(c.disabled_probes, vec!["writeback_queue".to_string()]);
    }

    #[test]
    fn unknown_key_is_rejected_by_name() {
        let err = Config::from_toml("listen_addr = \"1.2.3.4:5\"").unwrap_err();
        assert!(err.to_string().contains("listen_addr"), "{err}");
    }

    #[test]
    fn unknown_key_in_a_table_is_rejected_by_name() {
        let err = Config::from_toml("[probes]\ndisabled = []").unwrap_err();
        assert!(err.to_string().contains("disabled"), "{err}");
    }

    #[test]
    fn malformed_listen_names_the_key() {
        let err = Config::from_toml("listen = \"localhost\"").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("`listen`") && msg.contains("localhost"),
            "{msg}"
        );
    }

    #[test]
    fn sync_call_hook_takes_its_three_values_and_refuses_others_by_name() {
        assert_eq!(Config::default().sync_call_hook, HookChoice::Auto);
        for (value, choice) in [
            ("auto", HookChoice::Auto),
            ("fentry", HookChoice::Fentry),
            ("tracepoint", HookChoice::Tracepoint),
        ] {
            let c = Config::from_toml(&format!("[probes]\nsync_call_hook = \"{value}\"")).unwrap();
            assert_eq!(c.sync_call_hook, choice);
            assert_eq!(c.probe_selection().sync_call_hook, choice);
        }
        let err = Config::from_toml("[probes]\nsync_call_hook = \"kprobe\"")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`probes.sync_call_hook`")
                && err.contains("\"kprobe\"")
                && err.contains("\"auto\", \"fentry\", \"tracepoint\""),
            "{err}"
        );
    }

    #[test]
    fn listen_takes_port_only_and_host_names() {
        assert_eq!(
            parse_listen(":9100").unwrap(),
            "0.0.0.0:9100".parse().unwrap()
        );
        assert!(parse_listen("localhost:19617").unwrap().ip().is_loopback());
        assert_eq!(parse_listen("[::1]:5").unwrap(), "[::1]:5".parse().unwrap());
        let err = parse_listen(":http").unwrap_err().to_string();
        assert!(err.contains("'http' is not a port number"), "{err}");
        assert!(parse_listen("localhost:99999").is_err());
        let c = Config::from_toml("listen = \":19618\"").unwrap();
        assert_eq!(c.listen.port(), 19618);
    }

    #[test]
    fn type_errors_name_the_key_line_and_column() {
        let err = Config::from_toml("log_level = \"info\"\n\n[stalls]\nthreshold = 100\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("<text>:4:13: `stalls.threshold`: "),
            "{err}"
        );
        assert!(err.contains("expected a string"), "{err}");
    }

    #[test]
    fn invalid_values_name_the_key_line_and_column() {
        let err = Config::from_toml("# x\n[stalls]\n  threshold = \"100\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("<text>:3:3: `stalls.threshold`: "), "{err}");
        assert!(err.contains("has no unit"), "{err}");
    }

    #[test]
    fn unknown_probe_names_are_refused_with_the_valid_list() {
        let err = Config::from_toml(
            "[probes]\ndisable = [\"block_rq_isue\", \"no such family\", \"journal\"]",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("`probes.disable`"), "{err}");
        assert!(
            err.contains("\"block_rq_isue\", \"no such family\";"),
            "{err}"
        );
        let (families, probes) = probe_names();
        for name in families.iter().chain(&probes) {
            assert!(
                err.contains(&format!("\"{name}\"")),
                "{name} missing: {err}"
            );
        }
        let every = families
            .iter()
            .chain(&probes)
            .map(|n| format!("\"{n}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let c = Config::from_toml(&format!("[probes]\ndisable = [{every}]")).unwrap();
        assert_eq!(c.disabled_probes.len(), families.len() + probes.len());
    }

    #[test]
    fn log_format_is_read() {
        let c = Config::from_toml("log_format = \"json\"").unwrap();
        assert_eq!(c.log_format, LogFormat::Json);
        let err = Config::from_toml("log_format = \"xml\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`log_format`") && err.contains(":1:"), "{err}");
    }

    #[test]
    fn bad_log_level_is_rejected() {
        assert!(Config::from_toml("log_level = \"loud\"").is_err());
        assert_eq!("WARN".parse::<LogLevel>(), Ok(LogLevel::Warn));
        assert!("loud".parse::<LogLevel>().is_err());
    }
}
