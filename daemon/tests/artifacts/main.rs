//! The release artifacts that `cargo xtask package` builds, each installed and run the way a
//! user would: the tarball and the RPM on a clean Debian root file system, the OCI image as a
//! container, the .deb under a booted systemd. `cargo xtask test --tier artifacts` builds them
//! and sets WBSCOPE_BIN, WBSCOPE_TARBALL, WBSCOPE_DEB, WBSCOPE_RPM, WBSCOPE_IMAGE,
//! WBSCOPE_IMAGE_NAME and WBSCOPE_ROOTFS. All need root, so all are `#[ignore]`d.

mod common;
mod image;
mod rpm;
mod systemd;
mod tarball;
