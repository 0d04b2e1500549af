//! The `upstreams:` section and `proxy:` targets: from the file to [`UpstreamPool`]s.

use std::collections::{BTreeMap, HashMap};
use std::net::{SocketAddr, ToSocketAddrs};
use std::num::NonZeroU32;
use std::path::Path;

use http::HeaderName;
use scalws_proxy::upstream::{
    Balance, HealthCheck, Passive, Protocol, TlsOptions, UpstreamOptions, UpstreamPool,
};
use serde_saphyr::Spanned;

use super::error::{Errors, did_you_mean};
use super::schema::{AddressFile, UpstreamFile};

/// Every pool of the file, by name, plus pools made for `proxy: host:port`.
pub(crate) struct Upstreams {
    named: HashMap<String, UpstreamPool>,
    /// The pools of the configuration loaded before, to keep those whose
    /// definition has not changed (with their connections and health state).
    previous: Pools,
    /// Every pool this configuration uses, with its definition, for the next.
    pub(crate) pools: Pools,
    /// Names that failed to build: routes naming them are not reported twice.
    broken: Vec<String>,
    inline: HashMap<SocketAddr, UpstreamPool>,
}

impl Upstreams {
    pub(crate) fn compile(
        file: &BTreeMap<String, Spanned<UpstreamFile>>,
        base_dir: &Path,
        previous: &Pools,
        errors: &mut Errors,
    ) -> Self {
        let mut upstreams = Self {
            named: HashMap::new(),
            broken: Vec::new(),
            inline: HashMap::new(),
            previous: previous.clone(),
            pools: Pools::default(),
        };
        for (name, upstream) in file {
            let pool = compile_one(name, upstream, base_dir, errors)
                .and_then(|options| upstreams.pool(name, options, &upstream.referenced, errors));
            match pool {
                Some(pool) => {
                    upstreams.named.insert(name.clone(), pool);
                }
                None => upstreams.broken.push(name.clone()),
            }
        }
        upstreams
    }

    /// The pool for `options`: the previous configuration's when it had the
    /// same definition under the same name, else a new one.
    fn pool(
        &mut self,
        name: &str,
        options: UpstreamOptions,
        at: &serde_saphyr::Location,
        errors: &mut Errors,
    ) -> Option<UpstreamPool> {
        let definition = Definition::of(options.clone());
        let built = match self.previous.0.get(name) {
            Some((old, pool)) if *old == definition => Ok(pool.clone()),
            // Only the addresses changed: the addresses that remain keep
            // their connections.
            Some((old, pool)) if old.same_but_addresses(&definition) => {
                UpstreamPool::new_after(name, options, pool)
            }
            _ => UpstreamPool::new(name, options),
        };
        let pool = match built {
            Ok(pool) => pool,
            Err(error) => {
                errors.at(at, format!("upstreams.{name}"), error.to_string());
                return None;
            }
        };
        self.pools
            .0
            .insert(name.to_owned(), (definition, pool.clone()));
        Some(pool)
    }

    /// The pool a `proxy:` value names: an upstream, or `host:port` for a one-address pool.
    pub(crate) fn resolve(
        &mut self,
        path: &str,
        target: &Spanned<String>,
        errors: &mut Errors,
    ) -> Option<UpstreamPool> {
        let name = target.value.as_str();
        if let Some(pool) = self.named.get(name) {
            return Some(pool.clone());
        }
        if self.broken.iter().any(|b| b == name) {
            return None;
        }
        if name.contains(':') {
            let address = match resolve_address(name) {
                Ok(address) => address,
                Err(reason) => {
                    errors.at(&target.referenced, path, reason);
                    return None;
                }
            };
            if let Some(pool) = self.inline.get(&address) {
                return Some(pool.clone());
            }
            let options = UpstreamOptions {
                addresses: vec![(address, 1)],
                ..UpstreamOptions::default()
            };
            let pool = self.pool(name, options, &target.referenced, errors)?;
            self.inline.insert(address, pool.clone());
            return Some(pool);
        }
        let known: Vec<&str> = self
            .named
            .keys()
            .chain(self.broken.iter())
            .map(String::as_str)
            .collect();
        let hint = did_you_mean(name, known);
        errors.at(
            &target.referenced,
            path,
            format!(
                "unknown upstream \"{name}\"{hint}; name one under upstreams, or give host:port"
            ),
        );
        None
    }
}

/// `IP:PORT`, or `name:port` resolved once, at load.
fn resolve_address(text: &str) -> Result<SocketAddr, String> {
    if let Ok(address) = text.parse() {
        return Ok(address);
    }
    match text.to_socket_addrs() {
        Ok(mut found) => found
            .next()
            .ok_or_else(|| format!("\"{text}\" resolves to no address")),
        Err(error) => Err(format!(
            "invalid address \"{text}\": {error} (expected IP:PORT or host:port)"
        )),
    }
}

fn compile_one(
    name: &str,
    upstream: &Spanned<UpstreamFile>,
    base_dir: &Path,
    errors: &mut Errors,
) -> Option<UpstreamOptions> {
    let u = &upstream.value;
    let before = errors.len();
    let at = |key: &str| format!("upstreams.{name}.{key}");
    let defaults = UpstreamOptions::default();

    let mut addresses = Vec::new();
    if u.addresses.value.is_empty() {
        errors.at(
            &u.addresses.referenced,
            at("addresses"),
            "needs at least one address",
        );
    }
    for (i, entry) in u.addresses.value.iter().enumerate() {
        let (text, weight) = match &entry.value {
            AddressFile::Plain(text) => (text.as_str(), 1),
            AddressFile::Weighted(w) => (w.address.as_str(), w.weight),
        };
        match resolve_address(text) {
            Ok(address) => addresses.push((address, weight)),
            Err(reason) => errors.at(&entry.referenced, at(&format!("addresses[{i}]")), reason),
        }
    }
    if !addresses.is_empty() && addresses.iter().all(|(_, w)| *w == 0) {
        errors.at(
            &u.addresses.referenced,
            at("addresses"),
            "every address has weight 0: none could ever be chosen",
        );
    }

    let balance = match u.balance.as_ref().map(|b| b.value.as_str()) {
        None | Some("round_robin") => Balance::RoundRobin,
        Some("least_requests") => Balance::LeastRequests,
        Some("random_two") => Balance::RandomTwo,
        Some("ip_hash") => Balance::IpHash,
        Some("header_hash") => match &u.hash_header {
            Some(header) => match HeaderName::from_bytes(header.value.as_bytes()) {
                Ok(header) => Balance::HeaderHash(header),
                Err(_) => {
                    errors.at(
                        &header.referenced,
                        at("hash_header"),
                        format!("invalid header name \"{}\"", header.value),
                    );
                    Balance::RoundRobin
                }
            },
            None => {
                let b = u
                    .balance
                    .as_ref()
                    .map_or(upstream.referenced, |b| b.referenced);
                errors.at(
                    &b,
                    at("balance"),
                    "header_hash needs hash_header: the header whose value picks the address",
                );
                Balance::RoundRobin
            }
        },
        Some(other) => {
            let options = [
                "round_robin",
                "least_requests",
                "random_two",
                "ip_hash",
                "header_hash",
            ];
            let hint = did_you_mean(other, options);
            let b = u
                .balance
                .as_ref()
                .map_or(upstream.referenced, |b| b.referenced);
            errors.at(
                &b,
                at("balance"),
                format!(
                    "unknown balance \"{other}\"{hint}; expected one of {}",
                    options.join(", ")
                ),
            );
            Balance::RoundRobin
        }
    };

    let protocol = match u.protocol.as_ref().map(|p| p.value.as_str()) {
        None | Some("http1") => Protocol::Http1,
        Some("http2") => Protocol::Http2,
        Some("https") => Protocol::Https,
        Some(other) => {
            let hint = did_you_mean(other, ["http1", "http2", "https"]);
            let p = u
                .protocol
                .as_ref()
                .map_or(upstream.referenced, |p| p.referenced);
            errors.at(
                &p,
                at("protocol"),
                format!("unknown protocol \"{other}\"{hint}; expected http1, http2 or https"),
            );
            Protocol::Http1
        }
    };

    let mut tls = TlsOptions::default();
    if let Some(t) = &u.tls {
        if !matches!(protocol, Protocol::Https) {
            let anchor = t
                .sni
                .as_ref()
                .or(t.ca.as_ref())
                .map_or(upstream.referenced, |v| v.referenced);
            errors.at(&anchor, at("tls"), "tls applies only to protocol: https");
        }
        tls.sni = t.sni.as_ref().map(|s| s.value.clone());
        if let Some(ca) = &t.ca {
            let path = base_dir.join(&ca.value);
            if let Err(error) = std::fs::metadata(&path) {
                errors.at(
                    &ca.referenced,
                    at("tls.ca"),
                    format!("cannot read {}: {error}", path.display()),
                );
            }
            tls.ca = Some(path);
        }
        tls.verify = t.verify.unwrap_or(true);
    }

    let duration = |value: &Option<Spanned<super::units::DurationValue>>, default| {
        value.as_ref().map_or(default, |v| v.value.0)
    };
    let mut options = UpstreamOptions {
        addresses,
        balance,
        protocol,
        tls,
        connect_timeout: duration(&u.connect_timeout, defaults.connect_timeout),
        request_timeout: duration(&u.request_timeout, defaults.request_timeout),
        idle_timeout: duration(&u.idle_timeout, defaults.idle_timeout),
        max_idle_per_address: u
            .max_idle_per_address
            .as_ref()
            .map_or(defaults.max_idle_per_address, |v| v.value),
        retries: u.retries.as_ref().map_or(defaults.retries, |v| v.value),
        health_check: None,
        passive: defaults.passive.clone(),
    };
    for (value, key) in [
        (&u.connect_timeout, "connect_timeout"),
        (&u.request_timeout, "request_timeout"),
    ] {
        if let Some(v) = value
            && v.value.0.is_zero()
        {
            errors.at(&v.referenced, at(key), "must be more than 0s");
        }
    }
    if let Some(r) = &u.retries
        && r.value > 10
    {
        errors.at(&r.referenced, at("retries"), "must be at most 10");
    }

    if let Some(h) = &u.health_check {
        if !h.path.value.starts_with('/') {
            errors.at(
                &h.path.referenced,
                at("health_check.path"),
                "must start with \"/\"",
            );
        }
        let count = |value: &Option<Spanned<u32>>, default: u32, key: &str, errors: &mut Errors| {
            match value {
                None => NonZeroU32::new(default),
                Some(v) => NonZeroU32::new(v.value).or_else(|| {
                    errors.at(
                        &v.referenced,
                        at(&format!("health_check.{key}")),
                        "must be at least 1",
                    );
                    None
                }),
            }
        };
        let unhealthy_after = count(&h.unhealthy_after, 3, "unhealthy_after", errors);
        let healthy_after = count(&h.healthy_after, 2, "healthy_after", errors);
        let interval = duration(&h.interval, std::time::Duration::from_secs(5));
        if interval.is_zero() {
            errors.at(
                &h.path.referenced,
                at("health_check.interval"),
                "must be more than 0s",
            );
        }
        if let (Some(unhealthy_after), Some(healthy_after)) = (unhealthy_after, healthy_after) {
            options.health_check = Some(HealthCheck {
                path: h.path.value.clone(),
                interval,
                timeout: duration(&h.timeout, std::time::Duration::from_secs(1)),
                unhealthy_after,
                healthy_after,
            });
        }
    }
    if let Some(p) = &u.passive {
        let failures = match &p.failures {
            None => NonZeroU32::new(5),
            Some(v) => NonZeroU32::new(v.value).or_else(|| {
                errors.at(&v.referenced, at("passive.failures"), "must be at least 1");
                None
            }),
        };
        options.passive = failures.map(|failures| Passive {
            failures,
            cooldown: duration(&p.cooldown, std::time::Duration::from_secs(10)),
        });
    }

    (errors.len() == before).then_some(options)
}

/// Upstream pools by name (`host:port` for inline ones) with the definition
/// each was built from: what a reload compares to keep a pool.
#[derive(Clone, Debug, Default)]
pub(crate) struct Pools(HashMap<String, (Definition, UpstreamPool)>);

/// What a pool is built from: its options, and the contents of its `tls.ca`
/// file, read again at each load, so that a CA file replaced in place (same
/// path) makes a new pool that trusts the new certificates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Definition {
    options: UpstreamOptions,
    ca: Option<Vec<u8>>,
}

impl Definition {
    /// Equal in everything but the address list.
    fn same_but_addresses(&self, other: &Definition) -> bool {
        let mut mine = self.options.clone();
        mine.addresses.clone_from(&other.options.addresses);
        mine == other.options && self.ca == other.ca
    }

    fn of(options: UpstreamOptions) -> Self {
        // Unreadable now: `None`, which differs from the bytes read when the
        // pool was built, so a new pool is tried and reports the error.
        let ca = options
            .tls
            .ca
            .as_ref()
            .and_then(|path| std::fs::read(path).ok());
        Self { options, ca }
    }
}

impl Pools {
    /// Every pool with its name.
    #[cfg(any(feature = "binary", all(test, feature = "tls")))]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &UpstreamPool)> {
        self.0.iter().map(|(name, (_, pool))| (name.as_str(), pool))
    }
}

#[cfg(all(test, feature = "tls"))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::path::Path;

    use test_support::tls::TestCa;

    use super::super::{Carried, load_after};
    use super::*;

    fn load(dir: &Path, previous: &Carried) -> Carried {
        let yaml = r#"
listeners: [{ name: http, address: "127.0.0.1:0" }]
upstreams:
  secure:
    addresses: ["127.0.0.1:9"]
    protocol: https
    tls: { ca: ca.pem, sni: a.test }
  plain: { addresses: ["127.0.0.1:9"] }
applications:
  - name: site
    domains: ["*"]
    routes:
      - { path: /s, proxy: secure }
      - { path: /, proxy: plain }
"#;
        load_after("test.yaml", yaml, dir, previous)
            .unwrap()
            .carried
    }

    fn pool<'a>(carried: &'a Carried, name: &str) -> &'a UpstreamPool {
        carried.pools.iter().find(|(n, _)| *n == name).unwrap().1
    }

    #[test]
    fn a_ca_file_replaced_in_place_makes_a_new_pool() {
        let dir = tempfile::tempdir().unwrap();
        let ca_path = dir.path().join("ca.pem");
        std::fs::write(&ca_path, TestCa::new().pem()).unwrap();
        let first = load(dir.path(), &Carried::default());

        let again = load(dir.path(), &first);
        assert!(pool(&again, "secure").same_pool(pool(&first, "secure")));
        assert!(pool(&again, "plain").same_pool(pool(&first, "plain")));

        // Same path, new contents: the https pool is made anew; the other is kept.
        std::fs::write(&ca_path, TestCa::new().pem()).unwrap();
        let renewed = load(dir.path(), &again);
        assert!(!pool(&renewed, "secure").same_pool(pool(&again, "secure")));
        assert!(pool(&renewed, "plain").same_pool(pool(&again, "plain")));
    }
}
