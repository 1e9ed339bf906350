//! deploy/wbscope.service and deploy/config.toml: systemd accepts the unit, its capability set is
//! enough for every probe, its command line is the daemon's, and the example config lists every
//! key with its real default.

use std::{path::PathBuf, process::Command};

use clap::Parser as _;
use wbscope::{
    Config,
    cli::{Cli, Command as Sub},
};

use crate::common::binary;

fn deploy(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(file)
}

fn unit_text() -> String {
    std::fs::read_to_string(deploy("wbscope.service")).expect("read deploy/wbscope.service")
}

/// The value of the first `key=` line of the unit.
fn directive<'a>(unit: &'a str, key: &str) -> &'a str {
    unit.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key}= in the unit"))
}

#[test]
fn unit_runs_the_daemon_with_the_installed_config() {
    let unit = unit_text();
    let exec: Vec<&str> = directive(&unit, "ExecStart").split_whitespace().collect();
    assert_eq!(exec[0], "/usr/bin/wbscope");
    let cli = Cli::try_parse_from(&exec).expect("ExecStart's arguments parse");
    let Some(Sub::Run(run)) = cli.command else {
        panic!("ExecStart does not run the daemon: {exec:?}");
    };
    assert_eq!(
        run.config.config.as_deref(),
        Some(std::path::Path::new("/etc/wbscope/config.toml"))
    );
    assert_eq!(directive(&unit, "Type"), "notify");
    assert_eq!(directive(&unit, "ExecReload"), "/bin/kill -HUP $MAINPID");
    assert_eq!(directive(&unit, "Restart"), "on-failure");
    // The stall socket's directory: the only writable path under ProtectSystem=strict.
    let socket = std::path::Path::new(wbscope::families::stall_events::config::DEFAULT_SOCKET);
    assert_eq!(
        Some(
            std::path::Path::new("/run")
                .join(directive(&unit, "RuntimeDirectory"))
                .as_path()
        ),
        socket.parent(),
        "RuntimeDirectory= must hold the default stall socket {}",
        socket.display()
    );
    for key in [
        "WatchdogSec",
        "MemoryMax",
        "NoNewPrivileges",
        "ProtectSystem",
    ] {
        assert!(!directive(&unit, key).is_empty(), "{key}");
    }
}

/// systemd-analyze verify needs the ExecStart binary to exist, so it checks a copy of the unit
/// whose ExecStart names the binary under test (everything else unchanged).
#[test]
#[ignore = "needs the release binary: run with cargo xtask test"]
fn unit_passes_systemd_analyze_verify() {
    let dir = tempfile::tempdir().expect("temp dir");
    let copy = dir.path().join("wbscope.service");
    let unit = unit_text().replace(
        "ExecStart=/usr/bin/wbscope ",
        &format!("ExecStart={} ", binary().display()),
    );
    std::fs::write(&copy, unit).expect("write the copy");
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .output()
        .expect("run systemd-analyze (Debian package systemd, installed by cargo xtask setup)");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "systemd-analyze verify failed:\n{said}"
    );
    assert!(
        said.trim().is_empty(),
        "systemd-analyze verify warned:\n{said}"
    );
}

/// The unit's CapabilityBoundingSet, applied with setpriv to a root process: every probe the
/// binary knows still attaches.
#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn unit_capabilities_are_enough_for_every_probe() {
    let unit = unit_text();
    let caps: Vec<String> = directive(&unit, "CapabilityBoundingSet")
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    assert_eq!(caps, ["+bpf", "+perfmon"], "the documented minimal set");
    let bounding = format!("--bounding-set=-all,{}", caps.join(","));
    let out = Command::new("setpriv")
        .args(["--inh-caps=-all", &bounding])
        .arg(binary())
        .arg("check")
        .output()
        .expect("run setpriv");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "check with {bounding} failed:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = stdout
        .lines()
        .find(|l| l.contains("probes attach on this kernel"))
        .expect("summary line");
    let words: Vec<&str> = summary.split_whitespace().collect();
    eprintln!("with {bounding}: {summary}");
    // Probes on a module this kernel lacks (no NFS) are skipped by design.
    let skipped = testkit::module_probes::count_skipped_by_absent_module(
        stdout
            .lines()
            .filter(|l| l.contains("skipped: "))
            .filter_map(|l| l.split_whitespace().next()),
    );
    let (attached, total): (usize, usize) = (
        words[0].parse().expect("attached count"),
        words[2].parse().expect("probe count"),
    );
    assert_eq!(attached + skipped, total, "{summary}");
}

/// Every key of deploy/config.toml, uncommented, gives exactly the defaults; the file as shipped
/// (everything commented out) does too.
#[test]
fn example_config_lists_every_key_with_its_default() {
    let text = std::fs::read_to_string(deploy("config.toml")).expect("read deploy/config.toml");
    assert_eq!(Config::from_toml(&text).expect("parses"), Config::default());
    let uncommented: String = text
        .lines()
        .map(|l| match l.strip_prefix('#') {
            Some(rest) if rest.contains(" = ") && !rest.starts_with(' ') => rest,
            _ => l,
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let parsed = Config::from_toml(&uncommented).expect("uncommented example parses");
    assert_eq!(parsed, Config::default());
    // Destructured without `..`: a new config field fails to compile here until the example
    // lists it (add it to deploy/config.toml and to this list).
    let Config {
        listen: _,
        log_level: _,
        log_format: _,
        ignore_own_io: _,
        disabled_probes: _,
        sync_call_hook: _,
        stalls: _,
        metrics: _,
        web_config_file: _,
        http: _,
        cgroups: _,
    } = parsed;
    for key in [
        "listen",
        "log_level",
        "log_format",
        "ignore_own_io",
        "disable",
        "sync_call_hook",
        "threshold",
        "window",
        "max_events",
        "socket",
        "detail",
        "web_config_file",
        "header_timeout",
        "idle_timeout",
        "request_timeout",
        "max_connections",
        "enabled",
        "allow",
        "max_named",
    ] {
        assert!(
            uncommented
                .lines()
                .any(|l| l.starts_with(&format!("{key} = "))),
            "{key} is not in deploy/config.toml"
        );
    }
}
