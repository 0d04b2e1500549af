//! Request coalescing: concurrent misses for one key make one trip to
//! where the answer comes from (the origin for the response cache, the disk
//! for `static` routes).
//!
//! The first request for a key that must make the trip becomes the leader of
//! a flight; the others follow: they wait (up to a timeout of the caller's)
//! for the leader's outcome. `Stored`: they answer from memory. `NotStored`
//! (nothing kept, an error, the leader's client gone) or the timeout: each
//! makes the trip itself. The map of flights is touched only by misses,
//! never by hits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

/// How long a follower waits for its leader by default before it makes the
/// trip itself: the response cache's `coalesce_timeout` unless configured,
/// and always for `static` routes' reads.
pub const FOLLOW_TIMEOUT: Duration = Duration::from_secs(5);

/// How a flight ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The leader has not finished.
    Pending,
    /// The leader stored (or found) a response for the key.
    Stored,
    /// Nothing was stored; followers go to the origin themselves.
    NotStored,
}

/// The flights in progress, by primary key.
#[derive(Debug, Default)]
pub struct Flights {
    map: Mutex<HashMap<String, watch::Sender<Outcome>>>,
}

/// What a request that must go to the origin does.
#[derive(Debug)]
pub enum Role {
    /// Go, and report the outcome through the guard.
    Leader(FlightGuard),
    /// Wait for the leader.
    Follower(Waiter),
}

impl Flights {
    /// Joins the flight for `key`, leading it if there is none.
    pub fn join(self: &Arc<Self>, key: &str) -> Role {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(leader) = map.get(key) {
            return Role::Follower(Waiter(leader.subscribe()));
        }
        map.insert(key.to_owned(), watch::Sender::new(Outcome::Pending));
        Role::Leader(FlightGuard {
            flights: Arc::clone(self),
            key: key.to_owned(),
            outcome: Outcome::NotStored,
        })
    }

    fn land(&self, key: &str, outcome: Outcome) {
        let leader = self
            .map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
        // Out of the map first, so woken followers that go on find no flight.
        if let Some(leader) = leader {
            leader.send_replace(outcome);
        }
    }
}

/// The leader's end of a flight: dropping it without [`FlightGuard::finish`]
/// tells the followers nothing was stored.
#[derive(Debug)]
pub struct FlightGuard {
    flights: Arc<Flights>,
    key: String,
    outcome: Outcome,
}

impl FlightGuard {
    /// Ends the flight with `outcome`.
    pub fn finish(mut self, outcome: Outcome) {
        self.outcome = outcome;
    }
}

impl Drop for FlightGuard {
    fn drop(&mut self) {
        self.flights.land(&self.key, self.outcome);
    }
}

/// A follower's end of a flight.
#[derive(Debug)]
pub struct Waiter(watch::Receiver<Outcome>);

impl Waiter {
    /// The flight's outcome, or `NotStored` if it takes longer than `timeout`.
    pub async fn wait(mut self, timeout: Duration) -> Outcome {
        let landed = self.0.wait_for(|o| *o != Outcome::Pending);
        match tokio::time::timeout(timeout, landed).await {
            Ok(Ok(outcome)) => *outcome,
            Ok(Err(_)) | Err(_) => Outcome::NotStored,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn followers_learn_the_outcome_and_the_flight_ends() {
        let flights = Arc::new(Flights::default());
        let Role::Leader(guard) = flights.join("k") else {
            panic!("first is the leader")
        };
        let Role::Follower(waiter) = flights.join("k") else {
            panic!("second follows")
        };
        guard.finish(Outcome::Stored);
        assert_eq!(waiter.wait(Duration::from_secs(1)).await, Outcome::Stored);
        assert!(matches!(flights.join("k"), Role::Leader(_)));
    }

    #[tokio::test]
    async fn a_dropped_leader_means_not_stored_and_slow_leaders_time_out() {
        let flights = Arc::new(Flights::default());
        let leader = flights.join("k");
        let Role::Follower(waiter) = flights.join("k") else {
            panic!("second follows")
        };
        assert_eq!(
            waiter.wait(Duration::from_millis(10)).await,
            Outcome::NotStored
        );
        let Role::Follower(waiter) = flights.join("k") else {
            panic!("still in flight")
        };
        drop(leader);
        assert_eq!(
            waiter.wait(Duration::from_secs(1)).await,
            Outcome::NotStored
        );
    }
}
