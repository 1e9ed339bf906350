//! Service operations of the release binary (`WBSCOPE_BIN`, set by `cargo xtask test`):
//! readiness and watchdog notifications, config reload (also of the stall threshold), shutdown
//! under load, the systemd unit and the Debian package; plus (unprivileged) checks of the
//! Kubernetes manifests. The privileged tests are `#[ignore]`d so that nothing privileged runs
//! by accident.

mod clients;
mod common;
mod hardening;
mod kubernetes;
mod notify;
mod package;
mod reload;
mod shutdown;
mod stall_reload;
mod tls;
mod unit_file;
