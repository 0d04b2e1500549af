//! Per-connection timing state behind `header_read_timeout` and `keepalive_timeout`.
//!
//! hyper's own `header_read_timeout` also runs while a keep-alive connection waits
//! for its next request, which would cap idle keep-alive at the header timeout.
//! The two timeouts are separate in our config, so the connection driver keeps
//! this state and enforces both.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::limits::Limits;
use crate::clock::{millis, now_ms};

/// `now + wait`, capped at a day so an embedder's `Duration::MAX` cannot overflow `Instant`.
pub(crate) fn later(now: Instant, wait: Duration) -> Instant {
    now + wait.min(Duration::from_secs(86_400))
}

#[derive(Debug)]
pub(crate) struct Activity {
    /// Requests from their head until their response head is ready.
    in_flight: AtomicUsize,
    /// Response bodies being sent, and tunnels opened from this connection:
    /// while any is open the connection is busy, not idle, however quiet.
    open: AtomicUsize,
    last_io: AtomicU64,
    /// The last write to the socket: a connection that writes is making progress.
    last_write: AtomicU64,
    /// When the bytes of a request head that has not arrived whole began; 0 = none.
    head_started: AtomicU64,
    multiplexed: AtomicBool,
    /// The response bodies of an HTTP/2 connection still being sent, each
    /// with the time since which it has waited for the connection to take
    /// its next frame (see [`SendClock`]).
    sending: Mutex<Vec<Weak<SendClock>>>,
}

/// When a response body last handed a frame to hyper (or was made) without
/// being asked for the next; 0 while hyper is asking. On HTTP/2 hyper asks
/// for the next frame only once the client's flow-control window has room,
/// so a clock left standing means a client that opens no window: the socket
/// itself is idle, and `send_timeout` on it never fires.
#[derive(Debug)]
pub(crate) struct SendClock(AtomicU64);

impl SendClock {
    /// Asked for a frame: whatever happens next is up to the body.
    pub(crate) fn asked(&self) {
        self.0.store(0, Ordering::Relaxed);
    }

    /// Handed a frame over: the next ask is up to the connection.
    pub(crate) fn handed(&self) {
        self.0.store(now_ms(), Ordering::Relaxed);
    }
}

/// What the driver should do with the connection now.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Check again at this instant.
    Wait(Instant),
    /// Idle past `keepalive_timeout`: close gracefully.
    Idle,
    /// A request head did not arrive in `header_read_timeout`: drop the connection.
    HeadTimedOut,
    /// An HTTP/2 response body has waited `send_timeout` for the client to
    /// open its window, and nothing was written meanwhile: close gracefully
    /// (GOAWAY), then drop the connection.
    Unread,
}

impl Activity {
    pub(crate) fn new() -> Self {
        let now = now_ms();
        Self {
            in_flight: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
            last_io: AtomicU64::new(now),
            last_write: AtomicU64::new(now),
            // A new connection owes us its first request head.
            head_started: AtomicU64::new(now),
            multiplexed: AtomicBool::new(false),
            sending: Mutex::new(Vec::new()),
        }
    }

    /// A clock for an HTTP/2 response body about to be handed to hyper,
    /// standing from now: hyper has not asked for a frame yet.
    pub(crate) fn send_clock(&self) -> Arc<SendClock> {
        let clock = Arc::new(SendClock(AtomicU64::new(now_ms())));
        let mut sending = self.sending.lock().unwrap_or_else(|p| p.into_inner());
        // Bodies that ended are dropped here, so the list is at most the
        // streams open at once plus those ended since the last call.
        sending.retain(|clock| clock.strong_count() > 0);
        sending.push(Arc::downgrade(&clock));
        clock
    }

    /// No request in flight and no response being sent.
    pub(crate) fn quiet(&self) -> bool {
        self.in_flight.load(Ordering::Relaxed) == 0 && self.open.load(Ordering::Relaxed) == 0
    }

    /// Whether a response body has waited for the client's window since
    /// `at` (coarse-clock ms) or before, without being asked for a frame.
    pub(crate) fn stuck_since(&self, at: u64) -> bool {
        self.oldest_send().is_some_and(|since| since <= at)
    }

    /// Since when the longest-waiting response body has waited (ms).
    fn oldest_send(&self) -> Option<u64> {
        let sending = self.sending.lock().unwrap_or_else(|p| p.into_inner());
        sending
            .iter()
            .filter_map(Weak::upgrade)
            .map(|clock| clock.0.load(Ordering::Relaxed))
            .filter(|&since| since != 0)
            .min()
    }

    pub(crate) fn on_read(&self) {
        let now = now_ms();
        self.last_io.store(now, Ordering::Relaxed);
        if self.in_flight.load(Ordering::Relaxed) == 0
            && self.head_started.load(Ordering::Relaxed) == 0
        {
            self.head_started.store(now, Ordering::Relaxed);
        }
    }

    pub(crate) fn on_write(&self) {
        let now = now_ms();
        self.last_io.store(now, Ordering::Relaxed);
        self.last_write.store(now, Ordering::Relaxed);
    }

    /// A request head arrived; `multiplexed` for HTTP/2, where bytes between
    /// requests (pings, window updates) do not start a head.
    pub(crate) fn request_started(&self, multiplexed: bool) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.head_started.store(0, Ordering::Relaxed);
        if multiplexed {
            self.multiplexed.store(true, Ordering::Relaxed);
        }
    }

    /// A response body (or a tunnel) starts: the connection is busy until
    /// [`closed`](Self::closed).
    pub(crate) fn opened(&self) {
        self.open.fetch_add(1, Ordering::Relaxed);
    }

    /// A request's response head is ready: the request is no longer in
    /// flight, its body is open (idle time starts when the body ends).
    pub(crate) fn response_ready(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.open.fetch_add(1, Ordering::Relaxed);
    }

    /// A response body was sent whole or dropped, or a tunnel ended: idle
    /// time counts from now.
    pub(crate) fn closed(&self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
        self.last_io.store(now_ms(), Ordering::Relaxed);
    }

    pub(crate) fn request_finished(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.last_io.store(now_ms(), Ordering::Relaxed);
    }

    /// `None` when no byte has moved either way for `idle`; else when that
    /// will be, if nothing moves meanwhile. For tunnels, which have no
    /// requests: only the last read or write counts.
    pub(crate) fn silent_at(&self, idle: Duration) -> Option<Instant> {
        let now = now_ms();
        let deadline = self
            .last_io
            .load(Ordering::Relaxed)
            .saturating_add(millis(idle));
        (now < deadline).then(|| later(Instant::now(), Duration::from_millis(deadline - now)))
    }

    /// A busy connection: [`Verdict::Wait`] until `check`, unless it is an
    /// HTTP/2 connection that has written nothing for `send_timeout` while a
    /// response body has waited that long to be asked for its next frame (a
    /// client that opens no flow-control window). A stream stalled beside
    /// streams that move is the client's choice and is left alone.
    fn unless_unread(
        &self,
        limits: &Limits,
        now: u64,
        check: Instant,
        at: impl Fn(u64) -> Instant,
    ) -> Verdict {
        if self.multiplexed.load(Ordering::Relaxed)
            && let Some(since) = self.oldest_send()
        {
            let wrote = self.last_write.load(Ordering::Relaxed);
            let deadline = since.max(wrote).saturating_add(millis(limits.send_timeout));
            if now >= deadline {
                return Verdict::Unread;
            }
            return Verdict::Wait(check.min(at(deadline)));
        }
        Verdict::Wait(check)
    }

    pub(crate) fn verdict(&self, limits: &Limits) -> Verdict {
        let now_instant = Instant::now();
        let now = now_ms();
        let at = |deadline_ms: u64| {
            later(
                now_instant,
                Duration::from_millis(deadline_ms.saturating_sub(now)),
            )
        };
        // No check is further away than the shorter timeout: what changes
        // between checks (a first request answered, the first byte of a head
        // after an idle spell) wakes no one, so a check scheduled for the
        // other timeout would let it run late by up to the longer one.
        let latest = later(
            now_instant,
            limits.keepalive_timeout.min(limits.header_read_timeout),
        );
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            return self.unless_unread(limits, now, latest, at);
        }
        let head = self.head_started.load(Ordering::Relaxed);
        if head != 0 && !self.multiplexed.load(Ordering::Relaxed) {
            let deadline = head.saturating_add(millis(limits.header_read_timeout));
            return if now >= deadline {
                Verdict::HeadTimedOut
            } else {
                Verdict::Wait(at(deadline).min(latest))
            };
        }
        if self.open.load(Ordering::Relaxed) > 0 {
            return self.unless_unread(limits, now, latest, at);
        }
        let deadline = self
            .last_io
            .load(Ordering::Relaxed)
            .saturating_add(millis(limits.keepalive_timeout));
        if now >= deadline {
            Verdict::Idle
        } else {
            Verdict::Wait(at(deadline).min(latest))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silence_counts_from_the_last_byte_and_never_overflows() {
        let activity = Activity::new();
        assert!(activity.silent_at(Duration::from_secs(60)).is_some());
        assert!(
            activity.silent_at(Duration::MAX).is_some(),
            "capped, no panic"
        );
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(activity.silent_at(Duration::from_millis(5)), None);
        activity.on_write();
        assert!(activity.silent_at(Duration::from_millis(500)).is_some());
    }

    /// Sleeps past the 1 ms timeouts below on the coarse clock, which moves
    /// only at the kernel's tick (4 ms here) and, on a loaded machine, can
    /// lag a few ticks behind: 5 ms was once not enough under `cargo test`.
    fn past_a_tick() {
        std::thread::sleep(Duration::from_millis(20));
    }

    fn limits(head_ms: u64, idle_ms: u64) -> Limits {
        Limits {
            header_read_timeout: Duration::from_millis(head_ms),
            keepalive_timeout: Duration::from_millis(idle_ms),
            ..Limits::default()
        }
    }

    #[test]
    fn new_connection_owes_a_head() {
        let a = Activity::new();
        past_a_tick();
        assert_eq!(a.verdict(&limits(1, 10_000)), Verdict::HeadTimedOut);
    }

    #[test]
    fn idle_between_requests_uses_keepalive_timeout() {
        let a = Activity::new();
        a.request_started(false);
        a.request_finished();
        past_a_tick();
        assert!(matches!(a.verdict(&limits(1, 10_000)), Verdict::Wait(_)));
        assert_eq!(a.verdict(&limits(10_000, 1)), Verdict::Idle);
    }

    #[test]
    fn busy_connection_is_never_closed() {
        let a = Activity::new();
        a.request_started(false);
        past_a_tick();
        assert!(matches!(a.verdict(&limits(1, 1)), Verdict::Wait(_)));
    }

    #[test]
    fn an_h2_body_nobody_asks_for_ends_the_connection_at_send_timeout() {
        let a = Activity::new();
        let limits = Limits {
            send_timeout: Duration::from_millis(1),
            ..limits(10_000, 10_000)
        };
        a.request_started(true);
        a.request_finished();
        a.opened();
        let waiting = a.send_clock();
        let asked = a.send_clock();
        asked.asked();
        past_a_tick();
        assert_eq!(a.verdict(&limits), Verdict::Unread);
        // Asked for its next frame: waiting on its producer (a quiet stream), not the client.
        waiting.asked();
        assert!(matches!(a.verdict(&limits), Verdict::Wait(_)));
        waiting.handed();
        past_a_tick();
        assert_eq!(a.verdict(&limits), Verdict::Unread);
        // A write to the socket (another stream moving) is progress.
        a.on_write();
        assert!(matches!(a.verdict(&limits), Verdict::Wait(_)));
        past_a_tick();
        assert_eq!(a.verdict(&limits), Verdict::Unread);
        // A body that ended is forgotten.
        drop(waiting);
        assert!(matches!(a.verdict(&limits), Verdict::Wait(_)));
    }

    #[test]
    fn an_open_body_keeps_the_connection_busy() {
        let a = Activity::new();
        a.request_started(false);
        a.request_finished();
        a.opened();
        past_a_tick();
        assert!(matches!(a.verdict(&limits(10_000, 1)), Verdict::Wait(_)));
        a.closed();
        past_a_tick();
        assert_eq!(a.verdict(&limits(10_000, 1)), Verdict::Idle);
    }

    #[test]
    fn bytes_of_a_new_head_start_the_header_clock() {
        let a = Activity::new();
        a.request_started(false);
        a.request_finished();
        a.on_read();
        past_a_tick();
        assert_eq!(a.verdict(&limits(1, 10_000)), Verdict::HeadTimedOut);
    }
}
