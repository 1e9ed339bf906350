//! The OCI image, assembled with umoci from files on this machine: no base image, no registry,
//! no network. It holds the release binary, the shared libraries it links (found with ldd, so
//! the image carries exactly the glibc the binary was linked against), the example config and
//! an empty /run/wbscope for the stall socket. The entrypoint is `wbscope`, the default
//! command `run --config /etc/wbscope/config.toml`, as in deploy/kubernetes/daemonset.yaml.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::cmd::Cmd;
use crate::install::CONFIG_PATH;
use crate::pins::Pins;
use crate::run;

use super::{VERSION, deb::command_output};

/// Shared objects `ldd` reports for `binary`: the resolved paths of `name => /path (addr)`
/// lines and the loader's own `/path (addr)` line; the vDSO has no file.
fn shared_objects(ldd_stdout: &str) -> Vec<PathBuf> {
    ldd_stdout
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let path = match line.split_once("=>") {
                Some((_, right)) => right.trim(),
                None => line,
            };
            let path = path.split_whitespace().next()?;
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

/// Copies `from` (following symlinks) to `rootfs` + `at` with `mode`.
fn place(rootfs: &Path, from: &Path, at: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let to = rootfs.join(at.strip_prefix("/").unwrap_or(at));
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::copy(from, &to)
        .with_context(|| format!("copying {} into the image", from.display()))?;
    std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// Builds the image as an OCI archive (a tar of an OCI layout) named `name` and returns its path.
pub fn build(pins: &Pins, out: &Path, name: &str) -> Result<PathBuf> {
    let layout = out.join("oci-layout");
    let bundle = out.join("oci-bundle");
    for dir in [&layout, &bundle] {
        if dir.exists() {
            std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
        }
    }
    let tagged = format!("{}:{VERSION}", layout.display());
    Cmd::new("umoci")
        .args(["init", "--layout"])
        .arg(&layout)
        .run()?;
    Cmd::new("umoci").args(["new", "--image", &tagged]).run()?;
    Cmd::new("umoci")
        .args(["unpack", "--image", &tagged])
        .arg(&bundle)
        .run()?;

    let rootfs = bundle.join("rootfs");
    let binary = run::release_binary(pins);
    place(&rootfs, &binary, Path::new("/usr/bin/wbscope"), 0o755)?;
    let ldd = command_output(Cmd::new("ldd").arg(&binary))?;
    let libs = shared_objects(&ldd);
    if libs.is_empty() {
        bail!(
            "ldd named no shared objects for {}:\n{ldd}",
            binary.display()
        );
    }
    for lib in &libs {
        place(&rootfs, lib, lib, 0o755)?;
    }
    place(
        &rootfs,
        &pins.root.join("deploy/config.toml"),
        &Path::new("/").join(CONFIG_PATH),
        0o644,
    )?;
    for dir in ["run/wbscope", "tmp"] {
        std::fs::create_dir_all(rootfs.join(dir))?;
    }

    Cmd::new("umoci")
        .args(["repack", "--image", &tagged])
        .arg(&bundle)
        .run()?;
    Cmd::new("umoci")
        .args(["config", "--image", &tagged])
        .args(["--config.entrypoint", "/usr/bin/wbscope"])
        .args(["--config.cmd", "run", "--config.cmd", "--config"])
        .args(["--config.cmd", &format!("/{CONFIG_PATH}")])
        .args(["--config.exposedports", "19617/tcp"])
        .args(["--config.user", "0:0", "--config.workingdir", "/"])
        .args([
            "--config.label",
            "org.opencontainers.image.source=https://github.com/wbscope/wbscope",
        ])
        .args([
            "--config.label",
            &format!("org.opencontainers.image.version={VERSION}"),
        ])
        .run()?;
    Cmd::new("umoci")
        .args(["gc", "--layout"])
        .arg(&layout)
        .run()?;
    name_in_index(&layout.join("index.json"), name)?;

    let archive = out.join(format!("wbscope-{VERSION}-oci.tar"));
    Cmd::new("tar")
        .args(["--owner=0", "--group=0", "--numeric-owner", "--sort=name"])
        .arg("-C")
        .arg(&layout)
        .arg("-cf")
        .arg(&archive)
        .arg(".")
        .run()?;
    std::fs::remove_dir_all(&bundle).ok();
    Ok(archive)
}

/// umoci names the manifest by its tag only; podman and skopeo read the full name from the
/// `org.opencontainers.image.ref.name` annotation, so that becomes `name`.
/// (index.json is the layout's root and not content-addressed: editing it is allowed.)
fn name_in_index(index: &Path, name: &str) -> Result<()> {
    let text = std::fs::read_to_string(index).context("reading the image's index.json")?;
    let mut json: serde_json::Value = serde_json::from_str(&text).context("index.json")?;
    let manifests = json["manifests"]
        .as_array_mut()
        .context("index.json has no manifests")?;
    if manifests.len() != 1 {
        bail!("index.json has {} manifests, expected 1", manifests.len());
    }
    manifests[0]["annotations"]["org.opencontainers.image.ref.name"] = name.into();
    std::fs::write(index, serde_json::to_vec(&json)?).context("writing index.json")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_lines_give_the_files_to_copy() {
        let out = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                   \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f34)\n\
                   \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f34)\n\
                   \t/lib64/ld-linux-x86-64.so.2 (0x00007f34)\n";
        assert_eq!(
            shared_objects(out),
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
    }
}
