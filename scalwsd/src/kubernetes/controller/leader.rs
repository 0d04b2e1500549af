//! Leader election on a `coordination.k8s.io/v1` Lease: every replica
//! serves, only the holder writes status. The holder renews every few
//! seconds; a Lease not renewed for its duration is taken over.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, PostParams};

/// How long a holder's claim lasts without renewal.
pub(crate) const LEASE_SECONDS: i32 = 15;
/// How often the holder renews, and others look.
const RETRY: Duration = Duration::from_secs(2);
/// How long one round (read and write of the Lease) may take: with `RETRY`
/// well inside `LEASE_SECONDS`, a holder that cannot renew stops writing
/// status before its claim lapses.
const ROUND: Duration = Duration::from_secs(5);

/// Whether this replica holds the Lease, as last seen.
#[derive(Clone, Default)]
pub(crate) struct Leadership(Arc<AtomicBool>);

impl Leadership {
    pub(crate) fn is_leader(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Runs the election forever: `namespace/name` is the Lease, `identity` this replica.
pub(crate) fn start(
    client: Client,
    namespace: String,
    name: String,
    identity: String,
) -> Leadership {
    let leadership = Leadership::default();
    let flag = leadership.0.clone();
    tokio::spawn(async move {
        let api: Api<Lease> = Api::namespaced(client, &namespace);
        loop {
            // Bounded: a round that hangs must not leave the flag saying we
            // lead after the claim has lapsed and another replica took over.
            let held = match tokio::time::timeout(ROUND, try_hold(&api, &name, &identity)).await {
                Ok(Ok(held)) => held,
                Ok(Err(error)) => {
                    tracing::debug!(%error, "lease: cannot reach the API server");
                    // Without a renewal we may not be the holder any more.
                    false
                }
                Err(_) => {
                    tracing::debug!("lease: the API server did not answer in time");
                    false
                }
            };
            if flag.swap(held, Ordering::Relaxed) != held {
                if held {
                    tracing::info!(lease = %name, "leader: this replica writes status");
                } else {
                    tracing::info!(lease = %name, "not the leader: another replica writes status");
                }
            }
            tokio::time::sleep(RETRY).await;
        }
    });
    leadership
}

/// One round: create, renew, take over an expired Lease, or see another's.
async fn try_hold(api: &Api<Lease>, name: &str, identity: &str) -> Result<bool, kube::Error> {
    let now = Timestamp::now();
    let existing = api.get_opt(name).await?;
    let Some(mut lease) = existing else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(claim(identity, now, None)),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            // Another replica created it first.
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        };
    };
    let spec = lease.spec.clone().unwrap_or_default();
    // An empty holder is a released Lease.
    let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty());
    let expired = spec.renew_time.as_ref().is_none_or(|renewed| {
        let duration = i64::from(spec.lease_duration_seconds.unwrap_or(LEASE_SECONDS));
        renewed
            .0
            .saturating_add(SignedDuration::from_secs(duration))
            .is_ok_and(|until| until < now)
    });
    if holder != Some(identity) && !expired && holder.is_some() {
        return Ok(false);
    }
    let acquired = if holder == Some(identity) {
        spec.acquire_time.clone()
    } else {
        None
    };
    let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(holder != Some(identity));
    let mut next = claim(identity, now, acquired);
    next.lease_transitions = Some(transitions);
    lease.spec = Some(next);
    // The resourceVersion we read makes this a compare-and-swap: of two
    // replicas taking over at once, one gets 409.
    match api.replace(name, &PostParams::default(), &lease).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

fn claim(identity: &str, now: Timestamp, acquired: Option<MicroTime>) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(identity.to_owned()),
        lease_duration_seconds: Some(LEASE_SECONDS),
        acquire_time: Some(acquired.unwrap_or(MicroTime(now))),
        renew_time: Some(MicroTime(now)),
        ..LeaseSpec::default()
    }
}
