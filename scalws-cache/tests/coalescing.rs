//! Concurrent misses for one key make one upstream request.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use scalws_cache::CacheOptions;
use support::{Harness, reply};

async fn slow(delay_ms: u64, cache_control: &'static str, options: CacheOptions) -> Harness {
    Harness::start(options, move |_req| async move {
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        reply(200, &[("cache-control", cache_control)], "slow body")
    })
    .await
}

#[tokio::test]
async fn fifty_concurrent_misses_make_one_upstream_request() {
    let h = slow(200, "max-age=60", CacheOptions::default()).await;
    let replies = join_all((0..50).map(|_| h.get("/cold"))).await;
    assert!(
        replies
            .iter()
            .all(|r| r.status == 200 && r.text() == "slow body")
    );
    assert_eq!(h.upstream_hits(), 1);
    let stats = h.stats();
    assert_eq!((stats.misses, stats.hits, stats.stores), (1, 49, 1));
}

#[tokio::test]
async fn a_follower_gives_up_on_a_slow_leader_after_the_timeout() {
    let options = CacheOptions {
        coalesce_timeout: Duration::from_millis(50),
        ..CacheOptions::default()
    };
    let h = slow(300, "max-age=60", options).await;
    let leader = h.get("/cold");
    let follower = async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        h.get("/cold").await
    };
    let (a, b) = tokio::join!(leader, follower);
    assert_eq!((a.text(), b.text()), ("slow body", "slow body"));
    assert_eq!(h.upstream_hits(), 2);
}

#[tokio::test]
async fn when_the_leader_cannot_store_followers_go_at_once() {
    let h = slow(100, "no-store", CacheOptions::default()).await;
    let start = Instant::now();
    let replies = join_all((0..10).map(|_| h.get("/cold"))).await;
    assert!(replies.iter().all(|r| r.text() == "slow body"));
    assert_eq!(h.upstream_hits(), 10);
    // Not the 5 s coalesce_timeout: the leader's outcome released them.
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
}
