//! Rebuilds the probes when the `bpf-linker` binary changes: the link step depends on it but cargo
//! cannot express that dependency (see aya-template's identical build script).

fn main() {
    match which::which("bpf-linker") {
        Ok(path) => println!("cargo:rerun-if-changed={}", path.display()),
        // Without bpf-linker the link step fails with cargo's own message; `cargo xtask setup`
        // installs it.
        Err(err) => println!("cargo:warning=bpf-linker not found in PATH: {err}"),
    }
}
