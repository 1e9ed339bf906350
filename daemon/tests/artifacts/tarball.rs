//! The binary tarball: extracted into / of a clean root file system, its `wbscope check` runs
//! there (nothing but glibc from the root, the eBPF object from the binary itself) and finds
//! what the host's build finds.

use crate::common::{Rootfs, UNIT_CAPS, artifact, assert_checks_like_the_host, run, text};

#[test]
#[ignore = "needs root and the tarball: run with cargo xtask test"]
fn tarball_runs_check_on_a_clean_root() {
    let tarball = artifact("WBSCOPE_TARBALL");
    let listing = text(&run("tar", &["-tzf", &tarball.to_string_lossy()]).stdout);
    for file in [
        "usr/local/bin/wbscope",
        "etc/systemd/system/wbscope.service",
        "etc/wbscope/config.toml",
    ] {
        assert!(
            listing.lines().any(|l| l == file),
            "{file} not in:\n{listing}"
        );
    }

    let root = Rootfs::fresh();
    run(
        "tar",
        &[
            "-C",
            &root.path().to_string_lossy(),
            "-xzf",
            &tarball.to_string_lossy(),
        ],
    );
    let unit = std::fs::read_to_string(root.path().join("etc/systemd/system/wbscope.service"))
        .expect("the unit");
    assert!(
        unit.contains("\nExecStart=/usr/local/bin/wbscope run "),
        "the unit does not run the tarball's binary"
    );
    // With exactly the unit's capabilities.
    let out = root.chroot(
        Some(UNIT_CAPS),
        &[
            "/usr/local/bin/wbscope",
            "check",
            "--config",
            "/etc/wbscope/config.toml",
        ],
    );
    assert_checks_like_the_host(&out, "tarball on a clean root");
}
