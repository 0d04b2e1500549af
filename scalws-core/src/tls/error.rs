//! What can go wrong loading a certificate and its key.

use std::fmt;
use std::path::{Path, PathBuf};

/// Which of a pair's two files an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsFile {
    /// The PEM certificate chain.
    Certificate,
    /// The PEM private key.
    Key,
}

impl fmt::Display for TlsFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TlsFile::Certificate => "certificate",
            TlsFile::Key => "key",
        })
    }
}

/// Loading certificates failed; the message starts with the file it is about,
/// e.g. `certificate certs/site.pem: no certificate found`.
#[derive(Debug, thiserror::Error)]
pub enum TlsLoadError {
    /// The file could not be read.
    #[error("{file} {}: cannot read: {source}", path.display())]
    Unreadable {
        /// Certificate or key.
        file: TlsFile,
        /// The path as configured.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not well-formed PEM.
    #[error("{file} {}: invalid PEM: {source}", path.display())]
    InvalidPem {
        /// Certificate or key.
        file: TlsFile,
        /// The path as configured.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// The certificate file holds no `CERTIFICATE` block.
    #[error("certificate {}: no certificate found (expected a PEM \"CERTIFICATE\" block)", path.display())]
    NoCertificate {
        /// The path as configured.
        path: PathBuf,
    },
    /// The first certificate cannot be parsed as X.509.
    #[error("certificate {}: invalid certificate: {reason}", path.display())]
    InvalidCertificate {
        /// The path as configured.
        path: PathBuf,
        /// What the parser said.
        reason: String,
    },
    /// The key file holds no private key block.
    #[error("key {}: no private key found (expected a PEM \"PRIVATE KEY\", \"RSA PRIVATE KEY\" or \"EC PRIVATE KEY\" block)", path.display())]
    NoKey {
        /// The path as configured.
        path: PathBuf,
    },
    /// The private key is of a kind or size the TLS stack cannot sign with.
    #[error("key {}: unsupported private key (RSA 2048-8192 bits, ECDSA P-256/P-384 and Ed25519 are supported): {reason}", path.display())]
    UnsupportedKey {
        /// The path as configured.
        path: PathBuf,
        /// What rustls said.
        reason: String,
    },
    /// The private key is not the certificate's key.
    #[error("certificate {}: does not match key {}", cert.display(), key.display())]
    KeyMismatch {
        /// The certificate path.
        cert: PathBuf,
        /// The key path.
        key: PathBuf,
    },
    /// An HTTPS or HTTP/3 listener needs at least one certificate.
    #[error("no certificates given")]
    NoCertificates,
}

impl TlsLoadError {
    pub(super) fn unreadable(file: TlsFile, path: &Path, source: std::io::Error) -> Self {
        Self::Unreadable {
            file,
            path: path.to_owned(),
            source,
        }
    }

    pub(super) fn invalid_pem(
        file: TlsFile,
        path: &Path,
        source: rustls_pki_types::pem::Error,
    ) -> Self {
        Self::InvalidPem {
            file,
            path: path.to_owned(),
            source,
        }
    }
}
