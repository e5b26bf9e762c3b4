//! The real daemon (IMAP + LMTP) on 127.0.0.1:0 in a background runtime, and a blocking
//! raw-socket IMAP client whose every response is parsed by an independent parser,
//! imap-codec: a response imap-codec cannot parse fails the test (the one exception is
//! `* ESEARCH`, which imap-codec 2.0.0-alpha does not know; it gets a strict check here).
#![allow(dead_code)]

mod client;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[allow(unused_imports)]
pub use client::{check_esearch, esearch_item, parse, Client, Reply, Resp, Stream};
use maildex_config::Config;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

/// Users every server has (password `pw`): alice and bob.
pub const USERS: &str = "alice:{PLAIN}pw\nbob:{PLAIN}pw\n";

/// How long a read waits before the test fails (never a statement about speed: a
/// response that is owed arrives long before this).
pub const PATIENCE: Duration = Duration::from_secs(20);

/// What a test server looks like.
pub struct Opts {
    /// `[imap] plaintext_auth_on_loopback`.
    pub plaintext_on_loopback: bool,
    /// Start IMAPS and offer STARTTLS (a self-signed certificate for `localhost`).
    pub tls: bool,
    /// Extra `[lmtp]` lines; one with `listen =` replaces the default TCP listener (which
    /// must stay among its addresses).
    pub lmtp_extra: String,
    /// Files (name, content) written into the scratch root before the start; a `users`
    /// file here replaces [`USERS`].
    pub files: Vec<(&'static str, String)>,
    /// `Settings::inotify` (off: IDLE's polling fallback).
    pub inotify: bool,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            plaintext_on_loopback: true,
            tls: true,
            lmtp_extra: String::new(),
            files: Vec::new(),
            inotify: true,
        }
    }
}

/// A running daemon in a scratch folder.
pub struct Server {
    pub dir: tempfile::TempDir,
    pub config: Config,
    pub imap: SocketAddr,
    pub imaps: Option<SocketAddr>,
    pub lmtp: SocketAddr,
    pub cert: PathBuf,
    accounts: Arc<maildex_accounts::Accounts>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub fn start() -> Server {
        Self::start_with(Opts::default())
    }

    pub fn start_with(opts: Opts) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("users"), USERS).unwrap();
        for (name, content) in &opts.files {
            std::fs::write(root.join(name), content).unwrap();
        }
        let lmtp_listen = if opts.lmtp_extra.contains("listen =") {
            String::new()
        } else {
            "listen = [\"127.0.0.1:0\"]\n".to_owned()
        };
        let (cert, key) = (root.join("cert.pem"), root.join("key.pem"));
        let r = root.display();
        let mut text = format!(
            "[imap]\nlisten = [\"127.0.0.1:0\"]\nlisten_tls = [{}]\n\
             plaintext_auth_on_loopback = {}\n\
             [lmtp]\n{lmtp_listen}hostname = \"mx.test\"\n{lmtp_extra}\n\
             [storage]\nmail_location = \"{r}/mail/%u\"\nindex_root = \"{r}/index/%u\"\n\
             fsync = false\nindex_map_size = \"16MiB\"\n\
             [auth]\nusers_file = \"{r}/users\"\n",
            if opts.tls { "\"127.0.0.1:0\"" } else { "" },
            opts.plaintext_on_loopback,
            lmtp_extra = opts.lmtp_extra,
        );
        if opts.tls {
            maildex_imap::tls::write_self_signed(&["localhost"], &cert, &key).unwrap();
            text.push_str(&format!(
                "[tls]\ncert = \"{}\"\nkey = \"{}\"\n",
                cert.display(),
                key.display()
            ));
        }
        let config = Config::from_toml_str(&text, &root.join("maildex.toml")).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let cfg = config.clone();
        let inotify = opts.inotify;
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let settings = maildex_imap::context::Settings {
                    inotify,
                    ..Default::default()
                };
                let daemon = maildex_daemon::Daemon::start(cfg, settings).await.unwrap();
                tx.send((
                    daemon.imap_addrs.clone(),
                    daemon.lmtp_addr().unwrap(),
                    Arc::clone(daemon.accounts()),
                ))
                .unwrap();
                let _ = stop_rx.await;
                daemon.stop().await;
            });
        });
        let (addrs, lmtp, accounts) = rx.recv_timeout(PATIENCE).expect("daemon started");
        let imap = addrs.iter().find(|(_, t)| !t).unwrap().0;
        let imaps = addrs.iter().find(|(_, t)| *t).map(|(a, _)| *a);
        Server {
            dir,
            config,
            imap,
            imaps,
            lmtp,
            cert,
            accounts,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// A plain connection, greeting read.
    pub fn connect(&self) -> Client {
        Client::connect(self.imap)
    }

    /// A plain connection logged in as `user`.
    pub fn login(&self, user: &str) -> Client {
        let mut c = self.connect();
        c.ok(&format!("LOGIN {user} pw"));
        c
    }

    /// Logged in as `user` with `mailbox` selected.
    pub fn select(&self, user: &str, mailbox: &str) -> Client {
        let mut c = self.login(user);
        c.ok(&format!("SELECT {mailbox}"));
        c
    }

    /// An IMAPS connection (implicit TLS, the test certificate as the only root).
    pub fn connect_tls(&self) -> Client {
        let tcp = TcpStream::connect(self.imaps.expect("IMAPS listener")).unwrap();
        let mut c = Client::wrap(Stream::Tls(Box::new(tls_client(&self.cert, tcp))));
        c.read_greeting();
        c
    }

    /// Delivers `message` (LF line ends) to `user` over the daemon's LMTP port.
    pub fn deliver(&self, user: &str, message: &str) {
        lmtp_deliver(self.lmtp, user, message);
    }

    /// The user's Maildir root.
    pub fn maildir(&self, user: &str) -> PathBuf {
        self.config.storage.paths_for(user).unwrap().maildir
    }

    /// Message files of a folder (`INBOX` or `.Name`), new/ and cur/, sorted.
    pub fn files(&self, user: &str, folder: &str) -> Vec<PathBuf> {
        let mut base = self.maildir(user);
        if folder != "INBOX" {
            base = base.join(folder);
        }
        let mut out = Vec::new();
        for sub in ["new", "cur"] {
            if let Ok(rd) = std::fs::read_dir(base.join(sub)) {
                out.extend(rd.flatten().map(|e| e.path()));
            }
        }
        out.sort();
        out
    }

    /// Messages of a user's mailbox the index holds.
    pub fn indexed(&self, user: &str, mailbox: &str) -> usize {
        let u = self.accounts.lookup(user).unwrap();
        let store = self.accounts.store(&u).unwrap();
        store
            .index()
            .read(|r| match r.mailbox_id(mailbox)? {
                Some(id) => Ok(r.states(id)?.len()),
                None => Ok(0),
            })
            .unwrap()
    }

    /// Every file left in a `tmp/` of any Maildir under the scratch mail root.
    pub fn tmp_files(&self) -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    if p.file_name().is_some_and(|n| n == "tmp") {
                        out.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
                    } else {
                        walk(&p, out);
                    }
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.dir.path().join("mail"), &mut out);
        out
    }

    /// `index check` for a user finds nothing.
    pub fn assert_clean(&self, user: &str) {
        let u = self.accounts.lookup(user).unwrap();
        let store = self.accounts.store(&u).unwrap();
        let diffs = store.check().unwrap();
        assert!(diffs.is_empty(), "{user}: {diffs:?}");
    }

    pub fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

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

/// A raw LMTP delivery of `message` to `user` (dot-stuffed, CRLF on the wire).
pub fn lmtp_deliver(addr: SocketAddr, user: &str, message: &str) {
    lmtp_deliver_over(TcpStream::connect(addr).unwrap(), user, message);
}

/// [`lmtp_deliver`] over a connection already made (behind a PROXY header, say).
pub fn lmtp_deliver_over(tcp: TcpStream, user: &str, message: &str) {
    tcp.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut w = tcp.try_clone().unwrap();
    let mut r = BufReader::new(tcp);
    let mut reply = |expect: &str| {
        // multi-line replies: read until "ddd " form
        loop {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            assert!(
                line.starts_with(expect),
                "LMTP: wanted {expect}, got {line:?}"
            );
            if line.as_bytes().get(3) == Some(&b' ') {
                break;
            }
        }
    };
    reply("220");
    w.write_all(b"LHLO test\r\n").unwrap();
    reply("250");
    w.write_all(b"MAIL FROM:<sender@example.net>\r\n").unwrap();
    reply("250");
    w.write_all(format!("RCPT TO:<{user}@example.org>\r\n").as_bytes())
        .unwrap();
    reply("250");
    w.write_all(b"DATA\r\n").unwrap();
    reply("354");
    let mut data = String::new();
    for line in message.lines() {
        if line.starts_with('.') {
            data.push('.');
        }
        data.push_str(line);
        data.push_str("\r\n");
    }
    data.push_str(".\r\n");
    w.write_all(data.as_bytes()).unwrap();
    reply("250");
    w.write_all(b"QUIT\r\n").unwrap();
    reply("221");
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
