//! [`AccessLog`]: the handle entries are logged through.

use std::io;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{Notify, mpsc, oneshot};

use super::entry::AccessLogEntry;
use super::writer::{Output, Writer};

/// Where access log lines go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogTarget {
    /// The process's standard output.
    Stdout,
    /// A file, opened for append and created if missing.
    File(PathBuf),
}

/// A handle to a running access log: cheap to clone (one reference count),
/// shared by every request.
///
/// The writer task ends when the last handle is dropped, after writing what
/// was queued.
#[derive(Clone)]
pub struct AccessLog {
    sender: mpsc::Sender<Message>,
    shared: Arc<Shared>,
}

/// What the handles and the writer share.
#[derive(Debug, Default)]
pub(super) struct Shared {
    pub(super) dropped: AtomicU64,
    pub(super) written: AtomicU64,
    pub(super) failed: AtomicU64,
    pub(super) reopen: Notify,
}

/// What goes through the queue, in order.
pub(super) enum Message {
    Entry(AccessLogEntry),
    /// Answered once everything queued before it is written.
    Flush(oneshot::Sender<()>),
}

// === impl AccessLog ===

impl AccessLog {
    /// The default queue capacity: 8192 entries (a few MiB at most), about
    /// a tenth of a second at 100k requests per second.
    pub const DEFAULT_CAPACITY: NonZeroUsize = match NonZeroUsize::new(8192) {
        Some(capacity) => capacity,
        None => panic!("8192 is not zero"),
    };

    /// Opens `target` and starts the writer task on the current tokio
    /// runtime, with a queue of `capacity` entries.
    ///
    /// Fails when the file cannot be opened, or outside a tokio runtime.
    pub fn start(target: LogTarget, capacity: NonZeroUsize) -> io::Result<Self> {
        let runtime = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
        let output = Output::open(target)?;
        let (sender, receiver) = mpsc::channel(capacity.get());
        let shared = Arc::new(Shared::default());
        runtime.spawn(Writer::new(output, receiver, Arc::clone(&shared)).run());
        Ok(Self { sender, shared })
    }

    /// Queues `entry` for the writer. Never waits: when the queue is full (or
    /// the writer is gone) the entry is dropped and counted in
    /// [`AccessLog::dropped`].
    #[inline]
    pub fn log(&self, entry: AccessLogEntry) {
        match self.sender.try_send(Message::Entry(entry)) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Closed(_)) => {
                self.shared.dropped.fetch_add(1, Relaxed);
            }
        }
    }

    /// Entries dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Relaxed)
    }

    /// Entries written.
    pub fn written(&self) -> u64 {
        self.shared.written.load(Relaxed)
    }

    /// Entries lost to write errors (each error is also logged with
    /// `tracing`, at most one warning per 10 seconds).
    pub fn failed(&self) -> u64 {
        self.shared.failed.load(Relaxed)
    }

    /// Asks the writer to reopen its file before it writes again, so that
    /// after `mv access.log access.log.1` new lines go to a new `access.log`.
    /// Does not wait. For [`LogTarget::Stdout`] it does nothing. If the file
    /// cannot be reopened, the writer keeps the old one and warns.
    pub fn reopen(&self) {
        self.shared.reopen.notify_one();
    }

    /// Waits until every entry queued before this call (by any handle) is
    /// written, or failed to be. For tests and graceful shutdown.
    pub async fn flush(&self) {
        let (done, written) = oneshot::channel();
        if self.sender.send(Message::Flush(done)).await.is_ok() {
            let _ = written.await;
        }
    }
}

impl std::fmt::Debug for AccessLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessLog")
            .field("written", &self.written())
            .field("dropped", &self.dropped())
            .field("failed", &self.failed())
            .finish()
    }
}
