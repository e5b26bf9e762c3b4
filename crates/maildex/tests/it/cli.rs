//! The admin CLI run as a real process against a real config, users file, Maildir and index.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use maildex_store::{MailboxId, Uid};

fn maildex(config: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_maildex"));
    cmd.args(args)
        .arg("--config")
        .arg(config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run maildex");
    if let Some(text) = stdin {
        // a command may exit without reading its input (deliver to an unknown user does)
        match child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
        {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("write stdin: {e}"),
            _ => {}
        }
    }
    drop(child.stdin.take());
    child.wait_with_output().expect("maildex output")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn setup() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let config = dir.path().join("maildex.toml");
    fs::write(
        &config,
        format!(
            "[storage]\nmail_location = \"{d}/mail/%d/%n/Maildir\"\nindex_root = \"{d}/index/%d/%n\"\nfsync = false\n\
             [auth]\nusers_file = \"{d}/users\"\n"
        ),
    )
    .unwrap();
    (dir, config)
}

#[test]
fn users_can_be_added_listed_and_given_new_passwords() {
    let (dir, config) = setup();
    let o = maildex(
        &config,
        &["user", "add", "alice@example.org", "--password-stdin"],
        Some("s3cret\n"),
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = maildex(
        &config,
        &["user", "add", "alice@example.org", "--password-stdin"],
        Some("again\n"),
    );
    assert!(!o.status.success(), "adding twice must fail: {}", text(&o));
    let o = maildex(&config, &["user", "add", "bob"], None);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("bob: password "), "{}", text(&o));
    let o = maildex(
        &config,
        &["user", "passwd", "alice@example.org", "--password-stdin"],
        Some("n3w\n"),
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = maildex(&config, &["user", "list"], None);
    let listed = text(&o);
    assert!(
        listed.contains("alice@example.org\tARGON2ID") && listed.contains("bob\tARGON2ID"),
        "{listed}"
    );
    // the file is a Dovecot passwd-file: user:{SCHEME}hash:...
    let users = fs::read_to_string(dir.path().join("users")).unwrap();
    let alice = users
        .lines()
        .find(|l| l.starts_with("alice@example.org:"))
        .unwrap();
    assert!(
        alice.starts_with("alice@example.org:{ARGON2ID}$argon2id$"),
        "{alice}"
    );
    let hash = maildex_auth::PasswordHash::parse(alice.split(':').nth(1).unwrap());
    assert!(maildex_auth::verify(&hash, b"n3w").unwrap());
    assert!(!maildex_auth::verify(&hash, b"s3cret").unwrap());
}

#[test]
fn index_dump_check_rebuild_and_compact() {
    let (dir, config) = setup();
    let o = maildex(
        &config,
        &["user", "add", "carol@example.org", "--password-stdin"],
        Some("pw\n"),
    );
    assert!(o.status.success(), "{}", text(&o));
    let maildir = dir.path().join("mail/example.org/carol/Maildir");
    let index = dir.path().join("index/example.org/carol");
    {
        let store = maildex_store::UserStore::open(&maildir, &index, Default::default()).unwrap();
        for i in 0..3 {
            let msg = format!("From: x@example.org\nSubject: note {i}\n\nbody {i}\n");
            store
                .deliver("INBOX", &mut msg.as_bytes(), &Default::default())
                .unwrap();
        }
    }
    // delivery wrote no full text: not indexed yet, which is no difference (exit 0)
    let o = maildex(&config, &["index", "check", "--all"], None);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("INBOX: 3 messages whose full text is not indexed yet"),
        "{}",
        text(&o)
    );
    let o = maildex(&config, &["index", "dump", "-u", "carol@example.org"], None);
    assert!(
        text(&o).contains("fts-pending      3 messages"),
        "{}",
        text(&o)
    );
    // --repair indexes them
    let o = maildex(&config, &["index", "check", "--all", "--repair"], None);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("full text of 3 messages indexed"),
        "{}",
        text(&o)
    );
    let o = maildex(&config, &["index", "check", "--all"], None);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("not indexed yet"), "{}", text(&o));

    // a full-text record lost: pending again, and --repair indexes it from the file
    {
        let store = maildex_store::UserStore::open(&maildir, &index, Default::default()).unwrap();
        let removed = store
            .index()
            .write_retrying(|w| w.remove_text(MailboxId(1), Uid(2)))
            .unwrap();
        assert!(removed);
    }
    let o = maildex(&config, &["index", "check", "--all"], None);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("INBOX: 1 messages whose full text is not indexed yet"),
        "{}",
        text(&o)
    );
    let o = maildex(&config, &["index", "check", "--all", "--repair"], None);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("full text of 1 messages indexed"),
        "{}",
        text(&o)
    );
    let o = maildex(&config, &["index", "check", "--all"], None);
    assert!(o.status.success(), "{}", text(&o));
    // and rebuild --fts-only rewrites every record
    {
        let store = maildex_store::UserStore::open(&maildir, &index, Default::default()).unwrap();
        let removed = store
            .index()
            .write_retrying(|w| w.remove_text(MailboxId(1), Uid(3)))
            .unwrap();
        assert!(removed);
    }
    let o = maildex(&config, &["index", "rebuild", "--all", "--fts-only"], None);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("carol@example.org: 3 full-text records rewritten"),
        "{}",
        text(&o)
    );
    let o = maildex(&config, &["index", "check", "--all"], None);
    assert!(o.status.success(), "{}", text(&o));

    let o = maildex(
        &config,
        &["index", "dump", "--user", "carol@example.org"],
        None,
    );
    assert!(
        text(&o).contains("fts-text         3 records"),
        "{}",
        text(&o)
    );
    // the last block: the pages of every database, the full-text ones among them
    let pages = text(&o);
    let pages = pages
        .split_once("databases (pages of ")
        .map(|(_, p)| p.to_string())
        .unwrap_or_default();
    for db in ["messages", "fts-text", "fts-sig", "fts-words"] {
        assert!(
            pages.lines().any(|l| l.trim_start().starts_with(db)
                && l.contains(" entries, ")
                && l.ends_with(" bytes")),
            "{db}: {pages}"
        );
    }

    let o = maildex(
        &config,
        &[
            "index",
            "dump",
            "--user",
            "carol@example.org",
            "--mailbox",
            "inbox",
            "--uid",
            "2",
        ],
        None,
    );
    let dumped = text(&o);
    assert!(o.status.success(), "{dumped}");
    assert!(
        dumped.contains("mailbox 1 \"INBOX\"")
            && dumped.contains("uid 2")
            && dumped.contains("note 1"),
        "{dumped}"
    );
    assert!(!dumped.contains("uid 3"), "{dumped}");

    // another tool removes a file: check reports it and exits 1
    let new = maildir.join("new");
    let victim = fs::read_dir(&new).unwrap().flatten().next().unwrap().path();
    fs::remove_file(&victim).unwrap();
    let o = maildex(
        &config,
        &["index", "check", "--user", "carol@example.org"],
        None,
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("is gone"), "{}", text(&o));

    // --with-text: listing records first, then the full text in the same run, each timed
    let o = maildex(&config, &["index", "rebuild", "--all", "--with-text"], None);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("2 messages indexed"), "{}", text(&o));
    assert!(
        text(&o).contains("full text of 2 messages in"),
        "{}",
        text(&o)
    );
    let o = maildex(&config, &["index", "check", "--all"], None);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("not indexed yet"), "{}", text(&o));
    // by default (and with the --defer-text of earlier versions) the full text is left to
    // the daemon: pending, not a difference
    for args in [
        &["index", "rebuild", "--all"][..],
        &["index", "rebuild", "--all", "--defer-text"][..],
    ] {
        let o = maildex(&config, args, None);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        assert!(
            text(&o).contains("full text of 2 messages left to the daemon"),
            "{args:?}: {}",
            text(&o)
        );
        let o = maildex(&config, &["index", "check", "--all"], None);
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            text(&o).contains("INBOX: 2 messages whose full text is not indexed yet"),
            "{}",
            text(&o)
        );
    }
    let o = maildex(
        &config,
        &["index", "rebuild", "--all", "--with-text", "--defer-text"],
        None,
    );
    assert!(!o.status.success(), "{}", text(&o));

    let o = maildex(&config, &["index", "compact", "--all"], None);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("carol@example.org: "), "{}", text(&o));
    let o = maildex(&config, &["index", "check", "--all"], None);
    assert!(o.status.success(), "after compact: {}", text(&o));
}

#[test]
fn a_missing_config_is_a_clear_error() {
    let o = maildex(
        Path::new("/nonexistent/maildex.toml"),
        &["index", "check", "--all"],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("/nonexistent/maildex.toml"),
        "{}",
        text(&o)
    );
}

/// Files in one Maildir folder's `new/`.
fn new_files(dir: &Path) -> Vec<std::path::PathBuf> {
    fs::read_dir(dir.join("new"))
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

#[test]
fn deliver_as_an_lda_with_sysexits() {
    let (dir, config) = setup();
    let o = maildex(
        &config,
        &["user", "add", "alice@example.org", "--password-stdin"],
        Some("pw\n"),
    );
    assert!(o.status.success(), "{}", text(&o));
    let maildir = dir.path().join("mail/example.org/alice/Maildir");
    let msg = "From: bob@example.net\nSubject: hi\n\nhello\n";

    // unknown user: 67 (EX_NOUSER), postfix bounces; nothing is written
    let o = maildex(
        &config,
        &["deliver", "--user", "nobody@example.org"],
        Some(msg),
    );
    assert_eq!(o.status.code(), Some(67), "{}", text(&o));
    assert!(text(&o).contains("unknown user"), "{}", text(&o));
    assert!(!dir.path().join("mail/example.org/nobody").exists());
    // a user name with a line break and an escape code is written escaped (issue 15 #32:
    // postfix puts this line in its log and in bounces)
    let o = maildex(
        &config,
        &[
            "deliver",
            "--user",
            "x\nmaildex deliver: delivered\x1b[2J@example.org",
        ],
        Some(msg),
    );
    assert_eq!(o.status.code(), Some(67), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    // the log line (issue 15 #8) and the error line for postfix; the name forges neither
    assert_eq!(
        err.lines()
            .filter(|l| l.starts_with("maildex deliver:"))
            .count(),
        1,
        "{err:?}"
    );
    assert!(
        !err.lines()
            .any(|l| l.starts_with("maildex deliver: delivered")),
        "{err:?}"
    );
    assert!(!err.contains('\x1b'), "{err:?}");
    assert!(err.contains("x\\nmaildex deliver"), "{err:?}");

    // delivered, with the envelope written as Dovecot's deliver writes it
    let o = maildex(
        &config,
        &[
            "deliver",
            "-u",
            "alice@example.org",
            "-f",
            "<bob@example.net>",
            "-a",
            "alice@example.org",
        ],
        Some(msg),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let files = new_files(&maildir);
    assert_eq!(files.len(), 1);
    let got = fs::read_to_string(&files[0]).unwrap();
    assert_eq!(
        got,
        format!("Return-Path: <bob@example.net>\nDelivered-To: alice@example.org\n{msg}")
    );

    // a mailbox that does not exist means INBOX; one that exists gets the message
    let o = maildex(
        &config,
        &["deliver", "-u", "alice@example.org", "-m", "Nope"],
        Some(msg),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(new_files(&maildir).len(), 2);
    for sub in ["cur", "new", "tmp"] {
        fs::create_dir_all(maildir.join(".Lists").join(sub)).unwrap();
    }
    let o = maildex(
        &config,
        &["deliver", "-u", "alice@example.org", "-m", "Lists"],
        Some(msg),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(new_files(&maildir.join(".Lists")).len(), 1);

    // an envelope address cannot inject header lines
    let o = maildex(
        &config,
        &[
            "deliver",
            "-u",
            "alice@example.org",
            "-f",
            "x@y\nX-Injected: 1",
        ],
        Some(msg),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for f in new_files(&maildir) {
        assert!(
            !fs::read_to_string(&f).unwrap().contains("\nX-Injected"),
            "{}",
            f.display()
        );
    }

    // no message: 65 (EX_DATAERR)
    let o = maildex(&config, &["deliver", "-u", "alice@example.org"], Some(""));
    assert_eq!(o.status.code(), Some(65), "{}", text(&o));

    // everything delivered is indexed
    let o = maildex(&config, &["index", "check", "--all"], None);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn deliver_fails_temporarily_when_the_spool_is_unusable() {
    let (dir, config) = setup();
    let o = maildex(
        &config,
        &["user", "add", "carol@example.org", "--password-stdin"],
        Some("pw\n"),
    );
    assert!(o.status.success(), "{}", text(&o));
    // a file where the mail folder should be: 75 (EX_TEMPFAIL), postfix keeps the message
    fs::write(dir.path().join("mail"), b"").unwrap();
    let o = maildex(
        &config,
        &["deliver", "-u", "carol@example.org"],
        Some("Subject: x\n\nbody\n"),
    );
    assert_eq!(o.status.code(), Some(75), "{}", text(&o));
    assert!(
        text(&o).contains("mail"),
        "the error names the path: {}",
        text(&o)
    );
}

#[test]
fn deliver_refuses_over_quota_with_77_and_leaves_nothing() {
    let (dir, config) = setup();
    // a 1 KiB quota, as Dovecot's passwd-file userdb extra field sets it
    fs::write(
        dir.path().join("users"),
        "dora@example.org:{PLAIN}pw::::::userdb_quota_rule=*:storage=1K\n",
    )
    .unwrap();
    let maildir = dir.path().join("mail/example.org/dora/Maildir");
    let small = "Subject: small\n\nhello\n";
    let o = maildex(&config, &["deliver", "-u", "dora@example.org"], Some(small));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(new_files(&maildir).len(), 1);

    // this one would take the mailbox over 1 KiB: refused once its size is known
    let big = format!("Subject: big\n\n{}\n", "x".repeat(2000));
    let o = maildex(&config, &["deliver", "-u", "dora@example.org"], Some(&big));
    assert_eq!(o.status.code(), Some(77), "{}", text(&o));
    assert!(text(&o).contains("5.2.2"), "{}", text(&o));
    assert_eq!(new_files(&maildir).len(), 1, "nothing delivered");
    let tmp: Vec<_> = fs::read_dir(maildir.join("tmp"))
        .unwrap()
        .flatten()
        .collect();
    assert!(tmp.is_empty(), "tmp/ left behind: {tmp:?}");

    // fill it exactly to the limit (RFC822.SIZE counts CRLF: 25 bytes so far, and
    // 17 + 980 + 2 now), then anything is refused before it is read
    let filler = format!("Subject: fill\n\n{}\n", "y".repeat(980));
    let o = maildex(
        &config,
        &["deliver", "-u", "dora@example.org"],
        Some(&filler),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = maildex(&config, &["deliver", "-u", "dora@example.org"], Some(small));
    assert_eq!(o.status.code(), Some(77), "{}", text(&o));
    assert_eq!(new_files(&maildir).len(), 2);

    let o = maildex(&config, &["index", "check", "--all"], None);
    assert!(o.status.success(), "{}", text(&o));
}

/// Files in `new/`, `cur/` and `tmp/` of `maildir`.
fn files_in(maildir: &Path) -> [Vec<String>; 3] {
    ["new", "cur", "tmp"].map(|sub| {
        let mut v: Vec<String> = fs::read_dir(maildir.join(sub))
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    })
}

/// Issue 5 (crash safety): an injected EIO or ENOSPC at each write step of `maildex
/// deliver` (tmp write and fsync, the link into new/, the folder fsync, the uidlist
/// append, the index commit) exits 75 so postfix retries, and leaves the Maildir and the
/// index as they were: nothing the retry could duplicate, no temporary file, `index check`
/// clean. Both delivery paths: a user without a quota (the file is renamed from tmp/) and
/// one with a quota (written to tmp/, measured, then linked). Regression: an EIO from the
/// folder fsync after the link or rename left the message in new/, and the retry
/// delivered it twice.
#[test]
fn deliver_leaves_nothing_behind_when_a_write_step_fails() {
    let (dir, config) = setup();
    let text_of = fs::read_to_string(&config).unwrap();
    fs::write(&config, text_of.replace("fsync = false", "fsync = true")).unwrap();
    fs::write(
        dir.path().join("users"),
        "dora@example.org:{PLAIN}pw\n\
         quinn@example.org:{PLAIN}pw::::::userdb_quota_rule=*:storage=1G\n",
    )
    .unwrap();
    for user in ["dora", "quinn"] {
        fault_each_write_step(
            &config,
            &dir.path().join(format!("mail/example.org/{user}/Maildir")),
            user,
        );
    }
}

fn fault_each_write_step(config: &Path, maildir: &Path, user: &str) {
    let msg = "From: bob@example.net\nSubject: faults\n\nbody\n";
    let address = format!("{user}@example.org");
    let deliver = |fault: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_maildex"));
        cmd.args(["deliver", "-u", &address, "--config"])
            .arg(config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(f) = fault {
            cmd.env("MAILDEX_FAULT", f);
        }
        let mut child = cmd.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(msg.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    // the mailbox exists and is indexed before the faults start
    let o = deliver(None);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let points = [
        "tmp_write",
        "tmp_fsync",
        "link",
        "dir_fsync",
        "uidlist_append",
        "index_commit",
    ];
    let mut fired = 0;
    let mut runs = 0;
    for point in points {
        for action in ["eio", "enospc"] {
            for nth in 1..=2 {
                let before = files_in(maildir);
                let plan = format!("{point}:{nth}:{action}");
                let o = deliver(Some(&plan));
                runs += 1;
                let out = text(&o);
                if out.contains("maildex-fault: fired") {
                    fired += 1;
                    assert_eq!(o.status.code(), Some(75), "{user} {plan}: {out}");
                    assert_eq!(files_in(maildir), before, "{user} {plan} left files: {out}");
                } else {
                    assert_eq!(o.status.code(), Some(0), "{user} {plan}: {out}");
                }
                let o = maildex(config, &["index", "check", "--user", &address], None);
                assert!(o.status.success(), "{user} after {plan}: {}", text(&o));
            }
        }
    }
    // every point is reached at least once per delivery
    assert!(
        fired >= points.len() * 2,
        "{user}: only {fired} faults fired"
    );
    // what got 0 is there once: the first delivery and every one whose fault did not fire
    let [new, cur, tmp] = files_in(maildir);
    assert!(tmp.is_empty() && cur.is_empty(), "{user}: {tmp:?} {cur:?}");
    assert_eq!(new.len(), 1 + runs - fired, "{user}: {new:?}");
}

#[test]
fn an_empty_maildex_log_keeps_the_configured_level_and_pipes_get_no_colour() {
    // issue 15 #8: `MAILDEX_LOG=` (set but empty) silenced every line, and a log written
    // to a file or journald was full of ANSI colour codes
    let (dir, config) = setup();
    let mut text = fs::read_to_string(&config).unwrap();
    text.push_str("[imap]\nlisten = [\"127.0.0.1:0\"]\nlisten_tls = []\n[lmtp]\nlisten = []\n");
    fs::write(&config, text).unwrap();
    fs::write(dir.path().join("users"), "").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_maildex"))
        .args(["serve", "--config"])
        .arg(&config)
        .env("MAILDEX_LOG", "")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run maildex serve");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut lines = Vec::new();
    while !lines.iter().any(|l: &String| l.contains("IMAP listening")) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => lines.push(line),
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let all = lines.join("\n");
    assert!(
        all.contains("INFO") && all.contains("IMAP listening"),
        "the [log] level (info) applies: {all:?}"
    );
    assert!(
        !all.contains('\u{1b}'),
        "no colour codes into a pipe: {all:?}"
    );
}
