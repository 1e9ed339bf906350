//! `wbscope` binary: parses the command line and hands over to the library.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser as _;
use wbscope::{
    Config,
    cli::{CheckArgs, Cli, Command, LogArgs, RunArgs},
    config::{ConfigArg, LogLevel, parse_listen},
};

fn main() -> ExitCode {
    // Before anything else: a SIGTERM from now on waits for our handler (see `signals`).
    wbscope::signals::hold();
    let cli = Cli::parse();
    if !matches!(
        cli.command,
        None | Some(Command::Run(_)) | Some(Command::BenchFloor(_))
    ) {
        // The interactive commands keep the default actions (and their own handlers).
        wbscope::signals::release();
    }
    let result = match cli.command {
        Some(Command::Check(args)) => check(&args),
        Some(Command::Run(args)) => run(&args),
        None => run(&cli.run),
        Some(Command::Trace(args)) => wbscope::families::stall_events::trace::run(&args),
        Some(Command::Top(args)) => wbscope::top::run(&args)
            .map(|()| ExitCode::SUCCESS)
            .map_err(Into::into),
        Some(Command::BenchFloor(args)) => bench_floor(&args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("wbscope: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// The configuration from `--config` with the logging overrides applied.
fn load_logged_config(config: &ConfigArg, log: &LogArgs) -> anyhow::Result<Config> {
    let mut config = wbscope::config::load(config.config.as_deref())?;
    if let Some(level) = &log.log_level {
        config.log_level = level
            .parse::<LogLevel>()
            .map_err(|e| anyhow::anyhow!("--log-level: {e}"))?;
    }
    if let Some(format) = log.log_format {
        config.log_format = format;
    }
    Ok(config)
}

/// The configuration from `--config`, with `run`'s command-line overrides applied.
fn load_config(args: &RunArgs) -> anyhow::Result<Config> {
    let mut config = load_logged_config(&args.config, &args.log)?;
    if let Some(listen) = &args.listen {
        config.listen = parse_listen(listen).context("--listen")?;
    }
    if let Some(path) = &args.web_config_file {
        config.web_config_file = Some(path.clone());
    }
    Ok(config)
}

fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let config = load_config(args)?;
    wbscope::logging::init(config.log_level, config.log_format);
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

fn check(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let config = load_logged_config(&args.config, &args.log)?;
    wbscope::logging::init(config.log_level, config.log_format);
    if args.metrics_markdown {
        print!(
            "{}",
            wbscope::metrics_doc::render(&wbscope::check::metric_docs(&config)?)
        );
        return Ok(ExitCode::SUCCESS);
    }
    if args.metrics {
        for name in wbscope::check::metric_names(&config)? {
            println!("{name}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let outcome = wbscope::check::run_check(args.verbose, &config)?;
    print!("{}", outcome.text);
    if args.strict && outcome.failed > 0 {
        println!(
            "--strict: {} probes this kernel should support did not attach",
            outcome.failed
        );
    }
    Ok(if outcome.passes(args.strict) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn bench_floor(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let config = load_config(args)?;
    wbscope::logging::init(config.log_level, config.log_format);
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
