//! `cargo xtask install`: the release binary, the systemd unit and the example config, in the
//! places the unit expects. Enables nothing: that is the operator's `systemctl enable --now`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::pins::Pins;
use crate::{run, setup};

/// Where the unit reads its configuration; fixed, whatever the prefix.
pub const CONFIG_PATH: &str = "etc/wbscope/config.toml";

/// Arguments of `cargo xtask install`.
#[derive(clap::Args, Debug)]
pub struct InstallArgs {
    /// Installation prefix: the binary goes to PREFIX/bin.
    #[arg(long, default_value = "/usr/local")]
    pub prefix: PathBuf,
    /// Directory for wbscope.service (default: /etc/systemd/system, where local units live).
    #[arg(long)]
    pub unit_dir: Option<PathBuf>,
    /// Stage everything under this directory instead of / (for packaging).
    #[arg(long)]
    pub destdir: Option<PathBuf>,
    /// Install target/release/wbscope as it is, without building.
    #[arg(long)]
    pub no_build: bool,
    /// Do not check for (or install) missing build tools first.
    #[arg(long)]
    pub no_setup: bool,
}

/// Where each file goes (absolute paths on the target system).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub binary: PathBuf,
    pub unit: PathBuf,
    pub config: PathBuf,
}

impl Layout {
    /// The layout for `prefix` and `unit_dir` (default /etc/systemd/system).
    pub fn new(prefix: &Path, unit_dir: Option<&Path>) -> Layout {
        Layout {
            binary: prefix.join("bin/wbscope"),
            unit: unit_dir
                .unwrap_or(Path::new("/etc/systemd/system"))
                .join("wbscope.service"),
            config: Path::new("/").join(CONFIG_PATH),
        }
    }
}

/// The unit text with ExecStart pointing at the installed binary.
pub fn unit_for(unit: &str, binary: &Path) -> String {
    unit.replace(
        "ExecStart=/usr/bin/wbscope ",
        &format!("ExecStart={} ", binary.display()),
    )
}

/// `path` (absolute on the target) under `destdir`, if any.
fn staged(destdir: Option<&Path>, path: &Path) -> PathBuf {
    match destdir {
        Some(root) => root.join(path.strip_prefix("/").unwrap_or(path)),
        None => path.to_owned(),
    }
}

/// Copies the three files into place. The config is written only when none exists, so an
/// operator's edits survive a reinstall.
pub fn install_files(pins: &Pins, layout: &Layout, destdir: Option<&Path>) -> Result<()> {
    let binary = run::release_binary(pins);
    if !binary.is_file() {
        bail!("{} is missing: build it first", binary.display());
    }
    let deploy = pins.root.join("deploy");
    let unit = std::fs::read_to_string(deploy.join("wbscope.service"))
        .context("reading deploy/wbscope.service")?;
    let config = std::fs::read(deploy.join("config.toml")).context("reading deploy/config.toml")?;

    put(
        &staged(destdir, &layout.binary),
        &std::fs::read(&binary)?,
        0o755,
    )?;
    put(
        &staged(destdir, &layout.unit),
        unit_for(&unit, &layout.binary).as_bytes(),
        0o644,
    )?;
    let config_at = staged(destdir, &layout.config);
    if config_at.exists() {
        println!("kept {} (already there)", config_at.display());
    } else {
        put(&config_at, &config, 0o644)?;
    }
    Ok(())
}

/// Writes `bytes` to `path` with `mode`, creating parent directories.
fn put(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    // Write beside and rename, so a running binary being replaced is never half-written.
    let tmp = path.with_extension("xtask-new");
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?;
    std::fs::rename(&tmp, path).with_context(|| format!("installing {}", path.display()))?;
    println!("installed {}", path.display());
    Ok(())
}

/// `cargo xtask install`.
pub fn run(pins: &Pins, args: &InstallArgs) -> Result<()> {
    if !args.no_build {
        setup::ensure(pins, crate::apt::Purpose::Run, args.no_setup)?;
        run::build_release(pins)?;
    }
    let layout = Layout::new(&args.prefix, args.unit_dir.as_deref());
    install_files(pins, &layout, args.destdir.as_deref())?;
    if args.destdir.is_none() {
        println!(
            "\nwbscope is installed but not enabled. Edit /{CONFIG_PATH} if needed, then:\n  \
             systemctl daemon-reload\n  systemctl enable --now wbscope"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_follows_prefix_and_keeps_config_in_etc() {
        let l = Layout::new(Path::new("/usr/local"), None);
        assert_eq!(l.binary, Path::new("/usr/local/bin/wbscope"));
        assert_eq!(l.unit, Path::new("/etc/systemd/system/wbscope.service"));
        assert_eq!(l.config, Path::new("/etc/wbscope/config.toml"));
        let l = Layout::new(Path::new("/usr"), Some(Path::new("/lib/systemd/system")));
        assert_eq!(l.unit, Path::new("/lib/systemd/system/wbscope.service"));
    }

    #[test]
    fn unit_points_at_the_installed_binary() {
        let unit = "[Service]\nExecStart=/usr/bin/wbscope run --config /etc/wbscope/config.toml\n";
        let got = unit_for(unit, Path::new("/opt/x/bin/wbscope"));
        assert!(
            got.contains("ExecStart=/opt/x/bin/wbscope run --config"),
            "{got}"
        );
    }

    #[test]
    fn destdir_stages_absolute_paths() {
        assert_eq!(
            staged(Some(Path::new("/tmp/stage")), Path::new("/usr/bin/wbscope")),
            Path::new("/tmp/stage/usr/bin/wbscope")
        );
        assert_eq!(
            staged(None, Path::new("/usr/bin/wbscope")),
            Path::new("/usr/bin/wbscope")
        );
    }

    #[test]
    fn shipped_unit_has_the_execstart_we_rewrite() {
        let unit = include_str!("../../deploy/wbscope.service");
        assert!(unit.contains("\nExecStart=/usr/bin/wbscope "));
    }
}
