//! A real postfix in front of maildex: mail sent through postfix's SMTP port to several
//! recipients must arrive exactly once in each Maildir, indexed, over LMTP (TCP and a
//! unix socket, with an IMAP session of each recipient idling meanwhile that must see
//! every message arrive) and through `maildex deliver` as a pipe transport.
//!
//! Needs postfix and root (a private instance with its own queue on loopback). Skipped
//! with a message when postfix is missing, unless `CI` is set: then it must run.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::postfix::{group_id, postfix_available, smtp_send, Postfix};
use crate::support::process::maildex_bin;

/// The `main.cf` lines that send the test domains to `transport`.
fn routing(transport: &str) -> String {
    format!("virtual_mailbox_domains = example.org, example.net\nvirtual_transport = {transport}\n")
}

fn test_message(i: usize) -> String {
    format!(
        "From: sender@example.net\r\nTo: team@example.org\r\nSubject: via postfix {i}\r\n\
         Message-ID: <pf{i}@example.net>\r\n\r\nBody {i}.\r\n..dot line\r\n"
    )
}

/// Waits (bounded) until each user has `n` messages, filed and indexed (the file is
/// renamed into the Maildir before the index commit, and LMTP answers after both: a file
/// can be seen a moment before its record), then checks each message is there exactly
/// once, is indexed, and the index is clean.
fn check_arrivals(
    pf: &Postfix,
    n: usize,
    users: &[&str],
    files: impl Fn(&str) -> Vec<PathBuf>,
    indexed: impl Fn(&str) -> usize,
) {
    let t0 = Instant::now();
    loop {
        let done = users.iter().all(|u| files(u).len() >= n && indexed(u) >= n);
        if done {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "mail did not arrive in time; postfix log:\n{}",
            pf.log()
        );
        pf.flush();
        std::thread::sleep(Duration::from_millis(200));
    }
    for u in users {
        let f = files(u);
        assert_eq!(f.len(), n, "{u}: {f:?}");
        for i in 0..n {
            let hits = f
                .iter()
                .filter(|p| {
                    std::fs::read_to_string(p)
                        .unwrap()
                        .contains(&format!("Message-ID: <pf{i}@example.net>"))
                })
                .count();
            assert_eq!(hits, 1, "{u}: message {i}");
        }
        assert_eq!(indexed(u), n, "{u}: indexed");
        let text = std::fs::read_to_string(&f[0]).unwrap();
        assert!(text.contains("\n.dot line\n"), "dot-unstuffed once: {text}");
        assert!(text.starts_with("Return-Path: <sender@example.net>\n"));
    }
}

/// An IMAP session of `user` on its INBOX, in IDLE.
fn idle_session(s: &crate::support::daemon::Server, user: &str) -> crate::support::imap::Client {
    let mut c = s.select(user, "INBOX");
    c.send("i1 IDLE\r\n");
    let r = c.read();
    assert!(r.is_continuation(), "IDLE: {}", r.text());
    c
}

/// Reads an IDLE session's untagged responses (each parsed by imap-codec) until it has
/// announced `n` messages; false if that does not happen within `wait`.
fn idle_sees(c: &mut crate::support::imap::Client, n: usize, wait: Duration) -> bool {
    let t0 = Instant::now();
    while let Some(left) = wait.checked_sub(t0.elapsed()) {
        let Some(r) = c.read_within(left) else {
            return false;
        };
        let text = r.text();
        let exists = text
            .strip_prefix("* ")
            .and_then(|t| t.trim_end().strip_suffix(" EXISTS"))
            .and_then(|t| t.parse::<usize>().ok());
        if exists.is_some_and(|e| e >= n) {
            return true;
        }
    }
    false
}

/// The whole daemon (IMAP and LMTP) behind postfix: every recipient's IMAP session idles
/// on its INBOX while postfix delivers over LMTP, and must see each message arrive.
fn run_lmtp_case(unix: bool) {
    if !postfix_available() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let pfdir = root.path().join("postfix");
    let sock = root.path().join("lmtp.sock");
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // the socket as an admin sets it up for postfix, whose lmtp client runs as the
    // postfix user: group postfix, mode 0660, nobody else may connect
    let lmtp_extra = if unix {
        format!(
            "listen = [\"127.0.0.1:0\", \"unix:{}\"]\nsocket_mode = \"0660\"\n\
             socket_group = \"postfix\"\naliases_file = \"aliases\"",
            sock.display()
        )
    } else {
        "aliases_file = \"aliases\"".to_owned()
    };
    let s = crate::support::daemon::Server::start_with(crate::support::daemon::Opts {
        lmtp_extra,
        files: vec![
            ("users", crate::support::lmtp::USERS.to_owned()),
            ("aliases", "team@example.org: alice, bob\n".to_owned()),
        ],
        ..Default::default()
    });
    if unix {
        let m = std::fs::metadata(&sock).unwrap();
        assert_eq!(m.permissions().mode() & 0o7777, 0o660, "socket mode");
        assert_eq!(m.gid(), group_id("postfix"), "socket group");
    }
    let transport = if unix {
        format!("lmtp:unix:{}", sock.display())
    } else {
        format!("lmtp:inet:{}", s.lmtp)
    };
    // one idling session per recipient, before any mail is sent
    let users = [("alice", 4), ("bob", 4), ("carol@example.org", 3)];
    let mut idlers: Vec<_> = users.iter().map(|(u, _)| idle_session(&s, u)).collect();
    let pf = Postfix::start(&pfdir, &routing(&transport), "");
    for i in 0..3 {
        smtp_send(
            pf.smtp_port,
            "sender@example.net",
            &["alice@example.org", "bob@example.net", "carol@example.org"],
            &test_message(i),
        );
    }
    // the alias: alice and bob get one more each
    smtp_send(
        pf.smtp_port,
        "sender@example.net",
        &["team@example.org"],
        &test_message(3),
    );
    for (&(u, n), c) in users.iter().zip(&mut idlers) {
        check_arrivals(
            &pf,
            n,
            &[u],
            |u| s.files(u, "INBOX"),
            |u| s.indexed(u, "INBOX"),
        );
        // the session was idle throughout: the deliveries woke it
        assert!(
            idle_sees(c, n, Duration::from_secs(30)),
            "{u}: the IDLE session did not see {n} messages"
        );
        c.send("DONE\r\n");
        assert_eq!(c.until("i1").status(), "OK");
        let fetched = c.ok("FETCH 1:* (FLAGS ENVELOPE)");
        assert_eq!(fetched.fetches().len(), n, "{u}: {}", fetched.all());
        s.assert_clean(u);
    }
    assert!(s.tmp_files().is_empty(), "{:?}", s.tmp_files());
    let problems = pf.problems();
    assert!(problems.is_empty(), "postfix complained:\n{problems:#?}");
    let log = pf.log();
    assert!(
        log.contains("status=sent (250 2.0.0"),
        "delivered over LMTP: {log}"
    );
}

#[test]
fn postfix_delivers_over_lmtp_tcp() {
    run_lmtp_case(false);
}

#[test]
fn postfix_delivers_over_lmtp_unix_socket() {
    run_lmtp_case(true);
}

#[test]
fn postfix_pipes_to_maildex_deliver() {
    if !postfix_available() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // a copy the pipe's user (nobody) can run: the build folder may be under a 0700 one
    let bin = root.path().join("maildex-bin");
    std::fs::copy(maildex_bin(), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = root.path().join("maildex");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("users"), crate::support::lmtp::USERS).unwrap();
    let cfg = data.join("maildex.toml");
    std::fs::write(&cfg, crate::support::lmtp::config_text(&data, "", "")).unwrap();
    // the pipe runs as nobody: the data folder is theirs
    let st = Command::new("chown")
        .args(["-R", "nobody"])
        .arg(&data)
        .status()
        .unwrap();
    assert!(st.success());
    let master = format!(
        "maildex   unix  -       n       n       -       -       pipe\n  \
         flags=u user=nobody argv={} deliver --config {} --user ${{user}}@${{domain}} \
         --from ${{sender}} --recipient ${{original_recipient}}\n",
        bin.display(),
        cfg.display()
    );
    let pf = Postfix::start(
        &root.path().join("postfix"),
        &format!(
            "{}maildex_destination_recipient_limit = 1",
            routing("maildex")
        ),
        &master,
    );
    for i in 0..2 {
        smtp_send(
            pf.smtp_port,
            "sender@example.net",
            &["alice@example.org", "bob@example.org"],
            &test_message(i),
        );
    }
    // an unknown user: maildex deliver refuses before reading stdin; postfix must
    // bounce it (exit 67), not defer it (a broken pipe)
    smtp_send(
        pf.smtp_port,
        "sender@example.net",
        &["nobody@example.org"],
        &test_message(9),
    );
    let config = maildex_config::Config::load(&cfg).unwrap();
    let accounts = maildex_accounts::Accounts::load(config.clone()).unwrap();
    let files = |u: &str| {
        let m = config.storage.paths_for(u).unwrap().maildir;
        let mut v = Vec::new();
        for sub in ["new", "cur"] {
            if let Ok(rd) = std::fs::read_dir(m.join(sub)) {
                v.extend(rd.flatten().map(|e| e.path()));
            }
        }
        v
    };
    let indexed = |u: &str| {
        let user = accounts.lookup(u).unwrap().unwrap();
        let store = accounts.store(&user).unwrap();
        store
            .index()
            .read(|r| {
                let id = r.mailbox_id("INBOX")?.unwrap();
                Ok(r.states(id)?.len())
            })
            .unwrap()
    };
    check_arrivals(&pf, 2, &["alice", "bob"], files, indexed);
    let t0 = Instant::now();
    let outcome = loop {
        let log = pf.log();
        let line = log
            .lines()
            .find(|l| l.contains("to=<nobody@example.org>") && l.contains("status="))
            .map(str::to_owned);
        if let Some(l) = line {
            break l;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no outcome for nobody@: {log}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        outcome.contains("status=bounced") && outcome.contains("unknown user"),
        "an unknown user must bounce (exit 67): {outcome}"
    );
    let problems: Vec<String> = pf.problems();
    assert!(problems.is_empty(), "postfix complained:\n{problems:#?}");
}
