//! The daemon's life: start (check privileges, bind, resolve the kernel layout, load and attach,
//! serve) and stop (stop serving, detach everything).

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use prometheus::Registry;
use tokio::{
    sync::{oneshot, watch},
    task::JoinHandle,
};

use crate::{
    config::Config,
    families::{self, CollectorContext},
    kernel::{self, KernelInfo},
    metrics::{AttachedProgram, MapErrors, SelfCollector},
    privileges::{PrivilegeError, require_bpf_privileges},
    probes::{self, AttachStatus, LoadError, LoadedProbes, ProbeReport, loader::load_and_attach},
    reload::{self, ReloadPlan},
    server::{self, BindError},
};

/// Why the daemon could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Privileges(#[from] PrivilegeError),
    #[error(transparent)]
    Bind(#[from] BindError),
    #[error(transparent)]
    Tracefs(#[from] kernel::tracefs::TracefsError),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("no probe could be attached on this kernel; run `wbscope check` for the reasons")]
    NoProbes,
    #[error("registering metrics")]
    Registry(#[from] prometheus::Error),
    #[error("HTTP server failed")]
    Serve(#[source] std::io::Error),
    #[error("HTTP server task failed")]
    Join(#[from] tokio::task::JoinError),
    #[error("HTTP server stopped unexpectedly")]
    ServerGone,
    #[error("cannot install the SIGHUP handler")]
    Signal(#[source] std::io::Error),
    #[error("stall events")]
    Stalls(#[from] crate::families::stall_events::StallError),
    #[error(transparent)]
    Web(#[from] crate::web::WebConfigError),
}

/// How long [`Daemon::stop`] lets open HTTP connections finish before closing them: a scraper
/// holding a connection open must not delay shutdown past systemd's stop timeout.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// A running daemon. Its probes stay attached until [`Daemon::stop`] (or drop).
pub struct Daemon {
    addr: SocketAddr,
    /// The running config; reloads replace it, readers of live settings hold receivers.
    config: watch::Sender<Config>,
    reports: Vec<ProbeReport>,
    stop_server: oneshot::Sender<()>,
    server: JoinHandle<std::io::Result<()>>,
    // Dropping the object detaches every link and closes every program and map.
    ebpf: aya::Ebpf,
    // BPF run-time stats stay enabled while this fd is open; closing it turns them off again
    // (unless someone else enabled them too).
    _run_time_stats: Option<std::os::fd::OwnedFd>,
    stalls: crate::families::stall_events::StallService,
    /// TLS and authentication of the HTTP server.
    web: crate::web::Web,
}

/// The kernel facts, the resolved families and the loaded object with its attach reports.
pub struct Loaded {
    pub kernel: KernelInfo,
    pub families: Vec<Box<dyn families::Family>>,
    pub probes: LoadedProbes,
}

/// Resolves every family against the running kernel, loads the object and attaches the probes.
/// Shared by the daemon and `wbscope check`.
pub fn load_families(ignore_tgid: u32, config: &Config) -> Result<Loaded, DaemonError> {
    let mut kernel = KernelInfo::discover()?;
    let mut families = families::all();
    for family in &mut families {
        family.configure(config);
        family.resolve(&kernel);
    }
    let probes = load_and_attach(
        probes::OBJECT,
        &families,
        &mut kernel,
        ignore_tgid,
        &config.probe_selection(),
    )?;
    Ok(Loaded {
        kernel,
        families,
        probes,
    })
}

impl Daemon {
    /// Starts the daemon: everything that can fail fails here, before `start` returns.
    pub async fn start(config: &Config) -> Result<Daemon, DaemonError> {
        // The web config file and its certificates first: a mistake there is named before
        // anything else happens.
        let web = match &config.web_config_file {
            Some(path) => crate::web::Web::load(path)?,
            None => crate::web::Web::default(),
        };
        crate::metrics::detail::set(config.metrics.detail);
        require_bpf_privileges()?;
        // Bind before loading probes: a port in use is reported without touching the kernel.
        let listener = server::bind(config.listen).await?;
        let addr = listener.local_addr().map_err(DaemonError::Serve)?;
        let ignore_tgid = if config.ignore_own_io {
            std::process::id()
        } else {
            0
        };
        let Loaded {
            kernel,
            families,
            probes: mut loaded,
        } = load_families(ignore_tgid, config)?;
        log_reports(&loaded.reports);
        if loaded.attached() == 0 {
            return Err(DaemonError::NoProbes);
        }
        bridge_kernel_logs(&mut loaded.ebpf);

        let registry = Registry::new();
        let ctx = CollectorContext {
            page_size: kernel::page_size(),
            map_errors: MapErrors::default(),
            stalls: crate::families::stall_events::StallShared::default(),
            scrape_errors: crate::metrics::ScrapeErrors::default(),
            device_writes: Default::default(),
            bio_counts: Default::default(),
        };
        for family in &families {
            // A disabled family exports nothing, also when it has no probes (/proc readers).
            if config.disabled_probes.iter().any(|d| d == family.name()) {
                continue;
            }
            for collector in family.collectors(&mut loaded.ebpf, &ctx) {
                registry.register(collector)?;
            }
        }
        let history = std::sync::Arc::new(
            crate::families::stall_events::context::history::History::new(
                ctx.device_writes.get().cloned(),
                crate::families::writeback::reason_names(&kernel),
                ctx.page_size,
            ),
        );
        let stalls = crate::families::stall_events::StallService::start(
            &mut loaded.ebpf,
            &config.stalls,
            ctx.stalls.clone(),
            history,
        )
        .await?;
        let processes = crate::families::top_processes::ProcessTable::take(
            &mut loaded.ebpf,
            ctx.map_errors.clone(),
        );
        registry.register(Box::new(
            crate::metrics::map_overflow::OverflowCollector::take(
                &mut loaded.ebpf,
                loaded.map_sizes.clone(),
                ctx.map_errors.clone(),
            ),
        ))?;
        let run_time_stats = if config.metrics.bpf_stats {
            enable_run_time_stats()
        } else {
            None
        };
        registry.register(Box::new(
            SelfCollector::new(
                kernel.release.clone(),
                loaded.reports.clone(),
                ctx.map_errors.clone(),
                attached_programs(&loaded),
            )
            .counting(ctx.scrape_errors.clone()),
        ))?;
        registry.register(Box::new(
            crate::metrics::process::ProcessCollector::for_self(ctx.scrape_errors.clone()),
        ))?;

        let (stop_server, stopped) = oneshot::channel::<()>();
        let scrape = server::Scrape {
            registry: Arc::new(registry),
            errors: ctx.scrape_errors.clone(),
        };
        let kernel_release = kernel.release.clone();
        // The kernel facts (with our BTF parse) are no longer needed; aya's parse went with
        // the attach. Hand the heap they and the object's loading used back to the kernel
        // before the first scrape is served, so that what a scraper sees from then on is the
        // running daemon (on a slow host the trim could finish after the first scrapes).
        drop((kernel, families));
        crate::memory::release_free_heap();
        crate::memory::release_start_up_pages();
        let server = tokio::spawn(server::serve_with(
            listener,
            scrape,
            stalls
                .router()
                .merge(processes.router())
                .merge(crate::server_landing::router(
                    crate::server_landing::Landing {
                        kernel: kernel_release,
                        endpoints: vec![
                            crate::server_landing::METRICS,
                            crate::server_landing::STALLS,
                            crate::server_landing::PROCESSES,
                        ],
                        probes: loaded.reports.clone(),
                    },
                )),
            web.clone(),
            config.http,
            async move {
                let _ = stopped.await;
            },
        ));
        tracing::info!(
            "serving {}://{addr}/metrics with {} of {} probes attached",
            web.scheme(),
            loaded.attached(),
            loaded.applicable()
        );
        Ok(Daemon {
            addr,
            config: watch::Sender::new(config.clone()),
            reports: loaded.reports,
            stop_server,
            server,
            ebpf: loaded.ebpf,
            _run_time_stats: run_time_stats,
            stalls,
            web,
        })
    }

    /// The address `/metrics` is served on (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// TLS and authentication of the HTTP server.
    pub fn web(&self) -> &crate::web::Web {
        &self.web
    }

    /// What happened to each probe.
    pub fn probe_reports(&self) -> &[ProbeReport] {
        &self.reports
    }

    /// The stall pipeline (e.g. to change the threshold on reload).
    pub fn stalls(&self) -> &crate::families::stall_events::StallService {
        &self.stalls
    }

    /// Whether the HTTP server still runs (it only ends on its own after an error).
    pub fn is_serving(&self) -> bool {
        !self.server.is_finished()
    }

    /// A receiver of the running config, updated by every accepted reload.
    pub fn config_watch(&self) -> watch::Receiver<Config> {
        self.config.subscribe()
    }

    /// Applies the live settings of `requested` (see [`reload::plan`]) without detaching
    /// anything, logs each refused restart-only change, and returns what it did.
    pub fn reload(&self, requested: Config) -> ReloadPlan {
        let plan = reload::plan(&self.config.borrow(), requested);
        for refusal in &plan.refused {
            tracing::warn!("reload: {refusal}");
        }
        if plan.changed.contains(&"log_level") {
            let level = plan.config.log_level;
            match crate::logging::set_level(level) {
                crate::logging::LevelChange::Applied => {}
                crate::logging::LevelChange::OverriddenByRustLog => {
                    tracing::warn!(
                        "reload: log_level {} ignored: RUST_LOG is set",
                        level.as_str()
                    )
                }
                crate::logging::LevelChange::NotOurs => {
                    tracing::warn!("reload: log_level not applied: another logger is installed")
                }
            }
        }
        if plan.changed.contains(&"stalls.threshold") {
            let threshold = plan.config.stalls.threshold_ns;
            match self.stalls.set_threshold(threshold) {
                Ok(()) => tracing::info!("reload: stall threshold now {threshold} ns"),
                Err(err) => tracing::warn!("reload: stall threshold not applied: {err}"),
            }
        }
        self.config.send_replace(plan.config.clone());
        tracing::info!("{}", plan.summary());
        plan
    }

    /// Stops serving (open connections get [`SHUTDOWN_GRACE`]) and detaches every probe.
    ///
    /// Both run at once: detaching classic tracepoints is serialised in the kernel and waits for
    /// RCU grace periods (about 20 ms per tracepoint), so waiting for a slow client first would
    /// add the two delays. A scrape still in flight only reads maps, which stay open until the
    /// object is dropped at the end of the detach.
    pub async fn stop(mut self) -> Result<(), DaemonError> {
        let _ = self.stop_server.send(());
        // The stall pipeline drains a ring buffer of the object: stop it before detaching.
        drop(self.stalls);
        let ebpf = self.ebpf;
        let detached = tokio::task::spawn_blocking(move || probes::detach::detach_all(ebpf));
        let served = match tokio::time::timeout(SHUTDOWN_GRACE, &mut self.server).await {
            Ok(joined) => joined?,
            Err(_) => {
                tracing::info!("closing HTTP connections still open after {SHUTDOWN_GRACE:?}");
                self.server.abort();
                Ok(())
            }
        };
        detached.await?;
        tracing::info!("stopped; all probes detached");
        served.map_err(DaemonError::Serve)
    }
}

/// Runs until `shutdown` resolves, then stops cleanly.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<(), DaemonError> {
    let daemon = Daemon::start(&config).await?;
    shutdown.await;
    tracing::info!("shutting down");
    daemon.stop().await
}

/// Turns on BPF run-time stats for as long as the returned fd lives (`[metrics] bpf_stats`:
/// opt-in, since while any holder keeps them on every BPF program on the host pays for them).
fn enable_run_time_stats() -> Option<std::os::fd::OwnedFd> {
    match aya::sys::enable_stats(aya::sys::Stats::RunTime) {
        Ok(fd) => Some(fd),
        Err(err) => {
            // The sysctl turns them on for everyone; then they count without our fd.
            let by_sysctl = std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled")
                .is_ok_and(|v| v.trim() == "1");
            if by_sysctl {
                tracing::info!("BPF run-time stats are on (kernel.bpf_stats_enabled = 1)");
            } else {
                tracing::warn!(
                    "cannot enable BPF run-time stats ({err}; needs CAP_SYS_ADMIN, or \
                     `sysctl kernel.bpf_stats_enabled=1`); wbscope_bpf_program_* stay at 0"
                );
            }
            None
        }
    }
}

/// Name and a descriptor of every attached program, for the run-time stats.
fn attached_programs(loaded: &LoadedProbes) -> Vec<AttachedProgram> {
    loaded
        .reports
        .iter()
        .filter(|r| r.status.is_attached())
        .filter_map(|r| {
            let fd = loaded.ebpf.program(r.spec.program)?.fd().ok()?;
            Some(AttachedProgram {
                name: r.spec.program,
                fd: Arc::new(fd.try_clone().ok()?),
            })
        })
        .collect()
}

fn log_reports(reports: &[ProbeReport]) {
    for r in reports {
        let program = r.spec.program;
        match &r.status {
            AttachStatus::Attached => match &r.fentry_not_used {
                Some(why) => tracing::info!(
                    "probe {program} attached on {} (fentry/fexit not used: {why})",
                    r.hook
                ),
                None => tracing::debug!("probe {program} attached on {}", r.hook),
            },
            AttachStatus::Disabled => tracing::info!("probe {program} disabled by config"),
            AttachStatus::Skipped(why) => tracing::warn!("probe {program} skipped: {why}"),
            AttachStatus::Replaced(why) => tracing::info!("probe {program} not needed: {why}"),
            AttachStatus::Failed(why) => tracing::warn!("probe {program} failed: {why}"),
        }
    }
}

/// Forwards kernel-side aya-log records (only present in `probe-debug` builds) into our log.
fn bridge_kernel_logs(ebpf: &mut aya::Ebpf) {
    match aya_log::EbpfLogger::init(ebpf) {
        Ok(logger) => {
            // SAFETY: the logger owns its ring-buffer fd for its whole life and always returns
            // that same fd; the AsyncFd owns the logger, so the fd outlives the registration.
            let registered = unsafe {
                tokio::io::unix::AsyncFd::register_with_interest(
                    logger,
                    tokio::io::Interest::READABLE,
                )
            };
            let Ok(mut fd) = registered else {
                tracing::warn!("cannot poll the kernel log buffer; kernel-side logs are lost");
                return;
            };
            tokio::spawn(async move {
                while let Ok(mut guard) = fd.readable_mut().await {
                    guard.get_inner_mut().flush();
                    guard.clear_ready();
                }
            });
        }
        Err(err) => tracing::debug!("no kernel-side logging in this build ({err})"),
    }
}
