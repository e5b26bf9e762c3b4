//! The tests' one daemon starter: the real daemon (IMAP, IMAPS, LMTP) on 127.0.0.1:0 in a
//! background runtime of this process, in a scratch folder, configured by [`Opts`], with
//! what the tests check on its Maildirs and index. (A `maildex serve` process to SIGKILL
//! is `super::process`.)

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;

use maildex_accounts::Accounts;
use maildex_config::{Config, Listen};

use super::imap::{tls_client, Client, Stream, PATIENCE};
use super::lmtp::deliver as lmtp_deliver;

/// Users every server has (password `pw`) unless [`Opts::users`] says otherwise.
pub const USERS: &str = "alice:{PLAIN}pw\nbob:{PLAIN}pw\n";

/// A change to the validated config before the start (what the file refuses, such as an
/// autologout under 30 minutes or an LMTP command timeout under a second).
pub type Tweak = Box<dyn FnOnce(&mut Config) + Send>;

/// What a test server looks like.
pub struct Opts {
    /// `[imap] plaintext_auth_on_loopback` (unless [`Opts::imap_extra`] sets it).
    pub plaintext_on_loopback: bool,
    /// Start IMAPS and offer STARTTLS (a self-signed certificate for `localhost`).
    pub tls: bool,
    /// Extra `[imap]` lines; one with `listen =` replaces the default plain listener (one
    /// plain listener must remain).
    pub imap_extra: String,
    /// Extra `[lmtp]` lines; one with `listen =` replaces the default TCP listener (which
    /// must stay among its addresses).
    pub lmtp_extra: String,
    /// Extra `[storage]` lines.
    pub storage_extra: String,
    /// The users file.
    pub users: String,
    /// Files (name, content) written into the scratch root before the start; a `users`
    /// file here replaces [`Opts::users`].
    pub files: Vec<(&'static str, String)>,
    /// `Settings::inotify` (off: IDLE's polling fallback).
    pub inotify: bool,
    /// A subscriber for the daemon's log lines, set on the daemon's own threads only: the
    /// tests of a binary share one process, so a global subscriber would mix their lines.
    pub log: Option<tracing::Dispatch>,
    /// Applied to the validated config.
    pub tweak: Option<Tweak>,
    /// The scratch folder to use (prepared by the test); a new one otherwise.
    pub dir: Option<tempfile::TempDir>,
    /// The `[auth]` section's body (keys and sub-tables such as `[auth.sql]`) in place of
    /// `users_file = "<root>/users"`.
    pub auth: Option<String>,
    /// `[mailboxes]` tables, as TOML appended to the config; `None` writes an empty
    /// `[mailboxes]` (no folder is created for the users, as before the feature), and
    /// `Some("")` leaves the defaults (Drafts, Sent, Trash, Junk, Archive).
    pub mailboxes: Option<&'static str>,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            plaintext_on_loopback: true,
            tls: true,
            imap_extra: String::new(),
            lmtp_extra: String::new(),
            storage_extra: String::new(),
            users: USERS.to_owned(),
            files: Vec::new(),
            inotify: true,
            mailboxes: None,
            auth: None,
            log: None,
            tweak: None,
            dir: None,
        }
    }
}

/// What the test thread asks the daemon's runtime to do.
enum Ctl {
    Reload(std::sync::mpsc::Sender<Result<(), String>>),
    Stop,
}

/// A running daemon in a scratch folder.
pub struct Server {
    pub dir: tempfile::TempDir,
    pub config: Config,
    pub imap: SocketAddr,
    pub imaps: Option<SocketAddr>,
    /// The first TCP LMTP listener.
    pub lmtp: SocketAddr,
    /// Every LMTP listener (TCP and Unix sockets).
    pub lmtp_listen: Vec<Listen>,
    pub cert: PathBuf,
    pub accounts: Arc<Accounts>,
    ctl: tokio::sync::mpsc::UnboundedSender<Ctl>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The line `key = value` unless `extra` has a line setting `key`.
fn default_line(extra: &str, key: &str, line: &str) -> String {
    let set = extra.lines().any(|l| {
        l.trim_start()
            .strip_prefix(key)
            .is_some_and(|r| r.trim_start().starts_with('='))
    });
    if set {
        String::new()
    } else {
        format!("{key} = {line}\n")
    }
}

impl Server {
    pub fn start() -> Server {
        Self::start_with(Opts::default())
    }

    /// A server with `imap_keys` added to `[imap]`.
    pub fn with_imap_keys(imap_keys: &str) -> Server {
        Self::start_with(Opts {
            imap_extra: imap_keys.to_owned(),
            ..Opts::default()
        })
    }

    pub fn start_with(opts: Opts) -> Server {
        let dir = match opts.dir {
            Some(d) => d,
            None => tempfile::tempdir().unwrap(),
        };
        let root = dir.path();
        std::fs::write(root.join("users"), &opts.users).unwrap();
        for (name, content) in &opts.files {
            std::fs::write(root.join(name), content).unwrap();
        }
        let (cert, key) = (root.join("cert.pem"), root.join("key.pem"));
        let r = root.display();
        let imap = &opts.imap_extra;
        let listen = "[\"127.0.0.1:0\"]";
        let tls_listen = if opts.tls { listen } else { "[]" };
        let mut text = format!(
            "[imap]\n{}{}{}{imap}\n\
             [lmtp]\n{}hostname = \"mx.test\"\n{lmtp}\n\
             [storage]\nmail_location = \"{r}/mail/%u\"\nindex_root = \"{r}/index/%u\"\n\
             fsync = false\nindex_map_size = \"16MiB\"\n{storage}\n\
             [auth]\n{auth}\n",
            default_line(imap, "listen", listen),
            default_line(imap, "listen_tls", tls_listen),
            default_line(
                imap,
                "plaintext_auth_on_loopback",
                &opts.plaintext_on_loopback.to_string()
            ),
            default_line(&opts.lmtp_extra, "listen", listen),
            lmtp = opts.lmtp_extra,
            storage = opts.storage_extra,
            auth = opts
                .auth
                .clone()
                .unwrap_or_else(|| format!("users_file = \"{r}/users\"")),
        );
        if opts.tls {
            maildex_imap::tls::write_self_signed(&["localhost"], &cert, &key).unwrap();
            text.push_str(&format!(
                "[tls]\ncert = \"{}\"\nkey = \"{}\"\n",
                cert.display(),
                key.display()
            ));
        }
        text.push_str(opts.mailboxes.unwrap_or("[mailboxes]\n"));
        let mut config = Config::from_toml_str(&text, &root.join("maildex.toml")).unwrap();
        if let Some(tweak) = opts.tweak {
            tweak(&mut config);
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let (ctl, mut ctl_rx) = tokio::sync::mpsc::unbounded_channel();
        let cfg = config.clone();
        let (inotify, log) = (opts.inotify, opts.log);
        let thread = std::thread::spawn(move || {
            let rt = runtime(log.as_ref());
            let _log = log.as_ref().map(tracing::dispatcher::set_default);
            rt.block_on(async move {
                let settings = maildex_imap::context::Settings {
                    inotify,
                    ..Default::default()
                };
                let daemon = maildex_daemon::Daemon::start(cfg, settings).await.unwrap();
                tx.send((
                    daemon.imap_addrs.clone(),
                    daemon.lmtp_addrs.clone(),
                    Arc::clone(daemon.accounts()),
                ))
                .unwrap();
                while let Some(c) = ctl_rx.recv().await {
                    match c {
                        Ctl::Reload(reply) => {
                            let _ = reply.send(daemon.reload().map_err(|e| e.to_string()));
                        }
                        Ctl::Stop => break,
                    }
                }
                daemon.stop().await;
            });
        });
        let (addrs, lmtp_listen, accounts) = rx.recv_timeout(PATIENCE).expect("daemon started");
        let imap = addrs.iter().find(|(_, t)| !t).unwrap().0;
        let imaps = addrs.iter().find(|(_, t)| *t).map(|(a, _)| *a);
        let lmtp = lmtp_listen
            .iter()
            .find_map(|l| match l {
                Listen::Tcp(a) => Some(*a),
                Listen::Unix(_) => None,
            })
            .expect("a TCP LMTP listener");
        Server {
            dir,
            config,
            imap,
            imaps,
            lmtp,
            lmtp_listen,
            cert,
            accounts,
            ctl,
            thread: Some(thread),
        }
    }

    /// A plain connection, greeting (`* OK`) read.
    pub fn connect(&self) -> Client {
        let c = Client::connect(self.imap);
        assert!(c.greeting.starts_with("* OK"), "{}", c.greeting);
        c
    }

    /// A plain connection from the loopback address `src`, greeting (`* OK`) read.
    pub fn connect_from(&self, src: Ipv4Addr) -> Client {
        let mut c = Client::wrap(Stream::Plain(super::hostile::tcp_from(src, self.imap)));
        c.read_greeting();
        assert!(c.greeting.starts_with("* OK"), "{}", c.greeting);
        c
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

    /// An LMTP connection, greeting (`220`) read.
    pub fn lmtp_connect(&self) -> super::lmtp::Client {
        let mut c = super::lmtp::Client::connect(self.lmtp);
        c.expect("220 ");
        c
    }

    /// An LMTP connection after LHLO.
    pub fn lmtp_session(&self) -> super::lmtp::Client {
        let mut c = self.lmtp_connect();
        c.send("LHLO test.client\r\n");
        let r = c.reply();
        assert!(r.contains("250 CHUNKING"), "{r}");
        c
    }

    /// Delivers `message` (LF line ends) to `user` over the daemon's LMTP port.
    pub fn deliver(&self, user: &str, message: &str) {
        lmtp_deliver(self.lmtp, user, message);
    }

    /// The users file.
    pub fn users_file(&self) -> PathBuf {
        self.dir.path().join("users")
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

    /// How many files `sub` (`tmp`, `new`, `cur`) of the user's INBOX holds.
    pub fn count(&self, user: &str, sub: &str) -> usize {
        std::fs::read_dir(self.maildir(user).join(sub)).map_or(0, |rd| rd.flatten().count())
    }

    /// Messages of a user's mailbox the index holds.
    pub fn indexed(&self, user: &str, mailbox: &str) -> usize {
        self.indexed_files(user, mailbox).len()
    }

    /// Indexed UIDs of a user's mailbox, with file names.
    pub fn indexed_files(&self, user: &str, mailbox: &str) -> Vec<(u32, String)> {
        let u = self.accounts.lookup(user).unwrap().unwrap();
        let store = self.accounts.store(&u).unwrap();
        store
            .index()
            .read(|r| {
                let Some(id) = r.mailbox_id(mailbox)? else {
                    return Ok(Vec::new());
                };
                Ok(r.states(id)?
                    .into_iter()
                    .map(|(uid, s)| (uid.get(), s.file_name))
                    .collect())
            })
            .unwrap()
    }

    /// The header fields a user's mailbox learned for SEARCH
    /// (`maildex_index::learned`), and how many of its messages' search records lack one
    /// of them.
    pub fn learned_headers(&self, user: &str, mailbox: &str) -> (Vec<String>, usize) {
        let u = self.accounts.lookup(user).unwrap().unwrap();
        let store = self.accounts.store(&u).unwrap();
        store
            .index()
            .read(|r| {
                let Some(id) = r.mailbox_id(mailbox)? else {
                    return Ok((Vec::new(), 0));
                };
                let names = r.require_mailbox(id)?.learned_headers;
                let mut lacking = 0;
                let all = maildex_store::Uid::MIN..=maildex_store::Uid::MAX;
                r.for_each_search(id, all, |_, raw| {
                    let view = maildex_store::records::SearchView::parse(raw);
                    let holds = view
                        .is_some_and(|v| names.iter().all(|n| v.header(n.as_bytes()).is_some()));
                    lacking += usize::from(!holds);
                    Ok(std::ops::ControlFlow::Continue(()))
                })?;
                Ok((names, lacking))
            })
            .unwrap()
    }

    /// Every file left in a `tmp/` of any Maildir under the scratch mail root.
    pub fn tmp_files(&self) -> Vec<PathBuf> {
        super::process::tmp_files(&self.dir.path().join("mail"))
    }

    /// `index check` for a user finds nothing (a user without a Maildir has nothing).
    pub fn assert_clean(&self, user: &str) {
        if !self.maildir(user).exists() {
            return;
        }
        let u = self.accounts.lookup(user).unwrap().unwrap();
        let store = self.accounts.store(&u).unwrap();
        let diffs = store.check().unwrap();
        assert!(diffs.is_empty(), "{user}: {diffs:?}");
    }

    /// Messages of the user whose full text is not indexed yet (every mailbox).
    pub fn text_pending(&self, user: &str) -> usize {
        let u = self.accounts.lookup(user).unwrap().unwrap();
        let store = self.accounts.store(&u).unwrap();
        store.pending_texts().unwrap().iter().map(|(_, n)| n).sum()
    }

    /// Waits (a bounded poll) until the daemon's background indexer has indexed the full
    /// text of every message of the user; panics after [`PATIENCE`].
    pub fn wait_text_indexed(&self, user: &str) {
        let until = std::time::Instant::now() + PATIENCE;
        loop {
            let n = self.text_pending(user);
            if n == 0 {
                return;
            }
            assert!(
                std::time::Instant::now() < until,
                "{user}: {n} messages still without full text"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// What SIGHUP does: re-reads the users and aliases files and the certificates.
    pub fn reload(&self) -> Result<(), String> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.ctl.send(Ctl::Reload(tx)).unwrap();
        rx.recv_timeout(PATIENCE).expect("reload answered")
    }

    /// Asks the daemon to stop without waiting (sessions are told `* BYE` meanwhile).
    pub fn begin_stop(&self) {
        let _ = self.ctl.send(Ctl::Stop);
    }

    /// Stops the daemon and waits for it.
    pub fn stop(&mut self) {
        self.begin_stop();
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.begin_stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

thread_local! {
    /// The log subscriber of a runtime thread (see [`runtime`]).
    static THREAD_LOG: std::cell::RefCell<Option<tracing::dispatcher::DefaultGuard>> =
        const { std::cell::RefCell::new(None) };
}

/// A two-worker runtime for a daemon; with `log`, every thread of it (workers and the
/// blocking pool) logs there.
fn runtime(log: Option<&tracing::Dispatch>) -> tokio::runtime::Runtime {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.worker_threads(2).enable_all();
    if let Some(log) = log.cloned() {
        b.on_thread_start(move || {
            let guard = tracing::dispatcher::set_default(&log);
            THREAD_LOG.with(|g| *g.borrow_mut() = Some(guard));
        })
        .on_thread_stop(|| {
            THREAD_LOG.with(|g| g.borrow_mut().take());
        });
    }
    b.build().unwrap()
}
