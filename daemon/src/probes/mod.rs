//! Probes: what they are (`catalog`), and loading/attaching them against the running kernel.

pub mod catalog;
pub mod detach;
pub mod floor;
pub mod loader;
pub mod map_sizes;
#[cfg(test)]
mod object_names;
pub mod task_storage;

pub use catalog::{Fentry, FentryCompanion, Hook, HookChoice, ProbeSpec};
pub use loader::{AttachStatus, LoadError, LoadedProbes, ProbeReport, Selection};

/// The eBPF object built by build.rs from `probe-ebpf`, embedded in the binary.
pub static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/wbscope-probes"));
