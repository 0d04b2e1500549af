//! HTTP/2 streams run in their connection's own task.
//!
//! hyper's HTTP/2 server hands the future of each new stream (the service's
//! answer, then the piping of its body) to an executor. With tokio's, every
//! request is a task of its own: an allocation, a trip through the
//! scheduler, and one more wake-up of the connection's task once the answer
//! is queued. [`StreamExecutor`] instead puts the future in the [`Streams`]
//! of the connection being polled, and [`drive`](super::connection) polls
//! them right after the connection, in the same task, as nginx and Envoy run
//! a connection's streams on the connection's own thread.
//!
//! A stream is polled only when it woke (the set is a
//! [`FuturesUnordered`]), so a connection with many streams waiting on
//! upstreams costs nothing for the ones that have nothing to do. The streams
//! of one connection share its task: on the multi-thread scheduler they no
//! longer run on two threads at once. When the connection ends its streams
//! are dropped with it, as an HTTP/1.1 connection drops the request it was
//! serving (hyper's HTTP/2 connection ends only once its streams are done,
//! or on an error that ends them anyway).

use std::cell::OnceCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

type Stream = Pin<Box<dyn Future<Output = ()> + Send>>;

scoped_tls::scoped_thread_local!(static POLLING: Streams);

/// The streams of one connection, made with the first one (an HTTP/1.1
/// connection has none).
#[derive(Default)]
pub(super) struct Streams {
    set: OnceCell<FuturesUnordered<Stream>>,
}

impl Streams {
    /// Runs `poll` (the connection's poll) with this set as the one new
    /// streams go to.
    pub(super) fn enter<R>(&self, poll: impl FnOnce() -> R) -> R {
        POLLING.set(self, poll)
    }

    /// Polls the streams that woke, until none is ready to finish.
    pub(super) fn poll(&mut self, cx: &mut Context<'_>) {
        let Some(set) = self.set.get_mut() else {
            return;
        };
        while !set.is_empty() {
            if let Poll::Pending | Poll::Ready(None) = set.poll_next_unpin(cx) {
                break;
            }
        }
    }

    fn push(&self, stream: Stream) {
        self.set.get_or_init(FuturesUnordered::new).push(stream);
    }
}

/// The executor of the server's HTTP/2 connections: a stream started while
/// [`drive`](super::connection) polls a connection joins that connection's
/// [`Streams`]; anywhere else (hyper's builder used outside `drive`) it is
/// spawned on the runtime.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct StreamExecutor;

impl<F> hyper::rt::Executor<F> for StreamExecutor
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, stream: F) {
        // Boxed before the closure: the closure would hold the future (480
        // bytes in scalwsd) by value, one more move of it before the box.
        let stream: Stream = Box::pin(stream);
        if POLLING.is_set() {
            POLLING.with(|streams| streams.push(stream));
        } else {
            tokio::spawn(stream);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::rt::Executor;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn a_stream_started_while_a_connection_is_polled_runs_in_its_set() {
        let ran = Arc::new(AtomicUsize::new(0));
        let mut streams = Streams::default();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let counted = ran.clone();
        streams.enter(|| {
            StreamExecutor.execute(async move {
                let _ = rx.await;
                counted.fetch_add(1, Ordering::Relaxed);
            })
        });
        assert_eq!(streams.set.get().map(FuturesUnordered::len), Some(1));
        // Not spawned: nothing runs it until the set is polled.
        tokio::task::yield_now().await;
        std::future::poll_fn(|cx| {
            streams.poll(cx);
            Poll::Ready(())
        })
        .await;
        assert_eq!(ran.load(Ordering::Relaxed), 0, "waiting on its channel");
        tx.send(()).expect("the stream still waits");
        std::future::poll_fn(|cx| {
            streams.poll(cx);
            Poll::Ready(())
        })
        .await;
        assert_eq!(ran.load(Ordering::Relaxed), 1);
        assert_eq!(streams.set.get().map(FuturesUnordered::len), Some(0));
    }

    #[tokio::test]
    async fn a_stream_started_elsewhere_is_spawned() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        StreamExecutor.execute(async move {
            let _ = tx.send(());
        });
        tokio::time::timeout(std::time::Duration::from_secs(5), rx)
            .await
            .expect("the spawned stream ran in time")
            .expect("the spawned stream sent");
    }
}
