//! Builds the eBPF programs (`probe-ebpf`) for the BPF target with the pinned nightly toolchain
//! and places the object in OUT_DIR, from where `src/probes/object.rs` embeds it.

use anyhow::{Context as _, anyhow};
use aya_build::{Package, Toolchain};

fn main() -> anyhow::Result<()> {
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
