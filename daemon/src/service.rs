//! The daemon as a service: readiness, status and watchdog for the service manager (sd_notify),
//! config reload on SIGHUP, and a clean stop on the shutdown signal.

use std::{fmt::Display, future::Future, time::Duration};

use tokio::signal::unix::{SignalKind, signal};

use crate::{
    config::Config,
    daemon::{Daemon, DaemonError},
    notify::{Notifier, monotonic_usec},
    probes::{AttachStatus, ProbeReport},
    server,
};

/// How long the pre-READY self-scrape may take (the first gather reads every map once).
const SELF_CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the loop checks that the HTTP server still runs when no watchdog sets the pace.
const HEALTH_INTERVAL: Duration = Duration::from_secs(5);

/// Runs the daemon until `shutdown` resolves.
///
/// `READY=1` is sent once every probe is attached and our own `/metrics` answers (over TLS when
/// configured; with basic auth or required client certificates, the refusal is that answer: see
/// [`server::self_check`]); SIGHUP calls
/// `load` for a new config (a failure keeps the running one); `WATCHDOG=1` is sent at half the
/// manager's watchdog timeout while the HTTP server runs. A server that dies ends the run with
/// an error, so `Restart=on-failure` brings the service back.
pub async fn run<E: Display>(
    config: Config,
    mut load: impl FnMut() -> Result<Config, E>,
    shutdown: impl Future<Output = ()>,
    notifier: Notifier,
) -> Result<(), DaemonError> {
    // SIGHUP's default action terminates the process: handle it before anyone may send it.
    let mut hangup = signal(SignalKind::hangup()).map_err(DaemonError::Signal)?;
    notifier.notify("STATUS=attaching probes");
    tokio::pin!(shutdown);
    // A shutdown signal during start-up (also one sent before the handlers existed, see
    // `crate::signals`) ends the start: dropping a half-built daemon closes whatever it loaded.
    let started = tokio::select! {
        biased;
        () = &mut shutdown => None,
        started = Daemon::start(&config) => Some(started),
    };
    let daemon = match started {
        None => {
            tracing::info!("start-up aborted by the shutdown signal; nothing stays attached");
            return Ok(());
        }
        Some(Ok(daemon)) => daemon,
        Some(Err(err)) => {
            notifier.notify(&format!("STATUS=failed to start: {err}"));
            return Err(err);
        }
    };
    let checked = tokio::select! {
        biased;
        () = &mut shutdown => None,
        checked = server::self_check(daemon.local_addr(), daemon.web(), SELF_CHECK_TIMEOUT) => {
            Some(checked)
        }
    };
    match checked {
        None => {
            tracing::info!("start-up aborted by the shutdown signal: detaching probes");
            notifier.notify("STOPPING=1\nSTATUS=detaching probes");
            return daemon.stop().await;
        }
        // The listener is bound and the server task runs; a local firewall may still block the
        // loopback scrape, which is no reason to stop.
        Some(Err(err)) => {
            tracing::warn!("own /metrics check failed, reporting ready anyway: {err}")
        }
        Some(Ok(())) => {}
    }
    let status = status_line(&daemon);
    notifier.notify(&format!("READY=1\nSTATUS={status}"));
    tracing::debug!("ready: {status}");

    let pace = notifier.watchdog_interval();
    if let Some(every) = pace {
        tracing::info!("sending watchdog pings every {every:?}");
    }
    let mut tick = tokio::time::interval(pace.unwrap_or(HEALTH_INTERVAL));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            _ = hangup.recv() => reload(&daemon, &mut load, &notifier),
            _ = tick.tick() => {
                if !daemon.is_serving() {
                    notifier.notify("STATUS=HTTP server stopped unexpectedly");
                    return Err(DaemonError::ServerGone);
                }
                if pace.is_some() {
                    notifier.notify("WATCHDOG=1");
                }
            }
        }
    }
    notifier.notify("STOPPING=1\nSTATUS=detaching probes");
    tracing::info!("shutting down");
    daemon.stop().await
}

/// One SIGHUP: re-read the config and apply what can change live.
fn reload<E: Display>(
    daemon: &Daemon,
    load: &mut impl FnMut() -> Result<Config, E>,
    notifier: &Notifier,
) {
    tracing::info!("SIGHUP received: reloading the config");
    notifier.notify(&format!(
        "RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=reloading the config",
        monotonic_usec()
    ));
    let outcome = match load() {
        Ok(requested) => daemon.reload(requested).summary(),
        Err(err) => {
            let line = format!("reload failed, keeping the running config: {err}");
            tracing::error!("{line}");
            line
        }
    };
    notifier.notify(&format!(
        "READY=1\nSTATUS={}; {outcome}",
        status_line(daemon)
    ));
}

/// What STATUS= says while running: where metrics are served and what is attached.
fn status_line(daemon: &Daemon) -> String {
    format!(
        "serving {}://{}/metrics; {}",
        daemon.web().scheme(),
        daemon.local_addr(),
        attached_summary(daemon.probe_reports())
    )
}

/// `29 of 29 probes attached (writeback 5/5, sync_calls 12/12)`, families in report order. A
/// probe another one stands in for on this kernel (`Replaced`) is not counted, as in `check`.
pub fn attached_summary(reports: &[ProbeReport]) -> String {
    let mut families: Vec<(&str, usize, usize)> = Vec::new();
    let applicable = reports
        .iter()
        .filter(|r| !matches!(r.status, AttachStatus::Replaced(_)));
    for r in applicable {
        let attached = usize::from(r.status.is_attached());
        match families.iter_mut().find(|(name, _, _)| *name == r.family) {
            Some(entry) => {
                entry.1 += attached;
                entry.2 += 1;
            }
            None => families.push((r.family, attached, 1)),
        }
    }
    let attached: usize = families.iter().map(|f| f.1).sum();
    let per_family: Vec<String> = families
        .iter()
        .map(|(name, a, t)| format!("{name} {a}/{t}"))
        .collect();
    let total: usize = families.iter().map(|f| f.2).sum();
    format!(
        "{attached} of {total} probes attached ({})",
        per_family.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::ProbeSpec;

    fn report(family: &'static str, status: AttachStatus) -> ProbeReport {
        ProbeReport {
            family,
            spec: ProbeSpec::tracepoint("p", "c", "e"),
            hook: "tracepoint c/e".into(),
            status,
            fentry_not_used: None,
        }
    }

    #[test]
    fn summary_counts_per_family() {
        let reports = [
            report("writeback", AttachStatus::Attached),
            report("sync_calls", AttachStatus::Attached),
            report("writeback", AttachStatus::Skipped("no hook".into())),
            report("sync_calls", AttachStatus::Attached),
            report("waits", AttachStatus::Attached),
            report("waits", AttachStatus::Replaced("the other end".into())),
        ];
        assert_eq!(
            attached_summary(&reports),
            "4 of 5 probes attached (writeback 1/2, sync_calls 2/2, waits 1/1)"
        );
    }
}
