//! TLS for IMAPS (port 993, RFC 8314 §3.2) and STARTTLS (RFC 9051 §6.2.1) with rustls on
//! the aws-lc-rs provider. rustls speaks TLS 1.2 and 1.3 only, so anything older is refused
//! by construction (RFC 8996).
//!
//! Certificates come from PEM files named in the config; [`TlsSource::reload`] re-reads
//! them (SIGHUP) and new connections use the new pair while open ones keep theirs.
//! [`write_self_signed`] makes the pair `maildex serve --dev` uses.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("{path}: {reason}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// rustls refused the pair (for example a key that does not match the certificate).
    #[error("certificate {cert} / key {key}: {reason}")]
    Config {
        /// Certificate file.
        cert: PathBuf,
        /// Key file.
        key: PathBuf,
        /// rustls's message.
        reason: String,
    },
    /// Writing a generated certificate failed.
    #[error("{path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// rcgen could not generate a certificate.
    #[error("generating a self-signed certificate: {0}")]
    Generate(String),
}

/// The certificate pair in use, reloadable.
pub struct TlsSource {
    cert: PathBuf,
    key: PathBuf,
    current: RwLock<Arc<ServerConfig>>,
}

impl TlsSource {
    /// Loads the pair and builds the rustls config.
    pub fn load(cert: &Path, key: &Path) -> Result<TlsSource, TlsError> {
        let config = build(cert, key)?;
        Ok(TlsSource {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            current: RwLock::new(config),
        })
    }

    /// The config for a new connection.
    pub fn config(&self) -> Arc<ServerConfig> {
        match self.current.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Re-reads the files; on error the old pair stays in use.
    pub fn reload(&self) -> Result<(), TlsError> {
        let config = build(&self.cert, &self.key)?;
        match self.current.write() {
            Ok(mut c) => *c = config,
            Err(poisoned) => *poisoned.into_inner() = config,
        }
        Ok(())
    }
}

fn build(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let pem_err = |path: &Path, reason: String| TlsError::Pem {
        path: path.to_path_buf(),
        reason,
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| pem_err(cert, e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| pem_err(cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(pem_err(cert, "no CERTIFICATE block".into()));
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| pem_err(key, e.to_string()))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key_der))
        .map_err(|e| TlsError::Config {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            reason: e.to_string(),
        })?;
    // RFC 9051 §... / IANA ALPN registry: "imap"; clients that send no ALPN are served too
    config.alpn_protocols = vec![b"imap".to_vec()];
    Ok(Arc::new(config))
}

/// Writes a self-signed certificate for `names` (e.g. `localhost`, `127.0.0.1`) to `cert`
/// and its key to `key` (mode 0600), as `maildex serve --dev` needs.
pub fn write_self_signed(names: &[&str], cert: &Path, key: &Path) -> Result<(), TlsError> {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let pair =
        rcgen::generate_simple_self_signed(names).map_err(|e| TlsError::Generate(e.to_string()))?;
    let write = |path: &Path, text: String, mode: u32| {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(|source| TlsError::Write {
                path: path.to_path_buf(),
                source,
            })
    };
    write(key, pair.key_pair.serialize_pem(), 0o600)?;
    write(cert, pair.cert.pem(), 0o644)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_pair_loads_and_reloads() {
        let dir = tempfile::tempdir().unwrap();
        let (c, k) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        write_self_signed(&["localhost"], &c, &k).unwrap();
        let src = TlsSource::load(&c, &k).unwrap();
        let first = src.config();
        write_self_signed(&["localhost"], &c, &k).unwrap();
        src.reload().unwrap();
        assert!(!Arc::ptr_eq(&first, &src.config()));
    }

    #[test]
    fn mismatched_or_missing_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let (c, k) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        let err = TlsSource::load(&c, &k).err().unwrap().to_string();
        assert!(err.contains("cert.pem"), "{err}");
        write_self_signed(&["localhost"], &c, &k).unwrap();
        let (c2, k2) = (dir.path().join("c2.pem"), dir.path().join("k2.pem"));
        write_self_signed(&["localhost"], &c2, &k2).unwrap();
        let err = TlsSource::load(&c, &k2).err().unwrap();
        assert!(matches!(err, TlsError::Config { .. }), "{err}");
        std::fs::write(&c, "not pem").unwrap();
        let err = TlsSource::load(&c, &k).err().unwrap();
        assert!(matches!(err, TlsError::Pem { .. }), "{err}");
    }
}
