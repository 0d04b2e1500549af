//! Running scalwsd: find the configuration, check it, bind, serve, drain.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::cli::Cli;
use scalws_core::server::{BLOCKING_THREADS_PER_WORKER, Workers, worker_runtime};

use crate::config::{self, Config, ConfigErrors, DEFAULT_CONFIG, Scheduler};

/// Exit status for a configuration error (SPEC: never binds, exits 2).
pub const EXIT_CONFIG: u8 = 2;
/// Exit status when the configuration is valid but serving failed (a port in use).
pub const EXIT_RUNTIME: u8 = crate::serve::EXIT_RUNTIME;

/// Which configuration was used.
#[derive(Debug)]
pub enum Source {
    /// A file.
    File(PathBuf),
    /// The embedded demo.
    Embedded,
    /// A Kubernetes cluster (`--kubernetes`).
    Kubernetes,
}

/// `--config FILE`, else `scalws.yaml` in the working directory, else the embedded demo.
pub fn find_config(cli: &Cli) -> Source {
    match &cli.config {
        Some(path) => Source::File(path.clone()),
        None if Path::new("scalws.yaml").exists() => Source::File(PathBuf::from("scalws.yaml")),
        None => Source::Embedded,
    }
}

/// Loads the chosen configuration.
pub fn load(source: &Source) -> Result<Config, ConfigErrors> {
    match source {
        Source::File(path) => config::load_file(path),
        Source::Embedded => config::load("<embedded default>", DEFAULT_CONFIG, Path::new(".")),
        // The controller translates its configurations itself (kubernetes::controller).
        Source::Kubernetes => Err(ConfigErrors(vec![config::ConfigError {
            file: "<kubernetes>".to_owned(),
            line: 0,
            column: 0,
            path: String::new(),
            message: "configured from the cluster, not from a file".to_owned(),
        }])),
    }
}

/// The whole life of the process; returns its exit status.
///
/// The configuration is loaded inside the runtime because upstream pools with
/// health checks start their checker tasks as they are built; `workers` and
/// `scheduler` are read from the file first, since the runtime needs them
/// before anything else.
pub fn main(cli: Cli) -> ExitCode {
    init_logging();
    if let Some(crate::cli::Command::Explain(args)) = &cli.command {
        return crate::explain::run(args);
    }
    #[cfg(feature = "kubernetes")]
    if let Some(crate::cli::Command::Translate(args)) = &cli.command {
        return crate::kubernetes::command::run(args);
    }
    #[cfg(feature = "kubernetes")]
    let source = if cli.controller.kubernetes {
        Source::Kubernetes
    } else {
        find_config(&cli)
    };
    #[cfg(not(feature = "kubernetes"))]
    let source = find_config(&cli);
    if cli.check {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => return runtime_failed(&error),
        };
        return runtime.block_on(async {
            match load(&source) {
                Ok(config) => {
                    for warning in &config.warnings {
                        eprintln!("warning: {warning}");
                    }
                    match &source {
                        Source::File(path) => println!("{}: ok", path.display()),
                        Source::Embedded => println!("<embedded default>: ok"),
                        Source::Kubernetes => println!("<kubernetes>: ok"),
                    }
                    ExitCode::SUCCESS
                }
                Err(errors) => config_failed(&errors),
            }
        });
    }
    let peeked = peek(&source);
    let workers = cli
        .workers
        .map(|n| n.get())
        .or_else(|| peeked.as_ref().and_then(|p| p.workers))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let scheduler = cli
        .scheduler
        .or_else(|| peeked.as_ref().and_then(|p| p.scheduler))
        .unwrap_or_default();
    let (runtime, extra) = runtime(scheduler, workers);
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(error) => return runtime_failed(&error),
    };
    let workers_beside = match Workers::start(extra) {
        Ok(started) => started,
        Err(error) => return runtime_failed(&error),
    };
    #[cfg(feature = "kubernetes")]
    if let Source::Kubernetes = source {
        return runtime.block_on(crate::kubernetes::controller::run(
            cli.controller.clone(),
            workers_beside,
        ));
    }
    runtime.block_on(async {
        let config = match load(&source) {
            Ok(config) => config,
            Err(errors) => return config_failed(&errors),
        };
        if let Source::Embedded = source {
            tracing::info!(
                "no --config and no scalws.yaml here: serving the embedded demo configuration"
            );
        }
        tracing::info!(
            workers,
            ?scheduler,
            version = env!("CARGO_PKG_VERSION"),
            "starting"
        );
        crate::serve::run(config, source, None, workers_beside).await
    })
}

fn config_failed(errors: &ConfigErrors) -> ExitCode {
    eprintln!("{errors}");
    eprintln!(
        "scalwsd: {} error(s) in the configuration; nothing was started",
        errors.0.len()
    );
    ExitCode::from(EXIT_CONFIG)
}

fn runtime_failed(error: &std::io::Error) -> ExitCode {
    eprintln!("scalwsd: cannot start the runtime: {error}");
    ExitCode::from(EXIT_RUNTIME)
}

/// What the runtime needs before the configuration is loaded.
struct Peek {
    workers: Option<usize>,
    scheduler: Option<Scheduler>,
}

/// The runtime `scalwsd` serves on, and how many workers to start beside it.
///
/// Per worker (the default): a current-thread runtime on this thread and
/// one on a thread of its own for every other worker, each serving its own
/// SO_REUSEPORT sockets, as nginx's workers do. One event loop runs 4-9 %
/// fewer instructions per request than the multi-thread scheduler with one
/// worker, and under load cost 0.97x its CPU on respond, 0.99x on proxy and
/// 0.77x on h2 over TLS (docs/benchmarks.md, "The worker model"). Either way
/// a worker has at most [`BLOCKING_THREADS_PER_WORKER`] blocking threads.
fn runtime(
    scheduler: Scheduler,
    workers: usize,
) -> (std::io::Result<tokio::runtime::Runtime>, usize) {
    match scheduler {
        Scheduler::PerWorker => (worker_runtime(), workers.saturating_sub(1)),
        Scheduler::WorkStealing => (
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all()
                .max_blocking_threads(BLOCKING_THREADS_PER_WORKER.saturating_mul(workers))
                .build(),
            0,
        ),
    }
}

/// `workers` and `scheduler` from the file, if it parses that far; the full
/// load reports any error.
fn peek(source: &Source) -> Option<Peek> {
    #[derive(serde::Deserialize)]
    struct File {
        workers: Option<usize>,
        scheduler: Option<String>,
    }
    let text = match source {
        Source::File(path) => std::fs::read_to_string(path).ok()?,
        Source::Embedded => DEFAULT_CONFIG.to_owned(),
        Source::Kubernetes => return None,
    };
    let file: File = serde_saphyr::from_str(&text).ok()?;
    Some(Peek {
        workers: file.workers.filter(|w| *w > 0),
        scheduler: file.scheduler.as_deref().and_then(Scheduler::from_name),
    })
}

/// Human-readable logs on stderr; `SCALWS_LOG` (or `RUST_LOG`) sets the filter, default `info`.
fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = std::env::var("SCALWS_LOG")
        .ok()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .or_else(|| EnvFilter::try_from_default_env().ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_worker_runs_at_most_32_blocking_threads() {
        for (scheduler, workers) in [(Scheduler::PerWorker, 1), (Scheduler::WorkStealing, 2)] {
            let (runtime, _) = runtime(scheduler, workers);
            let most = test_support::most_blocking_at_once(runtime.unwrap().handle(), 100);
            let cap = BLOCKING_THREADS_PER_WORKER * workers;
            // tokio's default would run all 100 at once.
            assert!(most <= cap, "{scheduler:?}: {most} at once");
            assert!(most > cap / 2, "{scheduler:?}: only {most} at once");
        }
    }
}
