//! The writer task: the one owner of the output.
//!
//! It takes whatever is queued (up to [`MAX_BATCH`] entries), formats it into
//! one buffer and writes that buffer whole, so lines reach the file as soon
//! as the queue is momentarily empty, with no buffer left to flush.
//!
//! Writes are blocking std I/O, run on tokio's blocking pool: a full disk or
//! a slow reader of stdout must not stall a runtime worker, and the hand-off
//! is paid once per batch, which under load holds everything queued
//! meanwhile.

use std::fmt::Display;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::handle::{LogTarget, Message, Shared};

/// Most entries formatted into one write.
const MAX_BATCH: usize = 1024;
/// A buffer grown past this by a burst is not kept.
const MAX_RETAINED: usize = 1 << 20;
/// At most one warning about failed writes per this long.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Where the writer writes.
pub(super) enum Output {
    Stdout(io::Stdout),
    File { path: PathBuf, file: File },
}

impl Output {
    pub(super) fn open(target: LogTarget) -> io::Result<Self> {
        Ok(match target {
            LogTarget::Stdout => Self::Stdout(io::stdout()),
            LogTarget::File(path) => Self::File {
                file: open_append(&path)?,
                path,
            },
        })
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Self::Stdout(stdout) => {
                let mut stdout = stdout.lock();
                stdout.write_all(bytes)?;
                stdout.flush()
            }
            Self::File { file, .. } => file.write_all(bytes),
        }
    }

    /// Opens the path again; on failure the old file stays.
    fn reopen(&mut self) -> io::Result<()> {
        match self {
            Self::Stdout(_) => Ok(()),
            Self::File { path, file } => {
                *file = open_append(path)?;
                Ok(())
            }
        }
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// The writer task's state.
pub(super) struct Writer {
    /// Locked only by the writer's own blocking jobs, one at a time: the
    /// mutex is what lets them borrow the output from the task.
    output: Arc<Mutex<Output>>,
    receiver: mpsc::Receiver<Message>,
    shared: Arc<Shared>,
    buf: Vec<u8>,
    last_warning: Option<Instant>,
    /// Lines lost since the last warning.
    unreported: u64,
}

// === impl Writer ===

impl Writer {
    pub(super) fn new(
        output: Output,
        receiver: mpsc::Receiver<Message>,
        shared: Arc<Shared>,
    ) -> Self {
        Self {
            output: Arc::new(Mutex::new(output)),
            receiver,
            shared,
            buf: Vec::new(),
            last_warning: None,
            unreported: 0,
        }
    }

    /// Writes until every handle is gone and the queue is drained.
    pub(super) async fn run(mut self) {
        let mut batch = Vec::with_capacity(MAX_BATCH);
        loop {
            tokio::select! {
                // A reopen goes first: entries logged after `reopen()` go to the new file.
                biased;
                () = self.shared.reopen.notified() => self.reopen().await,
                received = self.receiver.recv_many(&mut batch, MAX_BATCH) => {
                    if received == 0 {
                        // Closed and empty: nothing can be logged any more.
                        break;
                    }
                    self.write(&mut batch).await;
                }
            }
        }
    }

    /// Formats and writes `batch`, then answers the flushes in it.
    async fn write(&mut self, batch: &mut Vec<Message>) {
        let mut lines = 0;
        let mut flushes = Vec::new();
        for message in batch.drain(..) {
            match message {
                Message::Entry(entry) => {
                    entry.write_json(&mut self.buf);
                    lines += 1;
                }
                Message::Flush(done) => flushes.push(done),
            }
        }
        if lines > 0 {
            let buf = std::mem::take(&mut self.buf);
            let output = Arc::clone(&self.output);
            let job = tokio::task::spawn_blocking(move || {
                let result = lock(&output).write_all(&buf);
                (buf, result)
            });
            match job.await {
                Ok((buf, Ok(()))) => {
                    self.shared.written.fetch_add(lines, Relaxed);
                    self.keep(buf);
                }
                Ok((buf, Err(error))) => {
                    self.failed(lines, &error);
                    self.keep(buf);
                }
                Err(error) => self.failed(lines, &error),
            }
        }
        for done in flushes {
            let _ = done.send(());
        }
    }

    fn keep(&mut self, mut buf: Vec<u8>) {
        if buf.capacity() <= MAX_RETAINED {
            buf.clear();
            self.buf = buf;
        }
    }

    #[cold]
    fn failed(&mut self, lines: u64, error: &dyn Display) {
        self.shared.failed.fetch_add(lines, Relaxed);
        self.unreported += lines;
        let now = Instant::now();
        if self
            .last_warning
            .is_none_or(|at| now.duration_since(at) >= WARN_EVERY)
        {
            tracing::warn!(%error, lost = self.unreported, "access log: write failed, lines lost");
            self.last_warning = Some(now);
            self.unreported = 0;
        }
    }

    #[cold]
    async fn reopen(&mut self) {
        let output = Arc::clone(&self.output);
        match tokio::task::spawn_blocking(move || lock(&output).reopen()).await {
            Ok(Ok(())) => tracing::debug!("access log: reopened"),
            Ok(Err(error)) => {
                tracing::warn!(%error, "access log: reopen failed, writing on to the old file");
            }
            Err(error) => tracing::warn!(%error, "access log: reopen failed"),
        }
    }
}

/// The output, even if a write panicked while holding it (the file is still
/// good; at worst it has a partial line).
fn lock(output: &Mutex<Output>) -> MutexGuard<'_, Output> {
    output.lock().unwrap_or_else(PoisonError::into_inner)
}
