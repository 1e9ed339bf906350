//! `cargo xtask package`: every release artifact from one release build, into target/package/
//! (the .deb into target/debian/): a binary tarball, the Debian package, an RPM and an OCI image.
//! The eBPF object is embedded in the binary, so each of them is complete without a toolchain.
//! The artifact tier (`cargo xtask test --tier artifacts`) installs and runs each one.

mod deb;
mod image;
mod rpm;
mod tarball;

use std::path::PathBuf;

use anyhow::Result;

use crate::pins::Pins;
use crate::{run, setup};

pub use deb::build as build_deb;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Arguments of `cargo xtask package`.
#[derive(clap::Args, Debug)]
pub struct PackageArgs {
    /// Package target/release/wbscope as it is, without building.
    #[arg(long)]
    pub no_build: bool,
    /// Do not check for (or install) missing build tools first.
    #[arg(long)]
    pub no_setup: bool,
}

/// Where each artifact was written.
#[derive(Debug)]
pub struct Artifacts {
    pub tarball: PathBuf,
    pub deb: PathBuf,
    pub rpm: PathBuf,
    /// An OCI archive (`podman load -i`, `skopeo copy oci-archive:...`).
    pub image: PathBuf,
    /// The name the image carries, as in deploy/kubernetes/daemonset.yaml.
    pub image_name: String,
}

/// target/package, where the tarball, the RPM and the image go.
pub fn out_dir(pins: &Pins) -> PathBuf {
    pins.root.join("target/package")
}

/// Builds (unless `no_build`) and writes every artifact.
pub fn build_all(pins: &Pins, args: &PackageArgs) -> Result<Artifacts> {
    if !args.no_build {
        setup::ensure(pins, crate::apt::Purpose::Package, args.no_setup)?;
        run::build_release(pins)?;
    }
    let prebuilt = PackageArgs {
        no_build: true,
        no_setup: true,
    };
    let out = out_dir(pins);
    std::fs::create_dir_all(&out)?;
    let image_name = format!("{}:{VERSION}", pins.image);
    Ok(Artifacts {
        tarball: tarball::build(pins, &out)?,
        deb: deb::build(pins, &prebuilt)?,
        rpm: rpm::build(pins, &out)?,
        image: image::build(pins, &out, &image_name)?,
        image_name,
    })
}

/// `cargo xtask package`.
pub fn run(pins: &Pins, args: &PackageArgs) -> Result<()> {
    let a = build_all(pins, args)?;
    println!();
    println!(
        "{}\n  tar -xzf {} -C /",
        a.tarball.display(),
        a.tarball.display()
    );
    println!("{}\n  dpkg -i {}", a.deb.display(), a.deb.display());
    println!("{}\n  rpm -i {}", a.rpm.display(), a.rpm.display());
    println!(
        "{} ({})\n  podman load -i {}",
        a.image.display(),
        a.image_name,
        a.image.display()
    );
    println!("then: systemctl enable --now wbscope (none of them enables it)");
    Ok(())
}
