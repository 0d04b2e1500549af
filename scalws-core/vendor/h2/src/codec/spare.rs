//! ScalWS: the buffers an idle connection gives back, and the spares a
//! thread keeps of them for the next connection that needs one.
//!
//! Unpatched, every connection holds a 16 KiB write buffer, tokio-util's
//! 8 KiB read buffer and the HPACK decoder's 4 KiB scratch buffer for as long
//! as it lives. A connection with no open stream whose read is pending and
//! whose buffers are empty gives them back (`Codec::release_idle_buffers`);
//! the next frame read or written (or Huffman-coded string decoded) takes a
//! spare of its thread, or allocates.

use bytes::BytesMut;
use std::cell::RefCell;

/// How many spare buffers of each kind a thread keeps.
const SPARES: usize = 16;

/// The size of a read buffer taken back, tokio-util's first read buffer.
pub(crate) const READ_BUFFER: usize = 8 * 1024;

/// The size of the HPACK decoder's scratch buffer for Huffman-coded strings.
pub(crate) const SCRATCH_BUFFER: usize = 4 * 1024;

std::thread_local! {
    static READ: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
    static WRITE: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
    static SCRATCH: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
}

fn take(spares: &'static std::thread::LocalKey<RefCell<Vec<BytesMut>>>, size: usize) -> BytesMut {
    match spares.try_with(|spares| spares.borrow_mut().pop()) {
        Ok(Some(spare)) => spare,
        _ => BytesMut::with_capacity(size),
    }
}

/// Keeps `buf` among the thread's spares if it is empty and `size` to twice
/// that; drops it otherwise. The caller has made sure that no `Bytes` shares
/// its allocation.
fn keep(spares: &'static std::thread::LocalKey<RefCell<Vec<BytesMut>>>, buf: BytesMut, size: usize) {
    if !buf.is_empty() || buf.capacity() < size || buf.capacity() > 2 * size {
        return;
    }
    let _ = spares.try_with(|spares| {
        let mut spares = spares.borrow_mut();
        if spares.len() < SPARES {
            spares.push(buf);
        }
    });
}

/// A read buffer for a connection that gave its own back.
pub(crate) fn take_read() -> BytesMut {
    take(&READ, READ_BUFFER)
}

/// A write buffer of `size` for a connection that gave its own back.
pub(crate) fn take_write(size: usize) -> BytesMut {
    take(&WRITE, size)
}

/// Gives back an idle connection's empty read buffer: kept as a spare only
/// if it owns the whole of its allocation, else dropped (freeing it, or
/// leaving it to the last `Bytes` of a frame read into it).
pub(crate) fn keep_read(mut buf: BytesMut) {
    // The read buffer is a view past the start of its allocation (the
    // frames read are split off its front). Asking for one byte more than
    // the view holds makes `try_reclaim` check that no `Bytes` shares the
    // allocation and, if none does, move the view back to its start. A view
    // still at its start (nothing was ever read into it) fails that and is
    // freed.
    if buf.is_empty() && buf.try_reclaim(buf.capacity() + 1) {
        keep(&READ, buf, READ_BUFFER)
    }
}

/// An HPACK scratch buffer for a decoder that gave its own back.
pub(crate) fn take_scratch() -> BytesMut {
    take(&SCRATCH, SCRATCH_BUFFER)
}

/// Gives back an idle decoder's empty scratch buffer, kept as a spare on the
/// same terms as a read buffer (`keep_read`): the strings decoded into it
/// are split off its front and frozen, and one still alive (a request's
/// path, or a field in the decoder's table) keeps it from being reused.
pub(crate) fn keep_scratch(mut buf: BytesMut) {
    if buf.is_empty() && buf.try_reclaim(buf.capacity() + 1) {
        keep(&SCRATCH, buf, SCRATCH_BUFFER)
    }
}

/// Gives back an idle connection's empty write buffer of `size`. The write
/// buffer is never split or frozen, so it always owns its allocation.
pub(crate) fn keep_write(buf: BytesMut, size: usize) {
    keep(&WRITE, buf, size)
}
