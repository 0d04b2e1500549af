//! The command line:
//!
//! ```text
//! scalwsd [--config FILE] [--check] [--workers N] [--scheduler per_worker|work_stealing] [--version]
//! scalwsd explain [--config FILE] [--listener NAME] [-X METHOD] [-H 'NAME: VALUE']...
//!                 [--sni NAME] URL
//! scalwsd translate [--bind ADDR] [--listen PORT=ADDR:PORT]... [--certs-dir DIR]
//!                   [--class NAME] [--gateway-class NAME] [--controller-name NAME] PATH...
//! ```

#[cfg(feature = "kubernetes")]
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroUsize;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::Scheduler;

fn parse_scheduler(name: &str) -> Result<Scheduler, String> {
    Scheduler::from_name(name)
        .ok_or_else(|| format!("expected one of {}", Scheduler::NAMES.join(", ")))
}

/// ScalWS: a reverse proxy wired from a YAML file.
#[derive(Debug, Parser)]
#[command(
    name = "scalwsd",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
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

    /// How several workers share the work: `per_worker` (an event loop per
    /// worker, each with its own SO_REUSEPORT sockets) or `work_stealing`
    /// (tokio's multi-thread scheduler). Overrides `scheduler` in the file;
    /// default `per_worker`.
    #[arg(long, value_name = "MODEL", value_parser = parse_scheduler)]
    pub scheduler: Option<Scheduler>,

    /// Configure from a Kubernetes cluster (Ingress and Gateway API) instead of a file.
    #[cfg(feature = "kubernetes")]
    #[command(flatten)]
    pub controller: ControllerArgs,

    /// A subcommand instead of serving.
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[cfg(feature = "kubernetes")]
/// `scalwsd --kubernetes ...`.
#[derive(Clone, Debug, Args)]
pub struct ControllerArgs {
    /// Run as a Kubernetes Ingress controller and Gateway API implementation,
    /// configured from the API server (in-cluster service account or KUBECONFIG).
    #[arg(long, conflicts_with_all = ["config", "check"])]
    pub kubernetes: bool,

    /// Watch only this namespace (repeatable; default: every namespace).
    #[arg(long, value_name = "NS", requires = "kubernetes")]
    pub namespace: Vec<String>,

    /// The admin listener (metrics, health) in Kubernetes mode.
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "0.0.0.0:9901",
        requires = "kubernetes"
    )]
    pub admin: SocketAddr,

    /// An address clients reach the replicas at (the Service's load balancer IP or
    /// host name), written into Gateway and Ingress status. Repeatable.
    #[arg(long, value_name = "ADDR", requires = "kubernetes")]
    pub publish: Vec<String>,

    /// The Lease the replicas elect the status writer with.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "scalws-controller",
        requires = "kubernetes"
    )]
    pub lease: String,

    /// The Lease's namespace (default: $POD_NAMESPACE, else default).
    #[arg(long, value_name = "NS", requires = "kubernetes")]
    pub lease_namespace: Option<String>,

    /// How resources become a configuration.
    #[command(flatten)]
    pub translation: KubernetesArgs,
}

/// `scalwsd SUBCOMMAND`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Tell which listener, host entry, application and route a request
    /// would take, and why, without serving it. Exit 0 when a route answers,
    /// 1 when none does, 2 for a configuration error.
    Explain(ExplainArgs),
    /// Translate Kubernetes manifests (Gateway API, Ingress) into a ScalWS
    /// configuration: the file on stdout, each resource's status on stderr.
    #[cfg(feature = "kubernetes")]
    Translate(TranslateArgs),
}

/// `scalwsd explain`.
#[derive(Clone, Debug, Args)]
pub struct ExplainArgs {
    /// The configuration (default: scalws.yaml, else the embedded default).
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// The listener the request arrives on (default: the first whose
    /// protocol and port fit the URL).
    #[arg(long, value_name = "NAME")]
    pub listener: Option<String>,

    /// The request method.
    #[arg(
        short = 'X',
        long = "request",
        value_name = "METHOD",
        default_value = "GET"
    )]
    pub method: String,

    /// A request header, `NAME: VALUE` (repeatable).
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,

    /// The TLS server name the client sent (default: the URL's host); for
    /// https URLs. A name whose certificate does not cover the host gets 421.
    #[arg(long, value_name = "NAME")]
    pub sni: Option<String>,

    /// The request: `http://host[:port]/path?query` or `https://...`.
    #[arg(value_name = "URL")]
    pub url: String,
}

#[cfg(feature = "kubernetes")]
/// How Kubernetes resources become a configuration (`translate` and `--kubernetes`).
#[derive(Clone, Debug, Args)]
pub struct KubernetesArgs {
    /// The address Gateway and Ingress ports bind on (ports below 1024 at PORT+10000).
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0")]
    pub bind: IpAddr,

    /// Bind the Gateway (or Ingress) port PORT at ADDR:PORT instead. Repeatable.
    #[arg(long, value_name = "PORT=ADDR:PORT", value_parser = parse_listen)]
    pub listen: Vec<(u16, SocketAddr)>,

    /// The ingressClassName that is ours even without an IngressClass object.
    #[arg(long, value_name = "NAME", default_value = "scalws")]
    pub class: String,

    /// Serve only the GatewayClass of this name (it must still name our controller).
    #[arg(long, value_name = "NAME")]
    pub gateway_class: Option<String>,

    /// GatewayClasses whose controllerName is this are ours.
    #[arg(long, value_name = "NAME", default_value = crate::kubernetes::GATEWAY_CONTROLLER)]
    pub controller_name: String,
}

#[cfg(feature = "kubernetes")]
/// `scalwsd translate`.
#[derive(Clone, Debug, Args)]
pub struct TranslateArgs {
    /// How resources become a configuration.
    #[command(flatten)]
    pub kubernetes: KubernetesArgs,

    /// Where certificates from Secrets are written (as DIR/NAMESPACE/NAME.crt and .key).
    #[arg(long, value_name = "DIR", default_value = "certs")]
    pub certs_dir: PathBuf,

    /// Manifest files, or directories of .yaml, .yml and .json files.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[cfg(feature = "kubernetes")]
fn parse_listen(text: &str) -> Result<(u16, SocketAddr), String> {
    let (port, address) = text
        .split_once('=')
        .ok_or_else(|| format!("expected PORT=ADDR:PORT, got {text:?}"))?;
    let port: u16 = port
        .parse()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("{port:?} is not a port (1 to 65535)"))?;
    let address: SocketAddr = address
        .parse()
        .map_err(|_| format!("{address:?} is not ADDR:PORT (e.g. 127.0.0.1:8080)"))?;
    Ok((port, address))
}
