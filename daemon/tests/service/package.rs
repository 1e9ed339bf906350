//! The Debian package (`WBSCOPE_DEB`, built by `cargo xtask test` with `cargo xtask package`):
//! `dpkg -i` installs it, `wbscope check` runs from /usr/bin, nothing is enabled, `dpkg -r`
//! leaves only the config and `dpkg -P` removes that too. The host's state is restored on
//! failure as well (the package is purged on drop).

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

const CONFIG: &str = "/etc/wbscope/config.toml";
const BINARY: &str = "/usr/bin/wbscope";

fn deb() -> PathBuf {
    let path = std::env::var_os("WBSCOPE_DEB")
        .map(PathBuf::from)
        .expect("WBSCOPE_DEB must name the .deb (cargo xtask test builds it)");
    assert!(path.is_file(), "{} does not exist", path.display());
    path
}

fn run(program: &str, args: &[&str]) -> Output {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// dpkg's status of the wbscope package, empty when dpkg does not know it.
fn package_status() -> String {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", "wbscope"])
        .output()
        .expect("run dpkg-query");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Purges the package when dropped, so a failed assertion leaves the host clean.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").args(["-P", "wbscope"]).output();
    }
}

#[test]
#[ignore = "needs root and the .deb: run with cargo xtask test"]
fn deb_installs_runs_and_removes_everything_but_the_config() {
    let deb = deb();
    // Never clobber a real installation on the test host.
    assert!(
        package_status().is_empty() || package_status().contains("not-installed"),
        "a wbscope package is already known to dpkg ({}); not touching it",
        package_status()
    );
    assert!(
        !Path::new(BINARY).exists(),
        "{BINARY} exists; not touching it"
    );
    let deb_arg = deb.to_string_lossy().into_owned();

    let listing = String::from_utf8_lossy(&run("dpkg-deb", &["-c", &deb_arg]).stdout).into_owned();
    for file in [
        "./usr/bin/wbscope",
        "./lib/systemd/system/wbscope.service",
        "./etc/wbscope/config.toml",
    ] {
        assert!(
            listing.contains(file),
            "{file} not in the package:\n{listing}"
        );
    }
    let conffiles = run("dpkg-deb", &["-I", &deb_arg, "conffiles"]);
    assert_eq!(String::from_utf8_lossy(&conffiles.stdout).trim(), CONFIG);

    let guard = Installed;
    run("dpkg", &["-i", &deb_arg]);
    assert_eq!(package_status(), "install ok installed");
    let files: Vec<String> = String::from_utf8_lossy(&run("dpkg", &["-L", "wbscope"]).stdout)
        .lines()
        .filter(|p| Path::new(p).is_file())
        .map(str::to_owned)
        .collect();
    eprintln!("installed files: {files:?}");
    assert!(files.iter().any(|f| f == BINARY), "{files:?}");

    // Runs from the installed path; the unit is installed but not enabled.
    let check = run(BINARY, &["check", "--config", CONFIG]);
    let stdout = String::from_utf8_lossy(&check.stdout);
    let summary = stdout
        .lines()
        .find(|l| l.contains("probes attach on this kernel"))
        .expect("check's summary line");
    eprintln!("{BINARY} check: {summary}");
    for wants in ["/etc/systemd/system", "/lib/systemd/system"] {
        let link = Path::new(wants).join("multi-user.target.wants/wbscope.service");
        assert!(
            !link.exists(),
            "{} exists: the package enabled the unit",
            link.display()
        );
    }

    // Remove: everything but the conffile goes.
    run("dpkg", &["-r", "wbscope"]);
    assert_eq!(package_status(), "deinstall ok config-files");
    let left: Vec<&String> = files.iter().filter(|f| Path::new(f).exists()).collect();
    assert_eq!(left, [CONFIG], "files left after dpkg -r");

    // Purge: the config and its directory go too.
    run("dpkg", &["-P", "wbscope"]);
    assert!(!Path::new(CONFIG).exists(), "{CONFIG} left after dpkg -P");
    assert!(
        !Path::new("/etc/wbscope").exists(),
        "/etc/wbscope left after dpkg -P"
    );
    assert!(!Path::new("/usr/share/doc/wbscope").exists());
    drop(guard);
}
