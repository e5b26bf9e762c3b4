//! The tests' one IMAP client: blocking, on a raw socket (plain or TLS), every response
//! parsed by an independent parser, imap-codec: a response imap-codec cannot parse fails
//! the test (the one exception is `* ESEARCH`, which imap-codec 2.0.0-alpha does not know;
//! it gets a strict check here).

mod client;

use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

#[allow(unused_imports)]
pub use client::{check_esearch, esearch_item, parse, Client, Reply, Resp, Stream};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

/// How long a read waits before the test fails (never a statement about speed: a
/// response that is owed arrives long before this).
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A rustls client trusting only `cert`, for `localhost`.
pub fn tls_client(
    cert: &Path,
    tcp: TcpStream,
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    try_tls_client(cert, tcp).unwrap()
}

/// [`tls_client`], with a failed handshake (another certificate) as an error.
pub fn try_tls_client(
    cert: &Path,
    tcp: TcpStream,
) -> std::io::Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(cert).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut s = rustls::StreamOwned::new(conn, tcp);
    s.conn.complete_io(&mut s.sock)?;
    Ok(s)
}

/// LF text to CRLF (what IMAP must send for a message stored with LF line ends).
pub fn crlf(text: &str) -> Vec<u8> {
    text.replace("\r\n", "\n")
        .replace('\n', "\r\n")
        .into_bytes()
}

/// A simple message.
pub fn simple(subject: &str, body: &str) -> String {
    format!(
        "From: Sender <sender@example.net>\nTo: Alice <alice@example.org>\n\
         Subject: {subject}\nDate: Mon, 7 Feb 1994 21:52:25 -0800\n\
         Message-ID: <{subject}@example.net>\n\n{body}\n"
    )
}

/// The command-line tool `name` exists; otherwise, unless `CI` is set, the test skips
/// (returns false after saying why). Under CI a missing tool fails the test.
pub fn have_tool(name: &str) -> bool {
    let found = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {name}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !found {
        if std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false") {
            panic!("{name} is missing and CI is set: scripts/test-all.sh installs it");
        }
        eprintln!("SKIPPED: {name} is not installed (scripts/test-all.sh installs it)");
    }
    found
}
