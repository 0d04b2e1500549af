//! TLS for listeners: certificates loaded from PEM files, chosen by SNI, and
//! swapped in place on reload.
//!
//! A [`TlsCertificates`] holds every certificate of a listener (the first is
//! the default, served when the client sends no SNI). A handshake whose SNI
//! no certificate names is refused, unless the store is told to serve the
//! default for it ([`UnknownServerName`]): on a listener shared by tenants
//! the default is one tenant's certificate. It is both the rustls certificate resolver of the listener's
//! [`server_config`](TlsCertificates::server_config) and what the gateway asks
//! whether a connection's certificate [`covers`](TlsCertificates::covers) the
//! host a request names.
//!
//! ```no_run
//! use scalws_core::tls::{CertificateFiles, TlsCertificates};
//!
//! # fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let certs = TlsCertificates::load(&[CertificateFiles {
//!     cert: "certs/site.pem".into(),
//!     key: "certs/site.key".into(),
//! }])?;
//! for warning in certs.warnings() {
//!     eprintln!("{warning}");
//! }
//! let tcp = certs.server_config(&[b"h2", b"http/1.1"]);
//! let quic = certs.server_config(&[b"h3"]);
//! # let _ = (tcp, quic);
//! # Ok(()) }
//! ```

mod error;
mod load;
mod resolver;
mod sni;

use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::sign::CertifiedKey;

pub use error::{TlsFile, TlsLoadError};
pub use load::CertificateFiles;

use sni::SniTable;

/// Reads a certificate or key file's bytes (see [`TlsCertificates::load_with`]).
pub type ReadFile<'a> = dyn Fn(&std::path::Path) -> std::io::Result<Vec<u8>> + 'a;

/// A listener's certificates, chosen by SNI; shared by its HTTPS and HTTP/3
/// listeners, and swappable in place on reload.
///
/// Cloning shares the store: a [`reload`](Self::reload) through any clone is
/// seen by all. Two values are equal when they share the store.
#[derive(Clone)]
pub struct TlsCertificates {
    current: Arc<ArcSwap<CertificateSet>>,
}

/// What a handshake gets whose server name (SNI) no certificate names.
///
/// A client that sends no server name at all (it connected to an IP address)
/// always gets the default certificate, the first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnknownServerName {
    /// The handshake fails (rustls sends an `access_denied` alert), as nginx's
    /// `ssl_reject_handshake` does: nobody is shown a certificate for names
    /// they did not ask for, which on a shared listener would be another
    /// tenant's and would list its names.
    #[default]
    Refuse,
    /// The default certificate (the first) is served, as when no name is sent.
    ServeDefault,
}

/// One generation of certificates, replaced whole on reload.
#[derive(Clone)]
struct CertificateSet {
    /// Non-empty; index 0 is the default.
    keys: Vec<Arc<CertifiedKey>>,
    table: SniTable,
    warnings: Vec<String>,
    unknown: UnknownServerName,
}

// === impl TlsCertificates ===

impl TlsCertificates {
    /// Loads every pair; the first is the default (served when SNI is absent).
    /// A server name no certificate names is refused; see
    /// [`set_unknown_server_name`](Self::set_unknown_server_name).
    ///
    /// A certificate that is expired or not yet valid is logged as an error
    /// (naming the file and its dates), kept in [`warnings`](Self::warnings),
    /// and served all the same. An unreadable file, a file without a
    /// certificate or key, an unsupported key, or a key that is not the
    /// certificate's is an error naming the file.
    pub fn load(files: &[CertificateFiles]) -> Result<Self, TlsLoadError> {
        Self::load_with(files, &|path| std::fs::read(path))
    }

    /// [`load`](Self::load), reading each file's bytes with `read`: a program
    /// that holds certificates in memory (from a Kubernetes Secret) names
    /// them by paths of its own and answers for those paths.
    pub fn load_with(
        files: &[CertificateFiles],
        read: &ReadFile<'_>,
    ) -> Result<Self, TlsLoadError> {
        let set = CertificateSet::load(files, read)?;
        Ok(Self {
            current: Arc::new(ArcSwap::from_pointee(set)),
        })
    }

    /// What a handshake whose server name no certificate names gets, from now
    /// on, in every clone of this store (the listeners serving it included):
    /// [`UnknownServerName::Refuse`] unless set here. Kept by
    /// [`reload`](Self::reload), carried by [`adopt`](Self::adopt).
    pub fn set_unknown_server_name(&self, policy: UnknownServerName) {
        let mut set = CertificateSet::clone(&self.current.load());
        set.unknown = policy;
        self.current.store(Arc::new(set));
    }

    /// Loads `files` and, if they all load, replaces the certificates at once
    /// for new handshakes; connections already open keep theirs. On error the
    /// old certificates stay in place.
    pub fn reload(&self, files: &[CertificateFiles]) -> Result<(), TlsLoadError> {
        let mut set = CertificateSet::load(files, &|path| std::fs::read(path))?;
        set.unknown = self.current.load().unknown;
        self.current.store(Arc::new(set));
        Ok(())
    }

    /// Makes this store serve what `other` holds now (a reload that loaded
    /// the files anew): configurations built from this store see the new
    /// certificates for new handshakes; connections already open keep theirs.
    pub fn adopt(&self, other: &TlsCertificates) {
        if !Arc::ptr_eq(&self.current, &other.current) {
            self.current.store(other.current.load_full());
        }
    }

    /// A rustls server configuration (TLS 1.2 and 1.3, ring) whose certificate
    /// resolver is this store, so a reload applies to it, offering `alpn`:
    /// `[b"h2", b"http/1.1"]` for TCP, `[b"h3"]` for QUIC.
    pub fn server_config(&self, alpn: &[&[u8]]) -> Arc<rustls::ServerConfig> {
        resolver::server_config(self.current.clone(), alpn)
    }

    /// Whether the certificate that `sni` selects (the default for `None`, or
    /// for an unknown name when that is served) covers `host`: an exact SAN name, or a wildcard SAN
    /// `*.suffix` with exactly one label in place of the `*`. Case-insensitive.
    pub fn covers(&self, sni: Option<&str>, host: &str) -> bool {
        self.current.load().table.covers(sni, host)
    }

    /// The SAN DNS names of each certificate, in load order, as written in
    /// the certificate (`a.example.com`, `*.example.com`).
    pub fn names(&self) -> Vec<Vec<String>> {
        let set = self.current.load();
        set.table.names().iter().map(|n| n.to_strings()).collect()
    }

    /// The validity problems found at the last successful load, one message
    /// per certificate, for `--check` output.
    pub fn warnings(&self) -> Vec<String> {
        self.current.load().warnings.clone()
    }
}

impl std::fmt::Debug for TlsCertificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsCertificates")
            .field("names", &self.names())
            .finish_non_exhaustive()
    }
}

impl PartialEq for TlsCertificates {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.current, &other.current)
    }
}

impl Eq for TlsCertificates {}

// === impl CertificateSet ===

impl CertificateSet {
    fn load(files: &[CertificateFiles], read: &ReadFile<'_>) -> Result<Self, TlsLoadError> {
        if files.is_empty() {
            return Err(TlsLoadError::NoCertificates);
        }
        let loaded = files
            .iter()
            .map(|pair| load::load(pair, read))
            .collect::<Result<Vec<_>, _>>()?;
        let mut keys = Vec::with_capacity(loaded.len());
        let mut names = Vec::with_capacity(loaded.len());
        let mut warnings = Vec::new();
        for pair in loaded {
            keys.push(pair.key);
            names.push(pair.names);
            if let Some(warning) = pair.warning {
                // Only now, so a set that fails to load logs nothing twice on retry.
                tracing::error!("{warning}");
                warnings.push(warning);
            }
        }
        Ok(Self {
            keys,
            table: SniTable::new(names),
            warnings,
            unknown: UnknownServerName::default(),
        })
    }

    /// `None` fails the handshake.
    fn key_for(&self, sni: Option<&str>) -> Option<Arc<CertifiedKey>> {
        let selected = self.table.select(sni);
        if sni.is_some() && !selected.by_name && self.unknown == UnknownServerName::Refuse {
            tracing::debug!(sni, "handshake refused: no certificate names it");
            return None;
        }
        self.keys.get(selected.index).cloned()
    }
}

impl std::fmt::Debug for CertificateSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateSet")
            .field("certificates", &self.keys.len())
            .field("table", &self.table)
            .field("unknown", &self.unknown)
            .finish_non_exhaustive()
    }
}
