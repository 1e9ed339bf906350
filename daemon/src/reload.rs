//! Config reload (SIGHUP): which settings may change while the probes stay attached, and which
//! need a restart.
//!
//! The running config lives in a `tokio::sync::watch` channel owned by the daemon
//! ([`crate::Daemon::config_watch`]); a part that reads a live setting holds a receiver and sees
//! every accepted reload without locking. A new live setting (e.g. a stall threshold for the
//! flight recorder) is added to [`Config`], classified in [`plan`] as live, and read from that
//! receiver by its consumer.

use std::fmt;

use crate::config::Config;

/// A changed setting that only takes effect on restart, so the reload keeps its running value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The config key, as written in the file.
    pub key: &'static str,
    pub running: String,
    pub requested: String,
    /// Why it needs a restart.
    pub why: &'static str,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` changed from {} to {}, which needs a restart ({}); keeping {}",
            self.key, self.running, self.requested, self.why, self.running
        )
    }
}

/// What a reload does with a requested config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadPlan {
    /// The config to run with: the requested live settings, the running restart-only ones.
    pub config: Config,
    /// Live keys whose value changes.
    pub changed: Vec<&'static str>,
    /// Restart-only keys whose requested value is not applied.
    pub refused: Vec<Refusal>,
}

impl ReloadPlan {
    /// One line for logs and the service manager's STATUS.
    pub fn summary(&self) -> String {
        let applied = if self.changed.is_empty() {
            "no live setting changed".to_owned()
        } else {
            format!("applied {}", self.changed.join(", "))
        };
        if self.refused.is_empty() {
            format!("config reloaded: {applied}")
        } else {
            let keys: Vec<&str> = self.refused.iter().map(|r| r.key).collect();
            format!(
                "config reloaded: {applied}; refused {} (restart needed)",
                keys.join(", ")
            )
        }
    }
}

/// Splits `requested` into what a running daemon can apply and what it must refuse.
pub fn plan(running: &Config, requested: Config) -> ReloadPlan {
    // Destructured without `..` on purpose: a new config field does not compile until it is
    // classified here as live or restart-only.
    let Config {
        listen,
        log_level,
        log_format,
        ignore_own_io,
        disabled_probes,
        sync_call_hook,
        stalls,
        metrics,
        web_config_file,
        http,
        cgroups,
    } = requested;
    let mut refused = Vec::new();
    let mut changed = Vec::new();

    if listen != running.listen {
        refused.push(Refusal {
            key: "listen",
            running: running.listen.to_string(),
            requested: listen.to_string(),
            why: "the listener is bound once, before the probes load",
        });
    }
    if log_format != running.log_format {
        refused.push(Refusal {
            key: "log_format",
            running: format!("{:?}", running.log_format).to_lowercase(),
            requested: format!("{log_format:?}").to_lowercase(),
            why: "the log writer is installed once, at start",
        });
    }
    if ignore_own_io != running.ignore_own_io {
        refused.push(Refusal {
            key: "ignore_own_io",
            running: running.ignore_own_io.to_string(),
            requested: ignore_own_io.to_string(),
            why: "it is a load-time constant of the probes",
        });
    }
    if disabled_probes != running.disabled_probes {
        refused.push(Refusal {
            key: "probes.disable",
            running: format!("{:?}", running.disabled_probes),
            requested: format!("{disabled_probes:?}"),
            why: "probes are attached once at start",
        });
    }
    if sync_call_hook != running.sync_call_hook {
        refused.push(Refusal {
            key: "probes.sync_call_hook",
            running: running.sync_call_hook.as_str().to_owned(),
            requested: sync_call_hook.as_str().to_owned(),
            why: "probes are attached once at start",
        });
    }
    if metrics.detail != running.metrics.detail {
        refused.push(Refusal {
            key: "metrics.detail",
            running: format!("{:?}", running.metrics.detail).to_lowercase(),
            requested: format!("{:?}", metrics.detail).to_lowercase(),
            why: "the collectors are set up once, at start",
        });
    }
    if metrics.bpf_stats != running.metrics.bpf_stats {
        refused.push(Refusal {
            key: "metrics.bpf_stats",
            running: running.metrics.bpf_stats.to_string(),
            requested: metrics.bpf_stats.to_string(),
            why: "the run-time statistics are switched on once, at start",
        });
    }
    if web_config_file != running.web_config_file {
        refused.push(Refusal {
            key: "web_config_file",
            running: format!("{:?}", running.web_config_file),
            requested: format!("{web_config_file:?}"),
            why: "TLS and authentication are set up once, when the listener starts",
        });
    }
    if http != running.http {
        refused.push(Refusal {
            key: "http",
            running: format!("{:?}", running.http),
            requested: format!("{http:?}"),
            why: "the HTTP limits are set once, when the listener starts",
        });
    }
    if cgroups != running.cgroups {
        refused.push(Refusal {
            key: "cgroups",
            running: format!("{:?}", running.cgroups),
            requested: format!("{cgroups:?}"),
            why: "per-cgroup recording is a load-time constant of the probes",
        });
    }
    if log_level != running.log_level {
        changed.push("log_level");
    }
    // The threshold lives in a BPF map the probes read on every event: live. The recorder's
    // bounds and the stream socket are set up once at start.
    if stalls.threshold_ns != running.stalls.threshold_ns {
        changed.push("stalls.threshold");
    }
    let recorder = "the flight recorder and its stream are set up once at start";
    let stall_settings = [
        (
            "stalls.window",
            format!("{} ns", running.stalls.window_ns),
            format!("{} ns", stalls.window_ns),
        ),
        (
            "stalls.max_events",
            running.stalls.max_events.to_string(),
            stalls.max_events.to_string(),
        ),
        (
            "stalls.socket",
            format!("{:?}", running.stalls.socket),
            format!("{:?}", stalls.socket),
        ),
        (
            "stalls.log_events",
            running.stalls.log_events.to_string(),
            stalls.log_events.to_string(),
        ),
    ];
    for (key, running, requested) in stall_settings {
        if running != requested {
            refused.push(Refusal {
                key,
                running,
                requested,
                why: recorder,
            });
        }
    }

    ReloadPlan {
        config: Config {
            listen: running.listen,
            log_level,
            log_format: running.log_format,
            ignore_own_io: running.ignore_own_io,
            disabled_probes: running.disabled_probes.clone(),
            sync_call_hook: running.sync_call_hook,
            stalls: crate::families::stall_events::config::StallsConfig {
                threshold_ns: stalls.threshold_ns,
                ..running.stalls.clone()
            },
            metrics: running.metrics,
            web_config_file: running.web_config_file.clone(),
            http: running.http,
            cgroups: running.cgroups.clone(),
        },
        changed,
        refused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogLevel;

    #[test]
    fn same_config_changes_nothing() {
        let running = Config::default();
        let p = plan(&running, Config::default());
        assert_eq!(p.config, running);
        assert!(p.changed.is_empty() && p.refused.is_empty());
        assert_eq!(p.summary(), "config reloaded: no live setting changed");
    }

    #[test]
    fn log_level_is_live() {
        let running = Config::default();
        let requested = Config {
            log_level: LogLevel::Debug,
            ..Config::default()
        };
        let p = plan(&running, requested.clone());
        assert_eq!(p.config, requested);
        assert_eq!(p.changed, vec!["log_level"]);
        assert!(p.refused.is_empty());
    }

    #[test]
    fn stall_threshold_is_live_and_recorder_bounds_are_not() {
        let running = Config::default();
        let mut requested = Config::default();
        requested.stalls.threshold_ns = 5_000_000;
        requested.stalls.max_events = 7;
        let p = plan(&running, requested);
        assert_eq!(p.changed, vec!["stalls.threshold"]);
        assert_eq!(p.config.stalls.threshold_ns, 5_000_000);
        assert_eq!(p.config.stalls.max_events, running.stalls.max_events);
        let keys: Vec<_> = p.refused.iter().map(|r| r.key).collect();
        assert_eq!(keys, ["stalls.max_events"]);
    }

    #[test]
    fn restart_only_keys_are_refused_and_live_ones_still_apply() {
        let running = Config::default();
        let requested = Config {
            listen: "127.0.0.1:1".parse().unwrap(),
            log_level: LogLevel::Warn,
            log_format: crate::config::LogFormat::Json,
            ignore_own_io: false,
            disabled_probes: vec!["journal".into()],
            sync_call_hook: crate::probes::HookChoice::Tracepoint,
            stalls: Default::default(),
            metrics: Default::default(),
            web_config_file: Some("/etc/wbscope/web.yml".into()),
            http: crate::web::limits::HttpLimits {
                max_connections: 3,
                ..Default::default()
            },
            cgroups: crate::families::cgroups::CgroupsConfig {
                enabled: true,
                ..Default::default()
            },
        };
        let p = plan(&running, requested);
        assert_eq!(p.config.http, running.http);
        assert!(!p.config.cgroups.enabled);
        assert_eq!(p.config.listen, running.listen);
        assert!(p.config.ignore_own_io);
        assert!(p.config.disabled_probes.is_empty());
        assert_eq!(p.config.sync_call_hook, crate::probes::HookChoice::Auto);
        assert_eq!(p.config.web_config_file, None);
        assert_eq!(p.config.log_level, LogLevel::Warn);
        let keys: Vec<_> = p.refused.iter().map(|r| r.key).collect();
        assert_eq!(
            keys,
            [
                "listen",
                "log_format",
                "ignore_own_io",
                "probes.disable",
                "probes.sync_call_hook",
                "web_config_file",
                "http",
                "cgroups"
            ]
        );
        let line = p.refused[0].to_string();
        assert!(
            line.contains("`listen`") && line.contains("127.0.0.1:1") && line.contains("restart"),
            "{line}"
        );
        assert_eq!(
            p.summary(),
            "config reloaded: applied log_level; refused listen, log_format, ignore_own_io, \
             probes.disable, probes.sync_call_hook, web_config_file, http, cgroups (restart needed)"
        );
    }
}
