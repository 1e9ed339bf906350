//! SIGHUP reload: a live setting (log_level) changes without a restart, a broken config keeps the
//! running one, and restart-only settings (listen) are refused with a clear log line.

use std::{net::TcpStream, time::Duration};

use testkit::{scrape, wait_until};

use crate::common::{Wbscope, free_addr};

/// Logged at debug level for every scrape: the witness of the effective log level.
const SCRAPE_LINE: &str = "served /metrics";
const LOG_WAIT: Duration = Duration::from_secs(5);

/// Scrapes once and returns how many scrape lines the log gained (waiting a little for the log
/// pipe; a level that hides them is confirmed by the scrape's answer having arrived first).
fn scrape_lines_after_one_scrape(daemon: &Wbscope, addr: std::net::SocketAddr) -> usize {
    let before = daemon.count(SCRAPE_LINE);
    scrape(addr).expect("/metrics answers");
    // The line is written before the response, so it is in the pipe by now; give the reader
    // thread time to collect it.
    std::thread::sleep(Duration::from_millis(300));
    daemon.count(SCRAPE_LINE) - before
}

#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn sighup_applies_log_level_keeps_old_config_on_error_and_refuses_listen() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config.toml");
    let addr = free_addr();
    let write = |text: String| std::fs::write(&config, text).expect("write config");
    write(format!("listen = \"{addr}\"\nlog_level = \"info\"\n"));
    let config_arg = config.to_string_lossy().into_owned();
    let mut daemon = Wbscope::spawn(&["run", "--config", &config_arg], &[]);
    wait_until(Duration::from_secs(30), Duration::from_millis(50), || {
        scrape(addr).ok()
    })
    .expect("/metrics answers");
    assert_eq!(
        scrape_lines_after_one_scrape(&daemon, addr),
        0,
        "info hides debug"
    );

    // 1. A live change: info → debug.
    write(format!("listen = \"{addr}\"\nlog_level = \"debug\"\n"));
    daemon.signal(libc::SIGHUP);
    daemon.wait_log("config reloaded: applied log_level", 1, LOG_WAIT);
    assert_eq!(
        scrape_lines_after_one_scrape(&daemon, addr),
        1,
        "debug shows scrapes"
    );

    // 2. A broken config: named in the log, the old one (debug) keeps running.
    write(format!("listen = \"{addr}\"\nlog_level = \"loud\"\n"));
    daemon.signal(libc::SIGHUP);
    daemon.wait_log("reload failed, keeping the running config", 1, LOG_WAIT);
    let log = daemon.log();
    let line = log
        .lines()
        .find(|l| l.contains("reload failed"))
        .expect("the failure line");
    assert!(line.contains("loud") && line.contains("ERROR"), "{line}");
    assert_eq!(
        scrape_lines_after_one_scrape(&daemon, addr),
        1,
        "still debug"
    );

    // 3. A restart-only change (listen) is refused by name; the live change in the same file
    //    (debug → warn) still applies.
    let other = free_addr();
    write(format!("listen = \"{other}\"\nlog_level = \"warn\"\n"));
    daemon.signal(libc::SIGHUP);
    let refusal = format!("`listen` changed from {addr} to {other}, which needs a restart");
    daemon.wait_log(&refusal, 1, LOG_WAIT);
    let log = daemon.log();
    let line = log.lines().find(|l| l.contains(&refusal)).expect("refusal");
    assert!(line.contains(&format!("keeping {addr}")), "{line}");
    eprintln!("{line}");
    assert_eq!(
        scrape_lines_after_one_scrape(&daemon, addr),
        0,
        "warn hides debug"
    );
    assert!(
        TcpStream::connect(other).is_err(),
        "{other} must not be served"
    );

    daemon.signal(libc::SIGTERM);
    let (status, _) = daemon.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status:?}; log:\n{}", daemon.log());
}
