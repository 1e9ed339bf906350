//! A private Prometheus server (Debian's `prometheus` binary) on a free loopback port, with a
//! temporary TSDB, a 1 s scrape and rule evaluation interval, our rule files loaded and one
//! scrape target. Killed and its directory removed on drop, also when the test panics. It never
//! touches the system's own Prometheus service.

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use tempfile::TempDir;
use testkit::metrics::http_get;

use crate::proc::{free_addr, stop};

/// A running Prometheus server.
pub struct Prometheus {
    child: Option<Child>,
    pub addr: SocketAddr,
    dir: TempDir,
}

/// The scrape job's name and the `cluster` label its target gets, as a fleet's would: the
/// dashboards' `job` and `cluster` variables and the rules' kept labels are checked with them.
pub const JOB: &str = "wbscope";
pub const CLUSTER: &str = "e2e";

impl Prometheus {
    /// Starts Prometheus scraping `target` every second and evaluating `rule_files`; returns
    /// once it answers `/-/ready`.
    pub fn start(target: SocketAddr, rule_files: &[PathBuf]) -> Prometheus {
        let dir = tempfile::Builder::new()
            .prefix("wbscope-e2e-prometheus-")
            .tempdir()
            .expect("temp dir for prometheus");
        let rules: String = rule_files
            .iter()
            .map(|f| format!("  - {}\n", f.display()))
            .collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n{rules}\
             scrape_configs:\n  - job_name: {JOB}\n    static_configs:\n      \
             - targets: [\"{target}\"]\n        labels:\n          cluster: {CLUSTER}\n"
        );
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).expect("write prometheus.yml");
        let addr = free_addr();
        let log = File::create(dir.path().join("prometheus.log")).expect("prometheus log");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup log"))
            .stderr(log)
            .spawn()
            .expect(
                "start prometheus (Debian package `prometheus`, installed by cargo xtask setup)",
            );
        let prometheus = Prometheus {
            child: Some(child),
            addr,
            dir,
        };
        let ready =
            testkit::wait_until(Duration::from_secs(30), Duration::from_millis(200), || {
                http_get(addr, "/-/ready").ok()
            });
        assert!(
            ready.is_some(),
            "prometheus not ready:\n{}",
            prometheus.log()
        );
        prometheus
    }

    /// The server's log so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// GETs an API path and returns its `data`, or the error Prometheus gave.
    pub fn api(&self, path: &str) -> Result<Value, String> {
        let body = http_get(self.addr, path).map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
        if v["status"] != "success" {
            return Err(format!("{}: {}", v["errorType"], v["error"]));
        }
        Ok(v["data"].clone())
    }

    /// Evaluates `expr` at the current time; returns its series (a scalar counts as one).
    pub fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let data = self.api(&format!("/api/v1/query?query={}", encode(expr)))?;
        match data["result"].as_array() {
            Some(series) if data["resultType"] != "scalar" && data["resultType"] != "string" => {
                Ok(series.clone())
            }
            _ => Ok(vec![data["result"].clone()]),
        }
    }

    /// Where the rule files are loaded from, as Prometheus reports them.
    pub fn rule_groups(&self) -> Result<Vec<Value>, String> {
        let data = self.api("/api/v1/rules")?;
        Ok(data["groups"].as_array().cloned().unwrap_or_default())
    }

    /// The TSDB directory (for messages).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            stop(child, "prometheus");
        }
    }
}

/// Percent-encodes a query parameter value (RFC 3986 unreserved characters kept).
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The largest finite value of a query result, if any.
pub fn max(series: &[Value]) -> Option<f64> {
    series
        .iter()
        .filter_map(value)
        .filter(|v| v.is_finite())
        .reduce(f64::max)
}

/// The value of one instant-vector series (`value: [ts, "v"]`) or scalar (`[ts, "v"]`).
fn value(s: &Value) -> Option<f64> {
    let v = if s["value"].is_array() {
        &s["value"][1]
    } else {
        &s[1]
    };
    v.as_str().and_then(|v| v.parse::<f64>().ok())
}

/// The number of series in a query result that have a finite value (instant vectors carry
/// `value: [ts, "v"]`; NaN comes from quantiles over empty windows and divisions by zero).
pub fn finite(series: &[Value]) -> usize {
    series
        .iter()
        .filter(|s| value(s).is_some_and(f64::is_finite))
        .count()
}
