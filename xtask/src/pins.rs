//! The pinned tool versions, read from the workspace's `Cargo.toml`
//! (`[workspace.metadata.wbscope]`), so that they live in one place.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Deserialize;

/// Components every developer toolchain needs for the lint tier, even if the pins forget to
/// list them.
const LINT_COMPONENTS: [&str; 2] = ["rustfmt", "clippy"];

/// What the workspace pins, plus where the workspace is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pins {
    /// The workspace root (holds `Cargo.toml`).
    pub root: PathBuf,
    /// The toolchain that builds, tests and lints the workspace (`toolchain`).
    pub toolchain: String,
    /// Components wanted on `toolchain`.
    pub toolchain_components: Vec<String>,
    /// The nightly that builds the eBPF crate.
    pub ebpf_toolchain: String,
    /// The bpf-linker version whose LLVM matches `ebpf_toolchain`'s.
    pub bpf_linker_version: String,
    /// LLVM major version of bpf-linker and of the `llvm-N-dev` package it links against.
    pub llvm_major: u32,
    /// The OCI image's name without the tag (`cargo xtask package` adds the version).
    pub image: String,
}

#[derive(Deserialize)]
struct RootManifest {
    workspace: Workspace,
}

#[derive(Deserialize)]
struct Workspace {
    metadata: Metadata,
}

#[derive(Deserialize)]
struct Metadata {
    wbscope: WbscopeMetadata,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct WbscopeMetadata {
    toolchain: String,
    #[serde(default)]
    toolchain_components: Vec<String>,
    ebpf_toolchain: String,
    bpf_linker_version: String,
    llvm_major: u32,
    image: String,
}

impl Pins {
    /// Finds the workspace and reads its pins.
    pub fn load() -> Result<Self> {
        let root = workspace_root()?;
        let manifest = read(&root.join("Cargo.toml"))?;
        Self::parse(root, &manifest)
    }

    /// Builds the pins from the text of the root manifest.
    fn parse(root: PathBuf, manifest: &str) -> Result<Self> {
        let manifest: RootManifest =
            toml::from_str(manifest).context("Cargo.toml: reading [workspace.metadata.wbscope]")?;
        let meta = manifest.workspace.metadata.wbscope;
        let mut toolchain_components = meta.toolchain_components;
        for wanted in LINT_COMPONENTS {
            if !toolchain_components.iter().any(|c| c == wanted) {
                toolchain_components.push(wanted.to_owned());
            }
        }
        Ok(Self {
            root,
            toolchain: meta.toolchain,
            toolchain_components,
            ebpf_toolchain: meta.ebpf_toolchain,
            bpf_linker_version: meta.bpf_linker_version,
            llvm_major: meta.llvm_major,
            image: meta.image,
        })
    }
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// The nearest ancestor of the current directory whose Cargo.toml carries our metadata (so a
/// copied xtask binary works from anywhere in a checkout), else the workspace xtask was built in.
fn workspace_root() -> Result<PathBuf> {
    let cwd = std::env::current_dir().context("reading the current directory")?;
    for dir in cwd.ancestors() {
        let manifest = dir.join("Cargo.toml");
        if std::fs::read_to_string(&manifest)
            .is_ok_and(|text| text.contains("[workspace.metadata.wbscope]"))
        {
            return Ok(dir.to_owned());
        }
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_owned)
        .context("xtask's manifest dir has no parent")
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = r#"
[workspace]
members = ["xtask"]
[workspace.metadata.wbscope]
toolchain = "1.99.0"
toolchain-components = ["clippy", "rust-src"]
ebpf-toolchain = "nightly-2026-06-20"
bpf-linker-version = "0.13.0"
llvm-major = 22
image = "ghcr.io/wbscope/wbscope"
"#;

    #[test]
    fn reads_pins_and_adds_lint_components() {
        let pins = Pins::parse(PathBuf::from("/w"), MANIFEST).unwrap();
        assert_eq!(pins.toolchain, "1.99.0");
        assert_eq!(pins.toolchain_components, ["clippy", "rust-src", "rustfmt"]);
        assert_eq!(pins.ebpf_toolchain, "nightly-2026-06-20");
        assert_eq!(pins.bpf_linker_version, "0.13.0");
        assert_eq!(pins.llvm_major, 22);
    }

    #[test]
    fn missing_metadata_is_an_error() {
        let err = Pins::parse(PathBuf::new(), "[workspace]\n");
        assert!(format!("{:#}", err.unwrap_err()).contains("workspace.metadata.wbscope"));
    }

    #[test]
    fn reads_this_workspace() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
        Pins::parse(root.to_owned(), &manifest).unwrap();
    }
}
