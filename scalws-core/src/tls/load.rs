//! Reading one certificate chain and its key from PEM files, and checking them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rustls::InconsistentKeys;
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use x509_parser::extensions::GeneralName;

use super::ReadFile;
use super::error::{TlsFile, TlsLoadError};
use super::sni::Names;

/// A certificate chain and its private key, as PEM files.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CertificateFiles {
    /// The chain: the server's certificate first, then any intermediates.
    pub cert: PathBuf,
    /// The private key of the first certificate (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// One pair, ready to serve.
pub(super) struct Loaded {
    pub(super) key: Arc<CertifiedKey>,
    pub(super) names: Names,
    /// Expired or not yet valid: served anyway, but said loudly.
    pub(super) warning: Option<String>,
}

pub(super) fn load(files: &CertificateFiles, read: &ReadFile<'_>) -> Result<Loaded, TlsLoadError> {
    let chain = read_chain(&files.cert, read)?;
    let key = read_key(&files.key, read)?;
    let Some(leaf) = chain.first() else {
        return Err(TlsLoadError::NoCertificate {
            path: files.cert.clone(),
        });
    };
    let (names, warning) = inspect(&files.cert, leaf)?;
    let signing_key = rustls::crypto::ring::sign::any_supported_type(&key).map_err(|error| {
        TlsLoadError::UnsupportedKey {
            path: files.key.clone(),
            reason: error.to_string(),
        }
    })?;
    let key = CertifiedKey::new(chain, signing_key);
    match key.keys_match() {
        // Unknown: the key cannot tell its public half (not so with ring's keys).
        Ok(()) | Err(rustls::Error::InconsistentKeys(InconsistentKeys::Unknown)) => {}
        Err(rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => {
            return Err(TlsLoadError::KeyMismatch {
                cert: files.cert.clone(),
                key: files.key.clone(),
            });
        }
        Err(error) => {
            return Err(TlsLoadError::InvalidCertificate {
                path: files.cert.clone(),
                reason: error.to_string(),
            });
        }
    }
    if names.is_empty() {
        tracing::warn!(
            certificate = %files.cert.display(),
            "certificate has no DNS names in its subject alternative names; \
             it can only be served as the default"
        );
    }
    Ok(Loaded {
        key: Arc::new(key),
        names,
        warning,
    })
}

fn read_chain(
    path: &Path,
    read: &ReadFile<'_>,
) -> Result<Vec<CertificateDer<'static>>, TlsLoadError> {
    let pem = read_file(TlsFile::Certificate, path, read)?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| TlsLoadError::invalid_pem(TlsFile::Certificate, path, error))?;
    if chain.is_empty() {
        return Err(TlsLoadError::NoCertificate {
            path: path.to_owned(),
        });
    }
    Ok(chain)
}

fn read_key(path: &Path, read: &ReadFile<'_>) -> Result<PrivateKeyDer<'static>, TlsLoadError> {
    let pem = read_file(TlsFile::Key, path, read)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|error| match error {
        pem::Error::NoItemsFound => TlsLoadError::NoKey {
            path: path.to_owned(),
        },
        error => TlsLoadError::invalid_pem(TlsFile::Key, path, error),
    })
}

fn read_file(file: TlsFile, path: &Path, read: &ReadFile<'_>) -> Result<Vec<u8>, TlsLoadError> {
    read(path).map_err(|error| TlsLoadError::unreadable(file, path, error))
}

/// The leaf's SAN DNS names, and a warning when it is outside its validity.
fn inspect(
    path: &Path,
    leaf: &CertificateDer<'_>,
) -> Result<(Names, Option<String>), TlsLoadError> {
    let invalid = |reason: String| TlsLoadError::InvalidCertificate {
        path: path.to_owned(),
        reason,
    };
    let (_, cert) =
        x509_parser::parse_x509_certificate(leaf).map_err(|error| invalid(error.to_string()))?;
    let san = cert
        .subject_alternative_name()
        .map_err(|error| invalid(format!("subject alternative names: {error}")))?;
    let dns = san.iter().flat_map(|san| {
        san.value
            .general_names
            .iter()
            .filter_map(|name| match name {
                GeneralName::DNSName(dns) => Some(*dns),
                _ => None,
            })
    });
    let names = Names::new(dns);

    let validity = cert.validity();
    let (from, until) = (
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    );
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
        });
    let problem = if now > until {
        Some(format!("expired on {}", utc(until)))
    } else if now < from {
        Some(format!("not valid until {}", utc(from)))
    } else {
        None
    };
    let warning = problem.map(|problem| {
        format!(
            "certificate {}: {problem} (valid from {} to {}); serving it anyway",
            path.display(),
            utc(from),
            utc(until)
        )
    });
    Ok((names, warning))
}

/// Seconds since the epoch as `2024-01-31T12:00:00Z` (days-to-civil, proleptic Gregorian).
fn utc(timestamp: i64) -> String {
    let days = timestamp.div_euclid(86_400);
    let secs = timestamp.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_704_067_199), "2023-12-31T23:59:59Z");
        assert_eq!(utc(-1), "1969-12-31T23:59:59Z");
        assert_eq!(utc(253_402_300_799), "9999-12-31T23:59:59Z");
    }
}
