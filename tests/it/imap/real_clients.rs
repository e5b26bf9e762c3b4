//! Real mail clients against the real server: mbsync (isync) and offlineimap syncing an
//! account both ways, and mutt driven under tmux reading a folder, opening a message and saving a
//! copy, over plain IMAP and over IMAPS (trusting the test certificate). Each skips with a message when its tool is missing, unless `CI` is set.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::daemon::Server;
use crate::support::imap::{have_tool, simple};

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for sub in ["new", "cur"] {
        if let Ok(rd) = std::fs::read_dir(dir.join(sub)) {
            out.extend(rd.flatten().map(|e| e.path()));
        }
    }
    out.sort();
    out
}

fn subject_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("Subject: "))
        .unwrap_or("")
        .to_string()
}

/// A server where alice has `messages` messages "inbox N" in INBOX and one "archived"
/// in Archive, and alice's session.
fn account_to_sync(messages: u32) -> (Server, crate::support::imap::Client) {
    let s = Server::start();
    for i in 1..=messages {
        s.deliver(
            "alice",
            &simple(&format!("inbox {i}"), &format!("body {i}")),
        );
    }
    let mut c = s.login("alice");
    c.ok("CREATE Archive");
    c.ok("APPEND Archive (\\Seen) {24}\r\nSubject: archived\r\n\r\nold\r\n");
    (s, c)
}

fn mbsync(conf: &Path) {
    let out = Command::new("mbsync")
        .arg("-c")
        .arg(conf)
        .arg("-a")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mbsync failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn mbsync_syncs_both_ways() {
    if !have_tool("mbsync") {
        return;
    }
    let (s, mut c) = account_to_sync(3);
    c.ok("SELECT INBOX");
    c.ok("STORE 2 +FLAGS (\\Seen)");
    let local = s.dir.path().join("local");
    std::fs::create_dir_all(&local).unwrap();
    let conf = s.dir.path().join("mbsyncrc");
    std::fs::write(
        &conf,
        format!(
            "IMAPAccount test\nHost 127.0.0.1\nPort {port}\nUser alice\nPass pw\n\
             SSLType None\nAuthMechs LOGIN PLAIN\nTimeout 30\n\n\
             IMAPStore remote\nAccount test\n\n\
             MaildirStore local\nPath {l}/\nInbox {l}/INBOX\nSubFolders Verbatim\n\n\
             Channel sync\nFar :remote:\nNear :local:\nPatterns *\nCreate Both\n\
             SyncState *\nSync All\nExpunge Both\n",
            port = s.imap.port(),
            l = local.display()
        ),
    )
    .unwrap();
    mbsync(&conf);
    let inbox = files_in(&local.join("INBOX"));
    let mut subjects: Vec<String> = inbox.iter().map(|p| subject_of(p)).collect();
    subjects.sort();
    assert_eq!(subjects, ["inbox 1", "inbox 2", "inbox 3"], "{inbox:?}");
    let archive = files_in(&local.join("Archive"));
    assert_eq!(archive.len(), 1, "{archive:?}");
    assert_eq!(subject_of(&archive[0]), "archived");
    // the bodies arrived whole
    let one = inbox.iter().find(|p| subject_of(p) == "inbox 1").unwrap();
    assert!(std::fs::read_to_string(one).unwrap().contains("body 1"));
    // flags came down: message 2 is seen (S in the name)
    let two = inbox.iter().find(|p| subject_of(p) == "inbox 2").unwrap();
    let name = two.file_name().unwrap().to_str().unwrap().to_string();
    assert!(
        name.rsplit_once(":2,")
            .is_some_and(|(_, f)| f.contains('S')),
        "{name}"
    );

    // local changes: flag message 1, add a new message, then sync up
    let name = one.file_name().unwrap().to_str().unwrap().to_string();
    let uid: u32 = name
        .split(",U=")
        .nth(1)
        .and_then(|r| r.split([':', ',']).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no UID in {name}"));
    let (base, flags) = name.rsplit_once(":2,").unwrap_or((&name, ""));
    let mut f: Vec<char> = flags.chars().chain(['F']).collect();
    f.sort();
    f.dedup();
    let flagged = format!("{base}:2,{}", f.into_iter().collect::<String>());
    std::fs::rename(one, local.join("INBOX/cur").join(flagged)).unwrap();
    std::fs::write(
        local.join("INBOX/new/1700000000.local.host"),
        "From: me@example.org\nSubject: written locally\n\nnew here\n",
    )
    .unwrap();
    mbsync(&conf);
    let mut c = s.login("alice");
    c.ok("EXAMINE INBOX");
    let r = c.ok(&format!("UID FETCH {uid} FLAGS"));
    assert!(r.all().contains("\\Flagged"), "{}", r.all());
    let r = c.ok("FETCH 1:* (BODY.PEEK[HEADER.FIELDS (SUBJECT)])");
    assert!(r.all().contains("Subject: written locally"), "{}", r.all());
    assert_eq!(r.fetches().len(), 4, "{}", r.all());
    s.assert_clean("alice");
}

fn offlineimap(conf: &Path) {
    let out = Command::new("offlineimap")
        .arg("-c")
        .arg(conf)
        .args(["-o", "-u", "basic"])
        .output()
        .unwrap();
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    // offlineimap exits 0 after some folder errors too: its ERROR lines count
    assert!(
        out.status.success() && !so.contains("ERROR") && !se.contains("ERROR"),
        "offlineimap failed:\n{so}\n{se}"
    );
}

/// offlineimap (issue 15 #3): it authenticates with AUTHENTICATE and no initial
/// response, so it needs the empty `+ ` challenge; then it syncs both ways.
#[test]
fn offlineimap_syncs_both_ways() {
    if !have_tool("offlineimap") {
        return;
    }
    let (s, mut c) = account_to_sync(2);
    let root = s.dir.path();
    let local = root.join("offline");
    let conf = root.join("offlineimaprc");
    std::fs::write(
        &conf,
        format!(
            "[general]\naccounts = test\nmetadata = {meta}\nui = basic\n\n\
             [Account test]\nlocalrepository = local\nremoterepository = remote\n\n\
             [Repository local]\ntype = Maildir\nlocalfolders = {l}\n\n\
             [Repository remote]\ntype = IMAP\nremotehost = 127.0.0.1\nremoteport = {port}\n\
             remoteuser = alice\nremotepass = pw\nssl = no\nstarttls = no\n\
             auth_mechanisms = PLAIN\nmaxconnections = 1\n",
            meta = root.join("offline-meta").display(),
            l = local.display(),
            port = s.imap.port(),
        ),
    )
    .unwrap();
    offlineimap(&conf);
    let inbox = files_in(&local.join("INBOX"));
    let mut subjects: Vec<String> = inbox.iter().map(|p| subject_of(p)).collect();
    subjects.sort();
    assert_eq!(subjects, ["inbox 1", "inbox 2"], "{inbox:?}");
    let archive = files_in(&local.join("Archive"));
    assert_eq!(archive.len(), 1, "{archive:?}");
    assert_eq!(subject_of(&archive[0]), "archived");
    // a message written locally goes up
    std::fs::write(
        local.join("INBOX/new/1700000000.local.host"),
        "From: me@example.org\nSubject: written locally\n\nnew here\n",
    )
    .unwrap();
    offlineimap(&conf);
    c.ok("SELECT INBOX");
    let r = c.ok("FETCH 1:* (BODY.PEEK[HEADER.FIELDS (SUBJECT)])");
    assert!(r.all().contains("Subject: written locally"), "{}", r.all());
    assert_eq!(r.fetches().len(), 3, "{}", r.all());
    s.assert_clean("alice");
}

struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "mutt"])
    }

    /// Waits until the screen shows every one of `words`; returns the screen.
    fn wait_for(&self, words: &[&str]) -> String {
        let mut screen = String::new();
        self.wait_until(&format!("showed {words:?}"), || {
            screen = self.screen();
            words.iter().all(|w| screen.contains(w))
        });
        screen
    }

    /// Waits until mutt has quit (its tmux session is gone).
    fn wait_exit(&self) {
        self.wait_until("quit", || {
            !Command::new("tmux")
                .args(["-L", &self.socket, "has-session", "-t", "mutt"])
                .output()
                .unwrap()
                .status
                .success()
        });
    }

    /// Polls `done` for up to 30 s; panics with the screen after that.
    fn wait_until(&self, what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(
                Instant::now() < deadline,
                "mutt never {what}; screen:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "mutt"];
        args.extend_from_slice(keys);
        self.run(&args);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}

#[test]
fn mutt_under_tmux_lists_opens_and_saves() {
    mutt_lists_opens_and_saves(false);
}

/// The same over IMAPS (implicit TLS), mutt trusting the test certificate.
#[test]
fn mutt_over_imaps_lists_opens_and_saves() {
    mutt_lists_opens_and_saves(true);
}

fn mutt_lists_opens_and_saves(imaps: bool) {
    if !have_tool("mutt") || !have_tool("tmux") {
        return;
    }
    let s = Server::start();
    s.deliver(
        "alice",
        &simple("Greetings from maildex", "The quick brown fox."),
    );
    s.deliver("alice", &simple("Second subject line", "Another body."));
    s.login("alice").ok("CREATE Saved");
    // the certificate names localhost; mutt trusts it through certificate_file
    let url = match (imaps, s.imaps) {
        (true, Some(a)) => format!("imaps://localhost:{}", a.port()),
        (true, None) => panic!("the test server has no IMAPS listener"),
        (false, _) => format!("imap://127.0.0.1:{}", s.imap.port()),
    };
    let muttrc = s.dir.path().join("muttrc");
    std::fs::write(
        &muttrc,
        format!(
            "set imap_user = alice\nset imap_pass = pw\n\
             set folder = {url}/\nset spoolfile = +INBOX\n\
             set ssl_starttls = no\nset ssl_force_tls = {force}\n\
             set certificate_file = \"{cert}\"\n\
             set header_cache = \"\"\nset message_cachedir = \"\"\n\
             set sort = date-sent\nset confirmappend = no\nset confirmcreate = no\n\
             set record = \"\"\nset move = no\nset quit = yes\nset wait_key = no\n\
             set imap_passive = no\nset mail_check = 5\nset timeout = 5\n",
            cert = s.cert.display(),
            force = if imaps { "yes" } else { "no" },
        ),
    )
    .unwrap();
    let tmux = Tmux {
        socket: format!("maildex-test-{}-{imaps}", std::process::id()),
    };
    let cmd = format!(
        "TERM=xterm mutt -n -F {} -f {}/INBOX",
        muttrc.display(),
        url.replacen("://", "://alice@", 1)
    );
    tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "mutt",
        "-x",
        "160",
        "-y",
        "40",
        &cmd,
    ]);
    // the index: both subjects
    tmux.wait_for(&["Greetings from maildex", "Second subject line"]);
    // open the first message: its body shows
    tmux.keys(&["1", "Enter"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for(&["The quick brown fox."]);
    // save a copy into Saved (C = copy-message)
    tmux.keys(&["C"]);
    tmux.wait_for(&["Copy to"]);
    tmux.keys(&["C-u", "=Saved", "Enter"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut c = s.login("alice");
    loop {
        let r = c.ok("STATUS Saved (MESSAGES)");
        if r.all().contains("(MESSAGES 1)") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no copy in Saved: {}\nscreen:\n{}",
            r.all(),
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    c.ok("EXAMINE Saved");
    let r = c.ok("FETCH 1 BODY.PEEK[TEXT]");
    assert!(r.all().contains("The quick brown fox."), "{}", r.all());
    // reading it set \Seen on the server
    c.ok("EXAMINE INBOX");
    let r = c.ok("SEARCH SEEN");
    assert!(r.all().contains("* SEARCH 1"), "{}", r.all());
    tmux.keys(&["q"]);
    tmux.keys(&["q"]);
    // mutt's last writes (it stores its `Old` keyword on quitting) are answered before it
    // exits; checking sooner can meet a rename whose index commit is still on its way
    tmux.wait_exit();
    s.assert_clean("alice");
}
