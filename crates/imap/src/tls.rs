//! TLS for IMAPS (port 993, RFC 8314 §3.2) and STARTTLS (RFC 9051 §6.2.1) with rustls on
//! the aws-lc-rs provider. rustls speaks TLS 1.2 and 1.3 only, so anything older is refused
//! by construction (RFC 8996).
//!
//! Certificates come from PEM files named in the config; [`TlsSource::reload`] re-reads
//! them (SIGHUP) and new connections use the new pair while open ones keep theirs.
//!
//! The files are opened once at start, while the daemon may still be root, and the
//! descriptors are kept, as Dovecot's master keeps what it read as root: a reload after
//! the switch to `[daemon] user` re-reads a file by its path when that user may, else
//! through the kept descriptor from offset 0 (`pread`). So a root-only key (`0600 root`,
//! certbot's) rewritten in place reloads; a key *replaced* by a new file (certbot's
//! renewal links a new one) cannot be read by the daemon's user, which the reload error
//! says: restart maildex after the renewal, or make the key readable by the daemon's group
//! (docs/SECURITY.md).
//! [`write_self_signed`] makes the pair `maildex serve --dev` uses.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

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
    #[error("{path}: {error}")]
    Write {
        /// The file.
        path: PathBuf,
        /// What the OS said (in the message; not a `source()`).
        error: std::io::Error,
    },
    /// rcgen could not generate a certificate.
    #[error("generating a self-signed certificate: {0}")]
    Generate(String),
}

/// The certificate pair in use, reloadable.
pub struct TlsSource {
    cert: PemFile,
    key: PemFile,
    current: RwLock<Arc<ServerConfig>>,
}

/// A PEM file by its path, with the descriptor it was last read through.
struct PemFile {
    path: PathBuf,
    held: Mutex<File>,
}

impl PemFile {
    fn open(path: &Path) -> Result<(PemFile, Vec<u8>), TlsError> {
        let file = File::open(path).map_err(|e| pem_err(path, e.to_string()))?;
        let bytes = read_all_at(&file).map_err(|e| pem_err(path, e.to_string()))?;
        let held = Mutex::new(file);
        let path = path.to_path_buf();
        Ok((PemFile { path, held }, bytes))
    }

    /// The file's bytes now: by its path (keeping the new descriptor), else, when this
    /// user may not open it, through the descriptor kept since it last could.
    fn read(&self) -> Result<Vec<u8>, TlsError> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        match File::open(&self.path) {
            Ok(file) => {
                let bytes = read_all_at(&file).map_err(|e| pem_err(&self.path, e.to_string()))?;
                *held = file;
                Ok(bytes)
            }
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                let replaced = match (std::fs::symlink_metadata(&self.path), held.metadata()) {
                    (Ok(_), Ok(h)) => std::fs::metadata(&self.path)
                        .map_or(true, |now| (now.dev(), now.ino()) != (h.dev(), h.ino())),
                    _ => false,
                };
                let bytes = read_all_at(&held).map_err(|e| pem_err(&self.path, e.to_string()))?;
                if replaced {
                    tracing::warn!(
                        file = %self.path.display(),
                        "this file was replaced by a new one that maildex's user may not \
                         read; the copy read at start is used: restart maildex to load the \
                         new one, or make it readable by maildex's group"
                    );
                }
                Ok(bytes)
            }
            Err(e) => Err(pem_err(&self.path, e.to_string())),
        }
    }
}

/// The whole file from offset 0, whatever was read through the descriptor before.
fn read_all_at(file: &File) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = file.read_at(&mut buf, out.len() as u64)?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

fn pem_err(path: &Path, reason: String) -> TlsError {
    TlsError::Pem {
        path: path.to_path_buf(),
        reason,
    }
}

impl TlsSource {
    /// Opens the pair (keeping both descriptors for reloads) and builds the rustls config.
    pub fn load(cert: &Path, key: &Path) -> Result<TlsSource, TlsError> {
        let (cert, cert_pem) = PemFile::open(cert)?;
        let (key, key_pem) = PemFile::open(key)?;
        let config = build((&cert.path, &cert_pem), (&key.path, &key_pem))?;
        Ok(TlsSource {
            cert,
            key,
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
        let (cert, key) = (self.cert.read()?, self.key.read()?);
        let config = build((&self.cert.path, &cert), (&self.key.path, &key))?;
        match self.current.write() {
            Ok(mut c) => *c = config,
            Err(poisoned) => *poisoned.into_inner() = config,
        }
        Ok(())
    }
}

/// The rustls config of a certificate chain and key: (file name, PEM bytes) each.
fn build(
    (cert, cert_pem): (&Path, &[u8]),
    (key, key_pem): (&Path, &[u8]),
) -> Result<Arc<ServerConfig>, TlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| pem_err(cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(pem_err(cert, "no CERTIFICATE block".into()));
    }
    let key_der =
        PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| pem_err(key, e.to_string()))?;
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
            .map_err(|error| TlsError::Write {
                path: path.to_path_buf(),
                error,
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
    fn a_key_rewritten_in_place_reloads_through_the_kept_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let (c, k) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        write_self_signed(&["localhost"], &c, &k).unwrap();
        let src = TlsSource::load(&c, &k).unwrap();
        // what the kept descriptor reads from offset 0 is the pair written in place (the
        // daemon's user reads it so when it may not open the path: tests/reload_files.rs)
        write_self_signed(&["localhost"], &c, &k).unwrap();
        let first = src.config();
        let new_cert = std::fs::read(&c).unwrap();
        let held = src.cert.held.lock().unwrap();
        assert_eq!(read_all_at(&held).unwrap(), new_cert);
        drop(held);
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
