//! Builds the eBPF programs (`probe-ebpf`) for the BPF target with the pinned nightly toolchain
//! and places the object in OUT_DIR, from where `src/probes/mod.rs` embeds it.

use anyhow::{Context as _, anyhow};
use aya_build::{Package, Toolchain};

fn main() -> anyhow::Result<()> {
    set_revision();
    let metadata = cargo_metadata::MetadataCommand::new()
        .no_deps()
        .exec()
        .context("reading workspace metadata")?;
    // One place pins the eBPF toolchain: [workspace.metadata.wbscope] in the root Cargo.toml.
    let toolchain = metadata.workspace_metadata["wbscope"]["ebpf-toolchain"]
        .as_str()
        .ok_or_else(|| anyhow!("[workspace.metadata.wbscope] ebpf-toolchain is not set"))?
        .to_owned();
    let ebpf = metadata
        .packages
        .iter()
        .find(|p| p.name.as_str() == "probe-ebpf")
        .ok_or_else(|| anyhow!("package probe-ebpf not found in the workspace"))?;
    let root_dir = ebpf
        .manifest_path
        .parent()
        .ok_or_else(|| anyhow!("no parent directory for {}", ebpf.manifest_path))?;
    // aya-build watches the eBPF package's own directory only; the shared types it compiles in
    // (layouts, map keys and values) change the object too, and a stale object fails at load
    // time with a global or map size mismatch.
    let common = metadata
        .packages
        .iter()
        .find(|p| p.name.as_str() == "probe-common")
        .ok_or_else(|| anyhow!("package probe-common not found in the workspace"))?;
    if let Some(dir) = common.manifest_path.parent() {
        println!("cargo:rerun-if-changed={dir}");
    }
    // The workspace's release profile links the daemon with fat LTO (a smaller binary, less of
    // it resident); the eBPF object is built without it, as before, so the programs the kernel
    // verifies and runs, and their measured cost, do not change with the daemon's linking.
    // SAFETY: the build script runs on one thread (cargo_metadata's child has exited), so no
    // other thread reads the environment while it changes.
    unsafe { std::env::set_var("CARGO_PROFILE_RELEASE_LTO", "false") };
    let debug = std::env::var_os("CARGO_FEATURE_PROBE_DEBUG").is_some();
    let features: &[&str] = if debug { &["debug"] } else { &[] };
    aya_build::build_ebpf(
        [Package {
            name: ebpf.name.as_str(),
            root_dir: root_dir.as_str(),
            no_default_features: false,
            features,
        }],
        Toolchain::Custom(&toolchain),
    )
}

/// `WBSCOPE_REVISION` for `wbscope_build_info` and `--version`: the environment's value when
/// set (builds from a source tarball), else the checkout's commit, else `unknown`.
fn set_revision() {
    println!("cargo:rerun-if-env-changed=WBSCOPE_REVISION");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    // The reflog changes with every commit and checkout, HEAD with every branch switch.
    for path in ["HEAD", "logs/HEAD"] {
        if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", path]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    let revision = std::env::var("WBSCOPE_REVISION")
        .ok()
        .filter(|r| !r.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=WBSCOPE_REVISION={revision}");
}
