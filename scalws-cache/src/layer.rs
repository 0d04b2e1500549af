//! The tower layer: wraps a service (the origin) in a [`CacheService`].

use std::sync::Arc;

use crate::cache::Shared;
use crate::service::CacheService;

/// Wraps a service in a [`CacheService`] over one [`Cache`](crate::Cache).
/// Made by [`Cache::layer`](crate::Cache::layer) or
/// [`Cache::layer_for`](crate::Cache::layer_for).
#[derive(Clone)]
pub struct CacheLayer {
    shared: Arc<Shared>,
    partition: Arc<str>,
}

impl CacheLayer {
    pub(crate) fn new(shared: Arc<Shared>, partition: Arc<str>) -> Self {
        Self { shared, partition }
    }
}

impl<S> tower::Layer<S> for CacheLayer {
    type Service = CacheService<S>;

    fn layer(&self, inner: S) -> CacheService<S> {
        CacheService::new(inner, Arc::clone(&self.shared), Arc::clone(&self.partition))
    }
}

impl std::fmt::Debug for CacheLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheLayer")
            .field("partition", &self.partition)
            .finish_non_exhaustive()
    }
}
