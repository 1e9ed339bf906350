//! An in-process daemon for tests, and scraping helpers.

use std::{net::SocketAddr, time::Duration};

use testkit::{Scrape, scrape, wait_until};
use wbscope::{Config, Daemon};

/// Set to `1` to accept probes the kernel skips (missing hook or layout) in `start_with`.
pub const ALLOW_SKIPPED: &str = "WBSCOPE_TEST_ALLOW_SKIPPED";

/// A daemon running on its own runtime, listening on an ephemeral loopback port.
pub struct TestDaemon {
    runtime: tokio::runtime::Runtime,
    daemon: Option<Daemon>,
    addr: SocketAddr,
}

/// The configuration [`TestDaemon::start`] uses, for tests that change one key of it.
pub fn test_config() -> Config {
    Config {
        listen: "127.0.0.1:0".parse().expect("loopback address"),
        ignore_own_io: false,
        // Every log2 bucket: the latency tests compare the kernel's slots one by one with an
        // independent tracer. The default's coarser buckets are counted in series_budget.
        metrics: wbscope::config::MetricsConfig {
            detail: wbscope::config::Detail::Full,
            ..Default::default()
        },
        ..Config::default()
    }
}

impl TestDaemon {
    /// Starts a daemon that also counts this process's own I/O (tests provoke the events
    /// themselves). Panics when not root: these tests are only run on purpose.
    pub fn start() -> TestDaemon {
        TestDaemon::start_with(test_config())
    }

    pub fn start_with(config: Config) -> TestDaemon {
        let daemon = TestDaemon::start_with_unattached(config);
        // On other kernels (the VM tier sets this) a probe whose hook or layout the kernel lacks
        // is skipped by design and listed in the kernel support table; a failure never passes.
        let allow_skipped = std::env::var_os(ALLOW_SKIPPED).is_some_and(|v| v == "1");
        for report in daemon.reports() {
            let skipped = matches!(report.status, wbscope::probes::AttachStatus::Skipped(_));
            let module_absent =
                testkit::module_probes::skipped_by_absent_module(report.spec.program);
            // One of two alternative probes (the writeback waits' ends) is never needed.
            let replaced = matches!(report.status, wbscope::probes::AttachStatus::Replaced(_));
            assert!(
                report.status.is_attached()
                    || replaced
                    || (skipped && (allow_skipped || module_absent)),
                "probe {} did not attach: {:?}",
                report.spec.program,
                report.status
            );
        }
        daemon
    }

    /// Like `start_with`, without requiring every probe to attach (for disabled probes).
    pub fn start_with_unattached(config: Config) -> TestDaemon {
        assert!(testkit::require_root(), "privileged kernel tests need root");
        wbscope::logging::init(
            wbscope::config::LogLevel::Info,
            wbscope::config::LogFormat::Text,
        );
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let daemon = runtime
            .block_on(Daemon::start(&config))
            .expect("daemon starts");
        let addr = daemon.local_addr();
        TestDaemon {
            runtime,
            daemon: Some(daemon),
            addr,
        }
    }

    /// The HTTP listener's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether a test that needs `probe` should skip itself: the kernel skips that probe and
    /// the VM tier (`WBSCOPE_TEST_ALLOW_SKIPPED=1`) accepts that. Prints `SKIPPED: ` and the
    /// reason, which `cargo xtask vmtest` reports. Elsewhere `start` has already required it.
    pub fn skips(&self, probe: &str) -> bool {
        let why = self.reports().iter().find_map(|r| match &r.status {
            wbscope::probes::AttachStatus::Skipped(why) if r.spec.program == probe => Some(why),
            _ => None,
        });
        match why {
            Some(why) => {
                eprintln!("SKIPPED: probe {probe} is skipped on this kernel ({why})");
                true
            }
            None => false,
        }
    }

    /// Whether the part of a test that needs `probe` (named `part`) is left out: like
    /// [`TestDaemon::skips`], but the rest of the test still runs and asserts, so the test is not
    /// reported as skipped; the line says what was not asserted.
    pub fn skipped_part(&self, probe: &str, part: &str) -> bool {
        let why = self.reports().iter().find_map(|r| match &r.status {
            wbscope::probes::AttachStatus::Skipped(why) if r.spec.program == probe => Some(why),
            _ => None,
        });
        if let Some(why) = why {
            eprintln!("not asserted: {part} (probe {probe} is skipped on this kernel: {why})");
        }
        why.is_some()
    }

    /// What happened to each probe.
    pub fn reports(&self) -> &[wbscope::probes::ProbeReport] {
        self.daemon
            .as_ref()
            .map(|d| d.probe_reports())
            .unwrap_or_default()
    }

    /// Scrapes and parses `/metrics`.
    pub fn scrape(&self) -> Scrape {
        let text = scrape(self.addr).expect("scrape /metrics");
        Scrape::parse(&text).expect("parse exposition")
    }

    /// Polls `/metrics` until `ready` accepts a scrape, or panics with `what` after `timeout`.
    pub fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        mut ready: impl FnMut(&Scrape) -> bool,
    ) -> Scrape {
        let mut last = None;
        let found = wait_until(timeout, Duration::from_millis(200), || {
            let s = self.scrape();
            if ready(&s) {
                return Some(s);
            }
            last = Some(s);
            None
        });
        match found {
            Some(s) => s,
            None => panic!(
                "timed out after {timeout:?} waiting for {what}; last scrape:\n{}",
                last.map(|s| wbscope_lines(&s)).unwrap_or_default()
            ),
        }
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        if let Some(daemon) = self.daemon.take()
            && let Err(err) = self.runtime.block_on(daemon.stop())
        {
            eprintln!("daemon stop failed: {err}");
        }
    }
}

/// The wbscope samples of a scrape (no buckets), for failure messages.
pub fn wbscope_lines(s: &Scrape) -> String {
    s.all_samples()
        .iter()
        .filter(|x| x.name.starts_with("wbscope_") && !x.name.ends_with("_bucket"))
        .map(|x| format!("{} {:?} {}\n", x.name, x.labels, x.value))
        .collect()
}
