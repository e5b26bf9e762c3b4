//! A real LMTP server on 127.0.0.1:0 in a background runtime, a raw-socket client, and
//! checks on what landed in the Maildirs.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use maildex_accounts::Accounts;
use maildex_config::{Config, Listen};
use maildex_lmtp::{Limits, Server};
use tokio_util::sync::CancellationToken;

/// Users every test has: alice and bob (bare: any domain), carol@example.org.
pub const USERS: &str = "alice:{PLAIN}pw\nbob:{PLAIN}pw\ncarol@example.org:{PLAIN}pw\n";

pub struct Lmtp {
    pub dir: tempfile::TempDir,
    pub config: Config,
    pub accounts: Arc<Accounts>,
    pub addr: SocketAddr,
    pub listen: Vec<Listen>,
    shutdown: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Config text for a scratch root: Maildirs `root/mail/%u`, indexes `root/index/%u`.
pub fn config_text(root: &Path, lmtp_extra: &str, storage_extra: &str) -> String {
    let r = root.display();
    // lmtp_extra may bring its own listeners
    let listen = if lmtp_extra.contains("listen =") {
        ""
    } else {
        "listen = [\"127.0.0.1:0\"]\n"
    };
    format!(
        "[imap]\nlisten = []\n[lmtp]\n{listen}{lmtp_extra}\n\
         [storage]\nmail_location = \"{r}/mail/%u\"\nindex_root = \"{r}/index/%u\"\n\
         fsync = false\nindex_map_size = \"4MiB\"\n{storage_extra}\n\
         [auth]\nusers_file = \"{r}/users\"\n"
    )
}

impl Lmtp {
    /// A server with [`USERS`], extra `[lmtp]` and `[storage]` lines, and `files`
    /// (name, content) written into the scratch root first.
    pub fn start(lmtp_extra: &str, storage_extra: &str, files: &[(&str, &str)]) -> Lmtp {
        Self::start_with(lmtp_extra, storage_extra, files, |_| {})
    }

    pub fn start_with(
        lmtp_extra: &str,
        storage_extra: &str,
        files: &[(&str, &str)],
        tweak: impl FnOnce(&mut Limits),
    ) -> Lmtp {
        let dir = tempfile::tempdir().unwrap();
        Self::start_in(dir, lmtp_extra, storage_extra, files, tweak)
    }

    pub fn start_in(
        dir: tempfile::TempDir,
        lmtp_extra: &str,
        storage_extra: &str,
        files: &[(&str, &str)],
        tweak: impl FnOnce(&mut Limits),
    ) -> Lmtp {
        let root = dir.path();
        std::fs::write(root.join("users"), USERS).unwrap();
        for (name, content) in files {
            std::fs::write(root.join(name), content).unwrap();
        }
        let text = config_text(root, lmtp_extra, storage_extra);
        let config = Config::from_toml_str(&text, &root.join("maildex.toml")).unwrap();
        let accounts = Accounts::load(config.clone()).unwrap();
        let mut limits = Limits::from_config(&config.lmtp);
        limits.proto.hostname = "mx.test".into();
        tweak(&mut limits);
        let server = Server::bind(&config.lmtp, Arc::clone(&accounts), limits).unwrap();
        let listen = server.local_addrs();
        let addr = listen
            .iter()
            .find_map(|l| match l {
                Listen::Tcp(a) => Some(*a),
                Listen::Unix(_) => None,
            })
            .unwrap();
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(server.run(token)).unwrap();
        });
        Lmtp {
            dir,
            config,
            accounts,
            addr,
            listen,
            shutdown,
            thread: Some(thread),
        }
    }

    pub fn connect(&self) -> Client {
        let mut c = Client::connect(self.addr);
        c.expect("220 ");
        c
    }

    /// Connects and says LHLO.
    pub fn session(&self) -> Client {
        let mut c = self.connect();
        c.send("LHLO test.client\r\n");
        let r = c.reply();
        assert!(r.contains("250 CHUNKING"), "{r}");
        c
    }

    /// Maildir root of a user.
    pub fn maildir(&self, user: &str) -> PathBuf {
        self.config.storage.paths_for(user).unwrap().maildir
    }

    /// Files in a user's folder (`INBOX` or `.Name`), in new/ and cur/.
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

    /// Every file left in any tmp/ under the scratch mail root.
    pub fn tmp_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        walk_tmp(&self.dir.path().join("mail"), &mut out);
        out
    }

    /// Indexed UIDs of a user's mailbox, with file names.
    pub fn indexed(&self, user: &str, mailbox: &str) -> Vec<(u32, String)> {
        let u = self.accounts.lookup(user).unwrap();
        let store = self.accounts.store(&u).unwrap();
        store
            .index()
            .read(|r| {
                let Some(id) = r.mailbox_id(mailbox)? else {
                    return Ok(Vec::new());
                };
                Ok(r.states(id)?
                    .into_iter()
                    .map(|(uid, s)| (uid, s.file_name))
                    .collect())
            })
            .unwrap()
    }

    /// `index check` for a user must find nothing.
    pub fn assert_clean(&self, user: &str) {
        if !self.maildir(user).exists() {
            return;
        }
        let u = self.accounts.lookup(user).unwrap();
        let store = self.accounts.store(&u).unwrap();
        let diffs = store.check().unwrap();
        assert!(diffs.is_empty(), "{user}: {diffs:?}");
    }

    pub fn stop(&mut self) {
        self.shutdown.cancel();
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for Lmtp {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn walk_tmp(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "tmp") {
                out.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
            } else {
                walk_tmp(&p, out);
            }
        }
    }
}

/// A raw LMTP client.
pub struct Client {
    pub reader: BufReader<TcpStream>,
    pub stream: TcpStream,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Client {
            reader: BufReader::new(stream.try_clone().unwrap()),
            stream,
        }
    }

    pub fn send(&mut self, data: impl AsRef<[u8]>) {
        self.stream.write_all(data.as_ref()).unwrap();
    }

    /// One complete (possibly multi-line) reply; empty at EOF.
    pub fn reply(&mut self) -> String {
        let mut all = String::new();
        loop {
            let mut line = Vec::new();
            let n = self.reader.read_until(b'\n', &mut line).unwrap_or(0);
            if n == 0 {
                return all;
            }
            let line = String::from_utf8_lossy(&line).into_owned();
            all.push_str(&line);
            if line.len() < 4 || line.as_bytes()[3] != b'-' {
                return all;
            }
        }
    }

    /// Reads one reply and checks it starts with `prefix`.
    pub fn expect(&mut self, prefix: &str) -> String {
        let r = self.reply();
        assert!(r.starts_with(prefix), "expected {prefix:?}, got {r:?}");
        r
    }

    /// True once the server closed the connection.
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.reader.read(&mut b), Ok(0))
    }
}

/// A small message with LF line ends as DATA text (dot-stuffing left to the caller).
pub fn message(subject: &str) -> String {
    format!(
        "From: sender@example.net\r\nTo: alice@example.org\r\nSubject: {subject}\r\n\
         Message-ID: <{subject}@example.net>\r\n\r\nHello {subject}.\r\n"
    )
}

/// MAIL, the RCPTs (each must get `250`), DATA, the message; returns the replies after
/// the data, one per recipient.
pub fn transaction(c: &mut Client, rcpts: &[&str], msg: &str) -> Vec<String> {
    c.send("MAIL FROM:<sender@example.net>\r\n");
    c.expect("250 ");
    for r in rcpts {
        c.send(format!("RCPT TO:<{r}>\r\n"));
        c.expect("250 ");
    }
    c.send("DATA\r\n");
    c.expect("354 ");
    c.send(msg);
    c.send(".\r\n");
    rcpts.iter().map(|_| c.reply()).collect()
}
