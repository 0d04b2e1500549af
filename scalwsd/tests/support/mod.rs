//! Starts the gateway a YAML file describes, in-process, on loopback ports.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

pub mod cluster;
pub mod process;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;

use scalws_core::Server;
use tokio::sync::oneshot;

/// A running configuration; stops when dropped.
pub struct Running {
    pub addrs: HashMap<String, SocketAddr>,
    _stop: oneshot::Sender<()>,
}

impl Running {
    pub fn addr(&self, listener: &str) -> SocketAddr {
        self.addrs[listener]
    }
}

/// Loads `yaml` (relative paths from `dir`), binds its listeners (use port 0), serves.
pub fn start(yaml: &str, dir: &Path) -> Running {
    let config = match scalwsd::config::load("test.yaml", yaml, dir) {
        Ok(config) => config,
        Err(errors) => panic!("config errors:\n{errors}"),
    };
    let server = Server::bind(&config.listeners, config.limits).unwrap();
    let addrs = server
        .local_addrs()
        .into_iter()
        .map(|(name, addr)| (name.to_string(), addr))
        .collect();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.serve(config.gateway, async {
        let _ = stopped.await;
    }));
    Running { addrs, _stop: stop }
}
