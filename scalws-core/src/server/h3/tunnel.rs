//! WebSocket from HTTP/3 clients (RFC 9220): after the `200` that answers
//! the extended CONNECT, the stream's DATA frames carry the WebSocket's
//! bytes, copied to and from the upstream's upgraded HTTP/1.1 connection.
//!
//! The tunnel runs in its request's task, so the connection counts it as a
//! request in flight: not idle while it is open, waited for by a drain and
//! aborted with the connection when `drain_timeout` runs out. It is closed
//! once no byte has moved either way for `tunnel_idle_timeout`, like the
//! tunnels of TCP connections.

use std::sync::Arc;
use std::time::Duration;

use ::h3::error::Code;
use bytes::{Buf, BytesMut};
use http::Response;
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::body::RecvHalf;
use super::response::{ResponseStream, SendHalf};
use crate::error::BoxError;
use crate::server::activity::Activity;
use crate::server::io::Watched;
use crate::server::tunnel::until_idle;

/// Bytes read from the upstream at a time, each sent as one DATA frame.
const CHUNK: usize = 16 * 1024;

impl ResponseStream {
    /// Sends `head` (the `200` of an opened tunnel), then carries bytes both
    /// ways until both sides have ended theirs. A tunnel that ends otherwise
    /// (an error either way, or idle past `idle_timeout`) is cancelled: the
    /// stream is reset with `H3_REQUEST_CANCELLED`, as RFC 9220 3 asks,
    /// never ended as if whole.
    pub(super) async fn tunnel(
        &mut self,
        head: Response<()>,
        mut recv: RecvHalf,
        upstream: Upgraded,
        idle_timeout: Duration,
    ) -> Result<(), BoxError> {
        self.send_head(head).await?;
        let moved = Arc::new(Activity::new());
        let upstream = Watched::new(TokioIo::new(upstream), moved.clone());
        let (from_upstream, to_upstream) = tokio::io::split(upstream);
        let send = self.sender();
        let copy = async {
            tokio::try_join!(
                upward(&mut recv, to_upstream),
                downward(from_upstream, send)
            )
        };
        let ended = until_idle(copy, &moved, idle_timeout).await;
        if let Some(Ok(((), ()))) = ended {
            self.finished();
            return Ok(());
        }
        // Our direction only: h3-quinn 0.0.10 panics on `stop_sending` while a
        // read is pending (the stream sits in the read's future), which is
        // how an idle tunnel ends. Dropping `recv` stops the client's
        // direction with quinn's implicit code 0.
        self.cancel(Code::H3_REQUEST_CANCELLED);
        drop(recv);
        match ended {
            Some(Err(error)) => Err(error),
            _ => Ok(()),
        }
    }
}

/// The client's DATA frames to the upstream; the end of the client's
/// stream ends the upstream's write side.
async fn upward(recv: &mut RecvHalf, mut to: impl AsyncWrite + Unpin) -> Result<(), BoxError> {
    while let Some(mut data) = recv.recv_data().await? {
        while data.has_remaining() {
            to.write_all(data.chunk()).await?;
            let n = data.chunk().len();
            data.advance(n);
        }
    }
    to.shutdown().await?;
    Ok(())
}

/// The upstream's bytes to the client as DATA frames; the upstream's end of
/// stream ends the client's stream.
async fn downward(mut from: impl AsyncRead + Unpin, send: &mut SendHalf) -> Result<(), BoxError> {
    let mut buffer = BytesMut::new();
    loop {
        buffer.reserve(CHUNK);
        if from.read_buf(&mut buffer).await? == 0 {
            break;
        }
        send.send_data(buffer.split().freeze()).await?;
    }
    send.finish().await?;
    Ok(())
}
