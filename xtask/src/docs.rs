//! `cargo xtask docs`: writes `docs/metrics.md`, the metrics reference, from the release
//! daemon's own descriptors (`wbscope check --metrics-markdown`, which loads the probes and so
//! needs root). `--check` fails instead when the committed file differs.

use anyhow::{Context as _, Result, bail};

use crate::cmd::Cmd;
use crate::pins::Pins;
use crate::{host, run};

/// The reference, relative to the repository root.
pub const METRICS_DOC: &str = "docs/metrics.md";

/// Arguments of `cargo xtask docs`.
#[derive(clap::Args, Debug)]
pub struct DocsArgs {
    /// Compare the committed file with the daemon's answer instead of writing it.
    #[arg(long)]
    pub check: bool,
}

/// The reference as the release daemon renders it.
pub fn rendered(pins: &Pins) -> Result<String> {
    if !host::is_root() {
        bail!(
            "the metrics reference comes from the daemon's descriptors (`wbscope check \
             --metrics-markdown` loads the probes): run it as root"
        );
    }
    run::build_release(pins)?;
    Cmd::new(run::release_binary(pins))
        .args(["check", "--metrics-markdown"])
        .capture()
}

/// Runs the subcommand.
pub fn run(pins: &Pins, args: &DocsArgs) -> Result<()> {
    let text = rendered(pins)?;
    let path = pins.root.join(METRICS_DOC);
    if args.check {
        let committed = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        if committed != text {
            bail!("{METRICS_DOC} differs from the daemon's descriptors: run `cargo xtask docs`");
        }
        println!("{METRICS_DOC} is current");
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    println!("wrote {METRICS_DOC}");
    Ok(())
}
