//! The command line: `scalwsd [--config FILE] [--check] [--workers N] [--version]`.

use std::num::NonZeroUsize;
use std::path::PathBuf;

use clap::Parser;

/// ScalWS: a reverse proxy wired from a YAML file.
#[derive(Debug, Parser)]
#[command(name = "scalwsd", version, about)]
pub struct Cli {
    /// The configuration file. Default: scalws.yaml in the working directory,
    /// else the embedded demo configuration.
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Check the configuration and exit: 0 when valid, 2 with every error otherwise.
    #[arg(long)]
    pub check: bool,

    /// Runtime worker threads (overrides `workers` in the file; default: one per CPU).
    #[arg(short, long, value_name = "N")]
    pub workers: Option<NonZeroUsize>,
}
