//! The whole server as a fuzz target (issue 5), as mox fuzzes its IMAP server: the
//! fuzzer's bytes go through a real session over an in-memory pipe
//! ([`crate::server::serve_stream`]) in one of three states, picked by the first byte: not
//! authenticated, authenticated (after `LOGIN`), or selected (after `SELECT INBOX` of a
//! mailbox with a few messages). The rest is sent as the client's bytes, then the client
//! closes its side; the session must answer and end without panicking, within a bound
//! (a session that never ends is a hang, reported as a panic). What the fuzzer's commands
//! change in the Maildir carries over to the next input, as it would on a server.
//!
//! Used by `crates/imap/fuzz` (cargo-fuzz) and by `tests/fuzz_corpus.rs`, which replays
//! the committed corpus on stable.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::context::{Settings, Shared};

/// How long one input may keep a session alive after the client closed its side.
const BOUND: Duration = Duration::from_secs(20);
/// What each state sends before the fuzzer's bytes.
const PREFIXES: [&[u8]; 3] = [
    b"",
    b"p1 LOGIN alice pw\r\n",
    b"p1 LOGIN alice pw\r\np2 SELECT INBOX\r\n",
];

/// A server (accounts, one user `alice` with password `pw`, a runtime) that inputs run
/// against.
pub struct Harness {
    rt: tokio::runtime::Runtime,
    shared: Arc<Shared>,
    runs: AtomicU32,
    dir: PathBuf,
}

impl Harness {
    /// Builds the server in a fresh folder under the system temporary folder, with a few
    /// messages in INBOX and a second mailbox. Panics on failure: it is test scaffolding.
    pub fn new() -> Harness {
        static HARNESSES: AtomicU32 = AtomicU32::new(0);
        let n = HARNESSES.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("maildex-fuzz-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("fuzz folder");
        std::fs::write(dir.join("users"), "alice:{PLAIN}pw\n").expect("users file");
        let d = dir.display();
        let text = format!(
            "[imap]\nlisten = []\nlisten_tls = []\n[lmtp]\nlisten = []\n\
             [storage]\nmail_location = \"{d}/mail/%u\"\nindex_root = \"{d}/index/%u\"\n\
             fsync = false\nindex_map_size = \"64MiB\"\n\
             [auth]\nusers_file = \"{d}/users\"\n"
        );
        let config = maildex_config::Config::from_toml_str(&text, &dir.join("maildex.toml"))
            .expect("fuzz config");
        let accounts = maildex_accounts::Accounts::load(config).expect("accounts");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let shared = rt.block_on(async {
            Shared::new(
                accounts,
                None,
                Settings::default(),
                CancellationToken::new(),
            )
        });
        let h = Harness {
            rt,
            shared,
            runs: AtomicU32::new(0),
            dir,
        };
        let mut setup = b"s1 LOGIN alice pw\r\ns2 CREATE Other\r\n".to_vec();
        for (i, body) in [
            "From: a@example.org\r\nSubject: one\r\n\r\nplain\r\n",
            "From: b@example.org\r\nSubject: two\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\nContent-Type: text/plain\r\n\r\nhi\r\n--x\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\naGVsbG8=\r\n--x--\r\n",
            "From: =?utf-8?q?C=C3=A9?= <c@example.org>\r\nSubject: three\r\n\r\nbody\r\n",
        ]
        .iter()
        .enumerate()
        {
            setup.extend_from_slice(
                format!("a{i} APPEND INBOX (\\Seen) {{{}+}}\r\n{body}\r\n", body.len()).as_bytes(),
            );
        }
        h.session(&setup);
        h
    }

    /// Runs one input (see the module docs).
    pub fn run(&self, data: &[u8]) {
        let Some((&first, rest)) = data.split_first() else {
            return;
        };
        let mut input = PREFIXES[usize::from(first) % PREFIXES.len()].to_vec();
        input.extend_from_slice(rest);
        self.session(&input);
    }

    /// One session fed `input`, then closed by the client; returns what the server sent.
    pub fn session(&self, input: &[u8]) -> Vec<u8> {
        // a new loopback address per session: plaintext LOGIN stays allowed, and the
        // failed-login delay of one input never slows the next
        let n = self.runs.fetch_add(1, Ordering::Relaxed);
        let ip = Ipv4Addr::new(127, (n >> 16) as u8, (n >> 8) as u8, n as u8 | 1);
        let peer = SocketAddr::new(IpAddr::V4(ip), 40000);
        let shared = Arc::clone(&self.shared);
        self.rt.block_on(async move {
            let (mut client, server) = tokio::io::duplex(64 * 1024);
            let session = tokio::spawn(crate::server::serve_stream(shared, server, peer));
            let exchange = async {
                let mut out = Vec::new();
                let (mut rd, mut wr) = tokio::io::split(&mut client);
                let write = async {
                    // the server may stop reading (BYE): what it does not take is dropped
                    let _ = wr.write_all(input).await;
                    let _ = wr.shutdown().await;
                };
                let read = rd.read_to_end(&mut out);
                let (_, read) = tokio::join!(write, read);
                let _ = read;
                out
            };
            let out = tokio::time::timeout(BOUND, exchange)
                .await
                .unwrap_or_else(|_| panic!("the session did not end within {BOUND:?}"));
            tokio::time::timeout(BOUND, session)
                .await
                .unwrap_or_else(|_| panic!("the session task did not end within {BOUND:?}"))
                .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
            out
        })
    }
}

impl Default for Harness {
    fn default() -> Harness {
        Harness::new()
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
