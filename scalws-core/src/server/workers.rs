//! More event loops than the caller's: nginx's worker model, for a server
//! that wants more than one core.
//!
//! [`Workers::start`] runs each extra worker as a tokio current-thread runtime
//! on a thread of its own. A [`Server`](super::Server) bound with them opens
//! every TCP listener once per worker, all with `SO_REUSEPORT` (the kernel
//! spreads new connections over the sockets), and serves each socket on its
//! own worker: a connection lives on the worker that accepted it, with that
//! worker's timers, its idle upstream connections and no work stealing. The
//! caller's runtime is the first worker. An HTTP/3 listener has one UDP
//! socket, served on the caller's runtime: QUIC's packets for one connection
//! must all reach the endpoint that holds it.

use std::io;
use std::sync::mpsc;
use std::time::Duration;

use tokio::runtime::{Builder, Handle, Runtime};
use tokio::sync::oneshot;

/// The most threads a worker's runtime starts for blocking work (file reads
/// for `static` routes, the access log's writes, a reload's file read), as
/// nginx's thread pools have 32 per worker process. tokio's default is 512
/// per runtime: a burst of requests for files that are not in memory (a
/// scanner asking for missing paths, many downloads at once) started a
/// thread for each, each with its own stack and allocator heap. Work past
/// the limit waits in the runtime's queue for a thread to come free.
pub const BLOCKING_THREADS_PER_WORKER: usize = 32;

/// A worker's event loop: a current-thread runtime with I/O and timers and
/// at most [`BLOCKING_THREADS_PER_WORKER`] blocking threads. Every worker
/// [`Workers::start`] starts runs on one; a server's first worker (the
/// caller's own runtime) can be made with it too, as `scalwsd` does.
pub fn worker_runtime() -> io::Result<Runtime> {
    Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS_PER_WORKER)
        .build()
}

/// The extra event loops of a server (none by default).
///
/// Dropping it tells each worker to stop: what still runs there is dropped
/// (after a [`Running::shutdown`](super::Running::shutdown) that is nothing a
/// client waits for), and its thread ends on its own.
#[derive(Default)]
pub struct Workers {
    workers: Vec<Worker>,
}

struct Worker {
    handle: Handle,
    stop: Option<oneshot::Sender<()>>,
}

impl Workers {
    /// No extra worker: everything runs on the caller's runtime.
    pub fn none() -> Self {
        Self::default()
    }

    /// Starts `extra` workers beside the caller's runtime, each a
    /// current-thread runtime (I/O and timers) on a thread named
    /// `scalws-worker-N`.
    pub fn start(extra: usize) -> io::Result<Self> {
        let mut workers = Vec::with_capacity(extra);
        for n in 1..=extra {
            let (ready, handle) = mpsc::channel();
            let (stop, stopped) = oneshot::channel::<()>();
            std::thread::Builder::new()
                .name(format!("scalws-worker-{n}"))
                .spawn(move || {
                    let runtime = match worker_runtime() {
                        Ok(runtime) => runtime,
                        Err(error) => {
                            let _ = ready.send(Err(error));
                            return;
                        }
                    };
                    let _ = ready.send(Ok(runtime.handle().clone()));
                    runtime.block_on(async {
                        let _ = stopped.await;
                    });
                    // A file read in spawn_blocking may still be running: do
                    // not hold the thread for it.
                    runtime.shutdown_timeout(Duration::from_secs(1));
                })?;
            let handle = handle
                .recv()
                .map_err(|_| io::Error::other("a worker thread ended as it started"))??;
            workers.push(Worker {
                handle,
                stop: Some(stop),
            });
        }
        Ok(Self { workers })
    }

    /// How many event loops serve: the caller's and the extra ones.
    pub fn count(&self) -> usize {
        1 + self.workers.len()
    }

    /// The runtime of worker `n` (0 is the caller's: `None`).
    pub(super) fn handle(&self, n: usize) -> Option<&Handle> {
        n.checked_sub(1).map(|i| &self.workers[i].handle)
    }
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("count", &self.count())
            .finish()
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            if let Some(stop) = worker.stop.take() {
                let _ = stop.send(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_worker_beside_runs_at_most_32_blocking_threads() {
        let workers = Workers::start(1).unwrap();
        let most = test_support::most_blocking_at_once(workers.handle(1).unwrap(), 100);
        // tokio's default would run all 100 at once.
        assert!(most <= BLOCKING_THREADS_PER_WORKER, "{most} at once");
        assert!(
            most > BLOCKING_THREADS_PER_WORKER / 2,
            "only {most} at once"
        );
    }
}
