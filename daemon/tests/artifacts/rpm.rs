//! The RPM: its metadata (files, the config marked as such, glibc requirements from rpm's
//! generator), then installed with rpm into a clean root file system, where its binary runs
//! `wbscope check` like the host's build.

use crate::common::{Rootfs, UNIT_CAPS, artifact, assert_checks_like_the_host, run, text};

fn query(rpm: &str, args: &[&str]) -> String {
    let mut argv = vec!["-qp"];
    argv.extend_from_slice(args);
    argv.push(rpm);
    text(&run("rpm", &argv).stdout)
}

#[test]
#[ignore = "needs root and the RPM: run with cargo xtask test"]
fn rpm_installs_and_runs_check_on_a_clean_root() {
    let rpm = artifact("WBSCOPE_RPM").to_string_lossy().into_owned();
    let nvr = query(&rpm, &["--qf", "%{NAME} %{VERSION}"]);
    assert_eq!(nvr, format!("wbscope {}", env!("CARGO_PKG_VERSION")));
    let files = query(&rpm, &["-l"]);
    for file in [
        "/usr/bin/wbscope",
        "/usr/lib/systemd/system/wbscope.service",
        "/etc/wbscope/config.toml",
    ] {
        assert!(files.lines().any(|l| l == file), "{file} not in:\n{files}");
    }
    assert_eq!(query(&rpm, &["-c"]).trim(), "/etc/wbscope/config.toml");
    let requires = query(&rpm, &["-R"]);
    assert!(
        requires.contains("libc.so.6(GLIBC_"),
        "no glibc requirement:\n{requires}"
    );

    let root = Rootfs::fresh();
    let root_arg = root.path().to_string_lossy().into_owned();
    // The clean root is Debian's, without an rpm database of glibc: install the files only.
    run("rpm", &["--root", &root_arg, "--initdb"]);
    run("rpm", &["--root", &root_arg, "--nodeps", "-i", &rpm]);
    let installed = text(&run("rpm", &["--root", &root_arg, "-q", "wbscope"]).stdout);
    assert!(installed.starts_with("wbscope-"), "{installed}");
    let out = root.chroot(
        Some(UNIT_CAPS),
        &[
            "/usr/bin/wbscope",
            "check",
            "--config",
            "/etc/wbscope/config.toml",
        ],
    );
    assert_checks_like_the_host(&out, "RPM on a clean root");
}
