//! Python tools from PyPI that Debian 12 does not package: `kubernetes-validate`, which checks
//! the Kubernetes manifests against the API schemas it carries (offline once installed). They
//! go into a venv under target/tools, so nothing is installed into the system Python (Debian's
//! is externally managed) and `cargo clean` removes them.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::cmd::Cmd;

/// The pinned requirement: its version is the newest Kubernetes release whose schemas it has.
pub const KUBERNETES_VALIDATE: &str = "kubernetes-validate==1.37.0";

/// Debian's interpreter (python3-venv makes `-m venv` work), not whatever python3 is first on
/// PATH: the venv must not depend on a user's pyenv or conda.
const PYTHON: &str = "/usr/bin/python3";

fn venv(root: &Path) -> PathBuf {
    root.join("target/tools/venv")
}

/// Where the service tests look for the validator.
pub fn kubernetes_validate(root: &Path) -> PathBuf {
    venv(root).join("bin/kubernetes-validate")
}

/// Whether the validator is installed.
pub fn present(root: &Path) -> bool {
    kubernetes_validate(root).is_file()
}

/// The commands that install it.
pub fn install_cmds(root: &Path) -> Vec<Cmd> {
    let venv = venv(root);
    vec![
        Cmd::new(PYTHON).args(["-m", "venv"]).arg(&venv),
        Cmd::new(venv.join("bin/pip")).args(["install", "--quiet", KUBERNETES_VALIDATE]),
    ]
}

/// Installs the validator into the venv (about 10 s).
pub fn install(root: &Path) -> Result<()> {
    install_cmds(root).into_iter().try_for_each(Cmd::run)
}
