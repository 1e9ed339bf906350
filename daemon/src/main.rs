//! `wbscope` binary: parses the command line and hands over to the library.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser as _;
use wbscope::{
    Config,
    cli::{Cli, Command, RunArgs},
    config::{LogLevel, parse_listen},
};

fn main() -> ExitCode {
    // Before anything else: a SIGTERM from now on waits for our handler (see `signals`).
    wbscope::signals::hold();
    let cli = Cli::parse();
    if !matches!(
        cli.command,
        None | Some(Command::Run) | Some(Command::BenchFloor)
    ) {
        // The interactive commands keep the default actions (and their own handlers).
        wbscope::signals::release();
    }
    let result = match cli.command {
        Some(Command::Check { verbose, metrics }) => check(&cli.run, verbose, metrics),
        Some(Command::Run) | None => run(&cli.run),
        Some(Command::Trace(args)) => wbscope::stalls::trace::run(&args),
        Some(Command::Top(args)) => wbscope::top::run(&args)
            .map(|()| ExitCode::SUCCESS)
            .map_err(Into::into),
        Some(Command::BenchFloor) => bench_floor(&cli.run),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("wbscope: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// The configuration from `--config`, with command-line overrides applied.
fn load_config(args: &RunArgs) -> anyhow::Result<Config> {
    let mut config = match &args.config {
        Some(path) => Config::from_file(path)?,
        None => Config::default(),
    };
    if let Some(listen) = &args.listen {
        config.listen = parse_listen(listen).context("--listen")?;
    }
    if let Some(path) = &args.web_config_file {
        config.web_config_file = Some(path.clone());
    }
    if let Some(level) = &args.log_level {
        config.log_level = level
            .parse::<LogLevel>()
            .map_err(|e| anyhow::anyhow!("--log-level: {e}"))?;
    }
    Ok(config)
}

fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let config = load_config(args)?;
    wbscope::logging::init(config.log_level);
    // Before the runtime's threads exist: malloc parameters are process-wide.
    wbscope::memory::tune_allocator();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let shutdown = {
        let _context = runtime.enter();
        wbscope::signals::Shutdown::install().context("installing signal handlers")?
    };
    // SIGHUP re-reads the same file with the same command-line overrides.
    let reload = || load_config(args).map_err(|e| format!("{e:#}"));
    let notifier = wbscope::notify::Notifier::from_env();
    runtime.block_on(wbscope::service::run(
        config,
        reload,
        shutdown.recv(),
        notifier,
    ))?;
    Ok(ExitCode::SUCCESS)
}

fn check(args: &RunArgs, verbose: bool, metrics: bool) -> anyhow::Result<ExitCode> {
    let config = load_config(args)?;
    wbscope::logging::init(config.log_level);
    if metrics {
        for name in wbscope::check::metric_names(&config.disabled_probes)? {
            println!("{name}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let outcome = wbscope::check::run_check(verbose, &config.disabled_probes)?;
    print!("{}", outcome.text);
    Ok(if outcome.attached > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn bench_floor(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let config = load_config(args)?;
    wbscope::logging::init(config.log_level);
    wbscope::privileges::require_bpf_privileges()?;
    let floor = wbscope::probes::floor::attach_floor(&config.disabled_probes)?;
    for (hook, result) in &floor.hooks {
        match result {
            Ok(id) => println!("{hook}: attached as program {id}"),
            Err(why) => println!("{hook}: FAILED: {why}"),
        }
    }
    println!(
        "{} of {} hooks have an empty program; SIGINT or SIGTERM detaches them",
        floor.attached(),
        floor.hooks.len()
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let shutdown = {
        let _context = runtime.enter();
        wbscope::signals::Shutdown::install().context("installing signal handlers")?
    };
    runtime.block_on(shutdown.recv());
    drop(floor);
    Ok(ExitCode::SUCCESS)
}
