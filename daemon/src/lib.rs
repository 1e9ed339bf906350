//! wbscope: Linux writeback observability with eBPF.
//!
//! The daemon loads `probe-ebpf`'s programs, resolves the running kernel's layouts (tracefs
//! formats, BTF) into their load-time globals, and exports the per-CPU aggregates as Prometheus
//! metrics at scrape time. `main.rs` only wires the CLI to [`service::run`] (the daemon with
//! readiness, watchdog and reload) and [`check::run_check`].

pub mod build_info;
pub mod check;
pub mod cli;
pub mod client;
pub mod config;
pub mod daemon;
pub mod error_chain;
pub mod families;
pub mod files;
pub mod invalid_value;
pub mod kernel;
pub mod logging;
pub mod memory;
pub mod metrics;
pub mod metrics_doc;
pub mod notify;
pub mod privileges;
pub mod probes;
pub mod reload;
pub mod server;
pub mod server_encoding;
pub mod server_landing;
pub mod service;
pub mod signals;

pub mod top;
pub mod web;

pub use config::Config;
pub use daemon::{Daemon, DaemonError, run};
