//! # scalws-cache
//!
//! The home of ScalWS's response cache: an RFC 9111 shared cache as a tower
//! layer on moka, with request coalescing, revalidation and purge.
//!
//! **Not built yet.** This crate has no public items in this version; it is in
//! the workspace so the dependency direction of the design (cache below proxy,
//! beside the router) is fixed from the start. A configuration that asks for a
//! cache is rejected by `scalwsd` with a clear error until the cache lands.
#![forbid(unsafe_code)]
