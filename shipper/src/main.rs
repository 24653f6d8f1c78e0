#![deny(unsafe_code)]

use clap::Parser;
use slurm_cw_shipper::Exit;
use slurm_cw_shipper::app;
use slurm_cw_shipper::cli::{Cli, Command};
use slurm_cw_shipper::report;
use slurm_cw_shipper::settings::{LogFormat, Settings};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(job) = &cli.job_ended {
        return job_ended(&cli, job);
    }
    if let Some(Command::Install(args)) = &cli.command {
        return ExitCode::from(slurm_cw_shipper::install::run(args));
    }
    if let Some(Command::Report { job, json, cluster }) = &cli.command {
        let req = report::Request { job: job.clone(), json: *json, cluster: cluster.clone() };
        return report(&cli, &req);
    }
    let config = match Settings::load(cli.config.as_deref(), std::env::vars()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("slurm-cw-shipper: bad configuration: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(&config);
    slurm_cw_shipper::sys::memory::keep_freed_memory();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("slurm-cw-shipper: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(app::run(cli, config)) {
        Exit::Ok => ExitCode::SUCCESS,
        Exit::Failed(why) => {
            eprintln!("slurm-cw-shipper: {why}");
            ExitCode::from(1)
        }
        Exit::BadConfig(why) => {
            eprintln!("slurm-cw-shipper: bad configuration: {why}");
            ExitCode::from(2)
        }
    }
}

/// The TaskEpilog hook: quiet on success, one line on standard error otherwise, exit 0 always.
fn job_ended(cli: &Cli, job: &str) -> ExitCode {
    let config = Settings::load(cli.config.as_deref(), std::env::vars()).ok();
    let socket = slurm_cw_shipper::hook::socket_path(config.as_ref().map(|c| c.node.hook_socket.as_path()));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let result = match runtime {
        Ok(rt) => rt.block_on(slurm_cw_shipper::hook::request(&socket, job)),
        Err(e) => Err(e.to_string()),
    };
    match result {
        Ok(answer) if answer.starts_with("ok") => {}
        Ok(answer) => eprintln!("slurm-cw-shipper: final sample of job {job}: {answer}"),
        Err(e) => eprintln!("slurm-cw-shipper: final sample of job {job}: {e}"),
    }
    ExitCode::SUCCESS
}

/// `report <jobid>`: warnings only, so standard output is the report alone.
fn report(cli: &Cli, req: &report::Request) -> ExitCode {
    let config = match Settings::load(cli.config.as_deref(), std::env::vars()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("slurm-cw-shipper: bad configuration: {e}");
            return ExitCode::from(2);
        }
    };
    match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => ExitCode::from(rt.block_on(report::run(&config, req))),
        Err(e) => {
            eprintln!("slurm-cw-shipper: cannot start the async runtime: {e}");
            ExitCode::from(1)
        }
    }
}

/// Quiet by default (warnings and errors on standard error, which journald keeps; the AWS SDK's
/// own retries only at debug, see [`slurm_cw_shipper::logging`]); `log.level` or RUST_LOG ask
/// for more.
fn init_logging(config: &Settings) {
    let filter = std::env::var("RUST_LOG").ok().unwrap_or_else(|| config.log.level.clone());
    let filter = tracing_subscriber::EnvFilter::try_new(slurm_cw_shipper::logging::filter(&filter))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Colours only on a terminal: journald and log files get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match config.log.format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}
