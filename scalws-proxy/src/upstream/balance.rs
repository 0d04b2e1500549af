//! Choosing an address: the five strategies, over the addresses a caller accepts.
//!
//! Everything that depends on the weights alone (the round-robin schedule, the
//! cumulative weights, the hash seeds) is computed at build; a choice reads
//! atomics and takes no lock.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use http::HeaderName;
use http::request::Parts;
use scalws_core::ConnInfo;

use super::Forwarding;
use super::endpoint::Endpoint;
use super::options::Balance;
use super::rendezvous;

/// Entries of the round-robin schedule at most (weights are scaled down past it).
const MAX_SCHEDULE: u64 = 4096;

/// Random picks tried before falling back to a scan of the accepted addresses.
const RANDOM_TRIES: usize = 4;

pub(crate) struct Balancer {
    strategy: Strategy,
    /// Smooth weighted round-robin order of endpoint indices (weight > 0 only).
    schedule: Box<[u32]>,
    cursor: AtomicUsize,
    /// Running sum of the weights, per endpoint: random pick by binary search.
    cumulative: Box<[u64]>,
    total_weight: u64,
    /// Per-endpoint rendezvous seeds.
    seeds: Box<[u64]>,
    /// Every non-zero weight is equal: rendezvous compares raw hashes.
    uniform: bool,
    /// The key is a field the proxy sets (`X-Forwarded-*`), decided at build.
    keys_on_forwarding: bool,
}

enum Strategy {
    RoundRobin,
    LeastRequests,
    RandomTwo,
    IpHash,
    HeaderHash(HeaderName),
}

impl Balancer {
    /// Builds for `endpoints`, at least one of which has a non-zero weight.
    pub(crate) fn new(balance: &Balance, endpoints: &[Endpoint]) -> Self {
        let strategy = match balance {
            Balance::RoundRobin => Strategy::RoundRobin,
            Balance::LeastRequests => Strategy::LeastRequests,
            Balance::RandomTwo => Strategy::RandomTwo,
            Balance::IpHash => Strategy::IpHash,
            Balance::HeaderHash(name) => Strategy::HeaderHash(name.clone()),
        };
        let weights: Vec<u32> = endpoints.iter().map(Endpoint::weight).collect();
        let mut total_weight = 0u64;
        let cumulative = weights
            .iter()
            .map(|&w| {
                total_weight += u64::from(w);
                total_weight
            })
            .collect();
        let mut nonzero = weights.iter().filter(|&&w| w > 0);
        let first = nonzero.next().copied().unwrap_or(0);
        let uniform = nonzero.all(|&w| w == first);
        let keys_on_forwarding =
            matches!(&strategy, Strategy::HeaderHash(name) if Forwarding::sets(name));
        Self {
            strategy,
            schedule: smooth_schedule(&weights),
            cursor: AtomicUsize::new(0),
            cumulative,
            total_weight,
            seeds: endpoints
                .iter()
                .map(|e| rendezvous::seed(e.address()))
                .collect(),
            uniform,
            keys_on_forwarding,
        }
    }

    /// The request's hash key, for the hash strategies (`None`: round robin).
    #[inline]
    pub(crate) fn key(&self, head: &Parts) -> Option<u64> {
        match &self.strategy {
            Strategy::IpHash => head
                .extensions
                .get::<ConnInfo>()
                .map(|info| rendezvous::hash_ip(info.peer().ip())),
            Strategy::HeaderHash(name) => head
                .headers
                .get(name)
                .map(|value| rendezvous::hash_bytes(value.as_bytes())),
            _ => None,
        }
    }

    /// Whether the key is a field the proxy sets (`X-Forwarded-*`), which
    /// must then be in the header map before [`Balancer::key`] reads it.
    #[inline]
    pub(crate) fn hashes_forwarding(&self) -> bool {
        self.keys_on_forwarding
    }

    /// An endpoint for which `accept` holds, or `None` when there is none.
    /// `accept` must refuse weight 0.
    #[inline]
    pub(crate) fn choose(
        &self,
        endpoints: &[Endpoint],
        key: Option<u64>,
        accept: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        match (&self.strategy, key) {
            (Strategy::IpHash | Strategy::HeaderHash(_), Some(key)) => {
                self.rendezvous(endpoints, key, accept)
            }
            (Strategy::LeastRequests, _) => self.least_requests(endpoints, accept),
            (Strategy::RandomTwo, _) => self.random_two(endpoints, accept),
            _ => self.round_robin(endpoints, accept),
        }
    }

    fn round_robin(&self, endpoints: &[Endpoint], accept: impl Fn(usize) -> bool) -> Option<usize> {
        let turn = self.cursor.fetch_add(1, Relaxed);
        let index = self.schedule[turn % self.schedule.len()] as usize;
        if accept(index) {
            return Some(index);
        }
        // Some address is left out: share its turns among the others by weight
        // rather than give them all to the next one in the schedule.
        self.weighted_among(endpoints, &accept, turn as u64)
    }

    fn least_requests(
        &self,
        endpoints: &[Endpoint],
        accept: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        // Start the scan at a rotating offset: ties go round robin.
        let start = self.cursor.fetch_add(1, Relaxed);
        let count = endpoints.len();
        let mut best: Option<usize> = None;
        for offset in 0..count {
            let index = (start.wrapping_add(offset)) % count;
            if !accept(index) {
                continue;
            }
            best = match best {
                Some(b) if !less_loaded(&endpoints[index], &endpoints[b]) => Some(b),
                _ => Some(index),
            };
        }
        best
    }

    fn random_two(&self, endpoints: &[Endpoint], accept: impl Fn(usize) -> bool) -> Option<usize> {
        let first = self.random_pick(endpoints, &accept)?;
        let second = self.random_pick(endpoints, &accept).unwrap_or(first);
        if less_loaded(&endpoints[second], &endpoints[first]) {
            Some(second)
        } else {
            Some(first)
        }
    }

    fn random_pick(
        &self,
        endpoints: &[Endpoint],
        accept: &impl Fn(usize) -> bool,
    ) -> Option<usize> {
        for _ in 0..RANDOM_TRIES {
            let point = fastrand::u64(..self.total_weight);
            let index = self.cumulative.partition_point(|&sum| sum <= point);
            if accept(index) {
                return Some(index);
            }
        }
        self.weighted_among(endpoints, accept, fastrand::u64(..))
    }

    fn rendezvous(
        &self,
        endpoints: &[Endpoint],
        key: u64,
        accept: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let accepted = (0..endpoints.len()).filter(|&i| accept(i));
        if self.uniform {
            accepted.max_by_key(|&i| rendezvous::score(key, self.seeds[i]))
        } else {
            accepted.max_by(|&a, &b| {
                let score = |i: usize| {
                    rendezvous::weighted_score(key, self.seeds[i], endpoints[i].weight())
                };
                score(a).total_cmp(&score(b))
            })
        }
    }

    /// The `point`-th unit of weight among the accepted endpoints (modulo their
    /// total weight): a weighted choice when some addresses are left out.
    #[cold]
    #[inline(never)]
    fn weighted_among(
        &self,
        endpoints: &[Endpoint],
        accept: &impl Fn(usize) -> bool,
        point: u64,
    ) -> Option<usize> {
        let total: u64 = (0..endpoints.len())
            .filter(|&i| accept(i))
            .map(|i| u64::from(endpoints[i].weight()))
            .sum();
        if total == 0 {
            return None;
        }
        let mut point = point % total;
        for (index, endpoint) in endpoints.iter().enumerate() {
            if !accept(index) {
                continue;
            }
            let weight = u64::from(endpoint.weight());
            if point < weight {
                return Some(index);
            }
            point -= weight;
        }
        None
    }
}

/// `a` has fewer requests in flight per unit of weight than `b`.
fn less_loaded(a: &Endpoint, b: &Endpoint) -> bool {
    // a.in_flight / a.weight < b.in_flight / b.weight, without division.
    let left = a.in_flight() as u128 * u128::from(b.weight());
    let right = b.in_flight() as u128 * u128::from(a.weight());
    left < right
}

/// The smooth weighted round-robin order (nginx's): each address appears as
/// often as its weight, spread out (3:1 gives a a b a, not a a a b). Weights
/// are divided by their GCD, and scaled down when their sum passes
/// [`MAX_SCHEDULE`] (every non-zero weight keeps at least one turn).
pub(crate) fn smooth_schedule(weights: &[u32]) -> Box<[u32]> {
    let divisor = weights
        .iter()
        .filter(|&&w| w > 0)
        .fold(0u64, |g, &w| gcd(g, u64::from(w)))
        .max(1);
    let mut reduced: Vec<u64> = weights.iter().map(|&w| u64::from(w) / divisor).collect();
    let nonzero = reduced.iter().filter(|&&w| w > 0).count() as u64;
    let limit = MAX_SCHEDULE.max(nonzero * 4);
    let sum: u64 = reduced.iter().sum();
    if sum > limit {
        for weight in reduced.iter_mut().filter(|w| **w > 0) {
            *weight = (*weight * limit / sum).max(1);
        }
    }
    let total: u64 = reduced.iter().sum();
    let mut current = vec![0i64; reduced.len()];
    let mut schedule = Vec::with_capacity(total as usize);
    for _ in 0..total {
        let mut best = 0;
        for (index, &weight) in reduced.iter().enumerate() {
            current[index] += weight as i64;
            if current[index] > current[best] {
                best = index;
            }
        }
        current[best] -= total as i64;
        schedule.push(best as u32);
    }
    schedule.into_boxed_slice()
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_spreads_weights() {
        assert_eq!(&*smooth_schedule(&[3, 1]), &[0, 0, 1, 0]);
        assert_eq!(&*smooth_schedule(&[1, 1]), &[0, 1]);
        assert_eq!(&*smooth_schedule(&[6, 2]), &[0, 0, 1, 0]);
    }

    #[test]
    fn schedule_never_holds_weight_zero() {
        let schedule = smooth_schedule(&[0, 2, 0, 1]);
        assert!(schedule.iter().all(|&i| i == 1 || i == 3), "{schedule:?}");
        assert_eq!(schedule.len(), 3);
    }

    #[test]
    fn huge_weights_are_scaled() {
        let schedule = smooth_schedule(&[1_000_000_000, 1]);
        assert!(schedule.len() as u64 <= MAX_SCHEDULE + 1);
        assert!(schedule.contains(&1));
    }
}
