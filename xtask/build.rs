//! Records the host target triple: rustup names toolchains and components with it
//! (`1.99.0-x86_64-unknown-linux-gnu`), and the xtask binary always runs on the host it was built for.

fn main() {
    let target = std::env::var("TARGET").unwrap_or_default();
    println!("cargo:rustc-env=XTASK_HOST={target}");
    println!("cargo:rerun-if-changed=build.rs");
}
