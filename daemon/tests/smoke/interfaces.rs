//! The interfaces an operator coming from node_exporter and bcc's tools reaches for, on the
//! release binary: node_exporter's flag spellings and `:PORT`, JSON logs, the landing page,
//! gzip on request, the exposition's names; `check --strict` and the refusal of unknown probe
//! names; config errors with key, line and column; `trace`'s bcc-style flags with `--count`.

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use super::{binary, free_addr, run_to_exit, stderr, wait_with_timeout};

/// `GET path` with extra request headers; the raw head and body.
fn get(addr: SocketAddr, path: &str, headers: &str) -> Option<(String, Vec<u8>)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: t\r\n{headers}\r\n").ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).ok()?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    Some((head, raw[split + 4..].to_vec()))
}

#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn node_exporter_flags_json_logs_landing_page_and_gzip() {
    let port = free_addr().port();
    let child = Command::new(binary())
        .args([
            &format!("--web.listen-address=:{port}"),
            "--log.format=json",
            "--log.level=info",
        ])
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn wbscope");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
    let deadline = Instant::now() + Duration::from_secs(60);
    let metrics = loop {
        if let Some(answer) = get(addr, "/metrics", "") {
            break answer;
        }
        assert!(Instant::now() < deadline, "no answer on :{port}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let plain = String::from_utf8_lossy(&metrics.1).into_owned();
    let info = plain
        .lines()
        .find(|l| l.starts_with("wbscope_build_info{"))
        .expect("wbscope_build_info");
    // The binary's revision, as `--version` prints it: a commit, or `unknown` outside git.
    let version = String::from_utf8_lossy(&run_to_exit(&["--version"]).stdout).into_owned();
    let revision = version
        .split("(revision ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap_or_else(|| panic!("no revision in --version: {version}"));
    assert!(
        revision == "unknown"
            || (revision.len() == 12 && revision.chars().all(|c| c.is_ascii_hexdigit())),
        "{revision}"
    );
    assert!(info.contains(&format!("revision=\"{revision}\"")), "{info}");
    if std::fs::read_to_string("/proc/pressure/io").is_ok() {
        // node_exporter's names: waiting = PSI "some", stalled = PSI "full".
        assert!(
            plain.contains("\nwbscope_pressure_io_waiting_seconds_total "),
            "no waiting"
        );
        assert!(
            plain.contains("\nwbscope_pressure_io_stalled_seconds_total "),
            "no stalled"
        );
        assert!(!plain.contains("wbscope_pressure_io_stalled_seconds_total{kind="));
    }

    let (head, zipped) = get(addr, "/metrics", "Accept-Encoding: gzip\r\n").expect("gzip GET");
    assert!(
        head.to_ascii_lowercase().contains("content-encoding: gzip"),
        "{head}"
    );
    let mut unzipped = String::new();
    flate2::read::GzDecoder::new(zipped.as_slice())
        .read_to_string(&mut unzipped)
        .expect("a gzip body");
    assert!(
        unzipped.contains("wbscope_build_info{"),
        "not an exposition"
    );
    eprintln!(
        "/metrics: {} bytes plain, {} gzipped",
        plain.len(),
        zipped.len()
    );
    assert!(
        zipped.len() * 3 < plain.len(),
        "gzip saves less than two thirds"
    );

    let (_, page) = get(addr, "/", "").expect("landing page");
    let page = String::from_utf8_lossy(&page);
    for link in ["/metrics", "/stalls?since=600", "/top/processes"] {
        assert!(
            page.contains(&format!("<a href=\"{link}\">")),
            "{link} missing: {page}"
        );
        // Every endpoint listed answers.
        let path = link;
        let (head, _) = get(addr, path, "").expect("endpoint");
        assert!(
            head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
            "{path}: {head}"
        );
    }
    assert!(page.contains(wbscope::build_info::VERSION), "{page}");
    assert!(page.contains(&format!("(revision {revision})")), "{page}");
    assert!(page.contains(" attached; "), "no probe status: {page}");

    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let output = wait_with_timeout(child, Duration::from_secs(30));
    assert!(output.status.success(), "{}", stderr(&output));
    let log = stderr(&output);
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "no log lines");
    for line in lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(
            v["ts"].is_string() && v["level"].is_string() && v["msg"].is_string(),
            "{line}"
        );
    }
}

#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn strict_check_probe_names_and_config_positions() {
    let output = run_to_exit(&["check", "--strict"]);
    assert!(
        output.status.success(),
        "check --strict failed on the test kernel: {}{}",
        String::from_utf8_lossy(&output.stdout),
        stderr(&output)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("[probes] disable takes"));

    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("wbscope.toml");
    std::fs::write(
        &config,
        "[probes]\ndisable = [\"block_rq_isue\", \"no such family\"]\n",
    )
    .expect("write");
    let path = config.to_string_lossy().into_owned();
    let output = run_to_exit(&["check", "--config", &path]);
    assert!(!output.status.success(), "unknown probe names accepted");
    let err = stderr(&output);
    assert!(
        err.contains(&format!("{path}:2:1: `probes.disable`"))
            && err.contains("\"block_rq_isue\", \"no such family\"")
            && err.contains("\"block_rq_issue\""),
        "{err}"
    );

    std::fs::write(&config, "# stalls\n[stalls]\nthreshold = 100\n").expect("write");
    let output = run_to_exit(&["run", "--config", &path]);
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(
        err.contains(&format!("{path}:3:13: `stalls.threshold`: ")),
        "{err}"
    );
}

#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn trace_takes_bcc_flags_and_stops_after_count() {
    let dir = tempfile::tempdir().expect("temp dir");
    let child = Command::new(binary())
        .args(["trace", "--standalone", "-m", "0", "-p"])
        .arg(std::process::id().to_string())
        .args(["--count", "2", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn trace");
    // fsync from this process until trace has printed two of our events and exits.
    let file = dir.path().join("f");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut child = child;
    while child.try_wait().expect("try_wait").is_none() {
        assert!(Instant::now() < deadline, "trace --count 2 did not stop");
        std::fs::write(&file, b"x").expect("write");
        std::fs::File::open(&file)
            .and_then(|f| f.sync_all())
            .expect("fsync");
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = child.wait_with_output().expect("trace output");
    assert!(output.status.success(), "{}", stderr(&output));
    let events: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON event"))
        .collect();
    assert_eq!(events.len(), 2, "{events:?}");
    let me = u64::from(std::process::id());
    for e in &events {
        assert!(e["pid"] == me || e["tgid"] == me, "{e}");
    }
}
