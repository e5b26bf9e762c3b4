//! The LMTP server delivering: per-recipient replies, hard links, aliases, +detail,
//! quotas, size limits, dropped connections, and an index that stays in step.

use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use crate::support::lmtp::{message, server, server_with, transaction};

#[test]
fn multi_recipient_delivery_links_one_file_and_indexes_each() {
    let s = server("", "", &[]);
    let mut c = s.lmtp_session();
    let replies = transaction(
        &mut c,
        &["alice@example.org", "bob@example.org", "carol@example.org"],
        &message("three"),
    );
    for (r, who) in replies.iter().zip(["alice", "bob", "carol"]) {
        assert!(r.starts_with("250 2.0.0 <"), "{r}");
        assert!(r.contains(who), "{r}");
    }
    let mut inodes = Vec::new();
    for user in ["alice", "bob", "carol@example.org"] {
        let files = s.files(user, "INBOX");
        assert_eq!(files.len(), 1, "{user}: {files:?}");
        let text = std::fs::read_to_string(&files[0]).unwrap();
        assert!(
            text.starts_with("Return-Path: <sender@example.net>\n"),
            "{text}"
        );
        assert!(
            !text.contains("Delivered-To:"),
            "several recipients: no Delivered-To, as Dovecot"
        );
        assert!(text.contains("Subject: three\n"), "LF line ends: {text:?}");
        inodes.push(std::fs::metadata(&files[0]).unwrap().ino());
        let idx = s.indexed_files(user, "INBOX");
        assert_eq!(idx.len(), 1, "{user}");
        assert_eq!(
            idx[0].1,
            files[0].file_name().unwrap().to_str().unwrap(),
            "{user}"
        );
        s.assert_clean(user);
    }
    assert!(
        inodes.windows(2).all(|w| w[0] == w[1]),
        "hard links: {inodes:?}"
    );
    assert!(s.tmp_files().is_empty(), "{:?}", s.tmp_files());
    c.send("QUIT\r\n");
    c.expect("221 2.0.0");
}

#[test]
fn messages_on_both_sides_of_the_write_batch_arrive_byte_exact() {
    // under 64 KiB the file is made, written and delivered in one step at the end of the
    // data; over it, in batches as the data arrives; both must give the same bytes
    let s = server("", "", &[]);
    let mut c = s.lmtp_session();
    for (i, len) in [100usize, 65_000, 65_600, 300_000].into_iter().enumerate() {
        let line = "0123456789abcdefghijklmnopqrstuvwxyz.\r\n";
        let body: String = line.repeat(len / line.len() + 1);
        let msg = format!("{}{body}", message(&format!("size{i}")));
        for rcpts in [
            &["alice@example.org"][..],
            &["bob@example.org", "carol@example.org"],
        ] {
            for r in transaction(&mut c, rcpts, &msg) {
                assert!(r.starts_with("250 2.0.0 <"), "{len}: {r}");
            }
        }
        let want_end = msg.replace("\r\n", "\n");
        for user in ["alice", "bob", "carol@example.org"] {
            let files = s.files(user, "INBOX");
            assert_eq!(files.len(), i + 1, "{user}");
            let newest = files
                .iter()
                .find(|f| {
                    std::fs::read_to_string(f)
                        .unwrap()
                        .contains(&format!("size{i}"))
                })
                .unwrap();
            let text = std::fs::read_to_string(newest).unwrap();
            assert!(
                text.starts_with("Return-Path: <sender@example.net>\n"),
                "{user}"
            );
            assert!(text.ends_with(&want_end), "{user} {len}: the bytes differ");
            let idx = s.indexed_files(user, "INBOX");
            assert_eq!(idx.len(), i + 1, "{user}");
            s.assert_clean(user);
        }
    }
    assert!(s.tmp_files().is_empty(), "{:?}", s.tmp_files());
}

#[test]
fn single_recipient_gets_delivered_to_and_null_sender() {
    let s = server("", "", &[]);
    let mut c = s.lmtp_session();
    c.send("MAIL FROM:<>\r\nRCPT TO:<Alice@Example.ORG>\r\nDATA\r\n");
    c.expect("250 2.1.0");
    c.expect("250 2.1.5");
    c.expect("354 ");
    c.send("Subject: bounce\r\n\r\n..leading dot\r\n.\r\n");
    c.expect("250 2.0.0 <Alice@Example.ORG>");
    let files = s.files("alice", "INBOX");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let (trace, rest) = text.split_once("; ").unwrap();
    assert_eq!(
        trace,
        "Return-Path: <>\nDelivered-To: Alice@Example.ORG\n\
         Received: from test.client ([127.0.0.1])\n\tby mx.test with LMTP\n\
         \tid "
            .to_owned()
            + received_id(&text)
            + "\n\t(envelope-from <>)\n\tfor <Alice@Example.ORG>"
    );
    let (date, rest) = rest.split_once('\n').unwrap();
    assert!(
        date.ends_with(" +0000") && date.len() > 25,
        "RFC 5322 date: {date}"
    );
    assert_eq!(rest, "Subject: bounce\n\n.leading dot\n");
}

/// The `id` of a stored message's `Received:` header.
fn received_id(text: &str) -> &str {
    let after = text.split_once("\n\tid ").unwrap().1;
    after.split_once('\n').unwrap().0
}

#[test]
fn received_header_as_dovecot_writes_it() {
    // issue 15 #11: Dovecot 2.3's LMTP adds Received: (lmtp_add_received_header);
    // with several recipients it names none, and later transactions get `:T<n>` ids
    let s = server("", "", &[]);
    let mut c = s.lmtp_session();
    for r in transaction(
        &mut c,
        &["alice@example.org", "bob@example.org"],
        &message("one"),
    ) {
        assert!(r.starts_with("250 2.0.0"), "{r}");
    }
    for r in transaction(&mut c, &["alice@example.org"], &message("two")) {
        assert!(r.starts_with("250 2.0.0"), "{r}");
    }
    let read = |user: &str, subject: &str| {
        s.files(user, "INBOX")
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap())
            .find(|t| t.contains(&format!("Subject: {subject}\n")))
            .unwrap()
    };
    let one = read("bob", "one");
    assert!(
        one.starts_with(
            "Return-Path: <sender@example.net>\nReceived: from test.client ([127.0.0.1])\n\
             \tby mx.test with LMTP\n\tid "
        ),
        "{one}"
    );
    let id = received_id(&one);
    assert!(!id.contains(":T"), "first transaction: {id}");
    assert!(
        one.contains("\n\t(envelope-from <sender@example.net>); "),
        "{one}"
    );
    assert!(
        !one.contains("\tfor <"),
        "several recipients: no `for`: {one}"
    );
    let two = read("alice", "two");
    assert_eq!(received_id(&two), format!("{id}:T2"));
    assert!(
        two.contains("\n\t(envelope-from <sender@example.net>)\n\tfor <alice@example.org>; "),
        "{two}"
    );
    // a second session has another id
    let mut c2 = s.lmtp_session();
    transaction(&mut c2, &["carol@example.org"], &message("three"));
    let three = read("carol@example.org", "three");
    assert_ne!(received_id(&three).split(':').next(), Some(id));
}

#[test]
fn received_header_can_be_turned_off() {
    let s = server("add_received_header = false", "", &[]);
    let mut c = s.lmtp_session();
    transaction(&mut c, &["alice@example.org"], &message("plain"));
    let text = std::fs::read_to_string(&s.files("alice", "INBOX")[0]).unwrap();
    assert!(
        text.starts_with(
            "Return-Path: <sender@example.net>\nDelivered-To: alice@example.org\nFrom"
        ),
        "{text}"
    );
}

#[test]
fn unknown_users_get_550_and_the_others_their_mail() {
    let s = server("", "", &[]);
    let mut c = s.lmtp_session();
    c.send("MAIL FROM:<a@b.example>\r\nRCPT TO:<nobody@example.org>\r\nRCPT TO:<carol@example.net>\r\nRCPT TO:<bob@x.example>\r\nDATA\r\n");
    c.expect("250 ");
    let r = c.expect("550 5.1.1 <nobody@example.org>");
    assert!(r.contains("User unknown"), "{r}");
    // carol exists only as carol@example.org
    c.expect("550 5.1.1 <carol@example.net>");
    c.expect("250 2.1.5");
    c.expect("354 ");
    c.send(message("m"));
    c.send(".\r\n");
    c.expect("250 2.0.0 <bob@x.example>");
    assert_eq!(s.files("bob", "INBOX").len(), 1);
    assert!(!s.maildir("nobody").exists());
}

#[test]
fn aliases_expand_and_deduplicate() {
    let s = server(
        "aliases_file = \"aliases\"",
        "",
        &[(
            "aliases",
            "# team\nteam@example.org: alice, bob, alice\nall: carol@example.org\n",
        )],
    );
    let mut c = s.lmtp_session();
    let r = transaction(
        &mut c,
        &["TEAM@example.org", "all@any.example"],
        &message("alias"),
    );
    assert!(r.iter().all(|r| r.starts_with("250 2.0.0")), "{r:?}");
    assert_eq!(s.files("alice", "INBOX").len(), 1, "alice once");
    assert_eq!(s.files("bob", "INBOX").len(), 1);
    assert_eq!(s.files("carol@example.org", "INBOX").len(), 1);
    // team is a full-address alias: not at another domain
    c.send("MAIL FROM:<a@b.example>\r\nRCPT TO:<team@other.example>\r\n");
    c.expect("250 ");
    c.expect("550 5.1.1");
    for u in ["alice", "bob", "carol@example.org"] {
        s.assert_clean(u);
    }
}

#[test]
fn a_bad_aliases_file_is_refused_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("users"), crate::support::lmtp::USERS).unwrap();
    std::fs::write(dir.path().join("aliases"), "a: alice\nbroken line\n").unwrap();
    let text = crate::support::lmtp::config_text(dir.path(), "aliases_file = \"aliases\"", "");
    let config = maildex_config::Config::from_toml_str(&text, &dir.path().join("m.toml")).unwrap();
    let e = maildex_accounts::Accounts::load(config).unwrap_err();
    assert!(e.to_string().contains("aliases line 2"), "{e}");
}

#[test]
fn detail_selects_an_existing_folder_when_enabled() {
    let s = server("save_to_detail_mailbox = true", "", &[]);
    let alice = s.accounts.lookup("alice").unwrap().unwrap();
    let store = s.accounts.store(&alice).unwrap();
    store.create_mailbox("Lists").unwrap();
    let mut c = s.lmtp_session();
    let r = transaction(
        &mut c,
        &[
            "alice+Lists@example.org",
            "bob+nofolder@example.org",
            "alice+inbox@example.org",
        ],
        &message("detail"),
    );
    assert!(r.iter().all(|r| r.starts_with("250 2.0.0")), "{r:?}");
    assert_eq!(s.files("alice", ".Lists").len(), 1);
    assert_eq!(s.indexed_files("alice", "Lists").len(), 1);
    assert_eq!(s.files("alice", "INBOX").len(), 1, "+inbox");
    assert_eq!(s.files("bob", "INBOX").len(), 1, "no such folder: INBOX");
    s.assert_clean("alice");
    s.assert_clean("bob");
}

#[test]
fn detail_goes_to_inbox_unless_enabled() {
    let s = server("", "", &[]);
    let alice = s.accounts.lookup("alice").unwrap().unwrap();
    s.accounts
        .store(&alice)
        .unwrap()
        .create_mailbox("Lists")
        .unwrap();
    let mut c = s.lmtp_session();
    transaction(&mut c, &["alice+Lists@example.org"], &message("d"));
    assert_eq!(s.files("alice", "INBOX").len(), 1);
    assert!(s.files("alice", ".Lists").is_empty());
}

#[test]
fn quota_552_at_rcpt_and_after_data() {
    // alice: 1 KiB from the users file; bob: the 4 KiB default
    let s = server("", "quota = \"4k\"", &[]);
    std::fs::write(
        s.dir.path().join("users"),
        "alice:{PLAIN}pw::::::userdb_quota_rule=*:storage=1k\nbob:{PLAIN}pw\ncarol@example.org:{PLAIN}pw::::::userdb_quota_rule=*:storage=0\n",
    )
    .unwrap();
    s.accounts.reload().unwrap();
    let mut c = s.lmtp_session();
    let big = format!("{}{}\r\n", message("big"), "x".repeat(1500));
    // too big for alice only: after the data, for her alone
    let r = transaction(&mut c, &["alice@a.example", "bob@a.example"], &big);
    assert!(r[0].starts_with("552 5.2.2 <alice@a.example>"), "{r:?}");
    assert!(r[1].starts_with("250 2.0.0"), "{r:?}");
    assert!(s.files("alice", "INBOX").is_empty());
    // SIZE= over the quota: refused at RCPT already
    c.send("MAIL FROM:<a@b.example> SIZE=5000\r\nRCPT TO:<bob@a.example>\r\nRCPT TO:<carol@example.org>\r\nRSET\r\n");
    c.expect("250 ");
    c.expect("552 5.2.2 <bob@a.example>");
    c.expect("250 2.1.5");
    c.expect("250 ");
    // a second one fits (about 3.4 KiB of 4), a third would not: refused after the data
    let r = transaction(&mut c, &["bob@a.example"], &big);
    assert!(r[0].starts_with("250 2.0.0"), "{r:?}");
    let r = transaction(&mut c, &["bob@a.example"], &big);
    assert!(r[0].starts_with("552 5.2.2 <bob@a.example>"), "{r:?}");
    // already over (mail that came another way): refused at RCPT
    let bob = s.accounts.lookup("bob").unwrap().unwrap();
    s.accounts
        .store(&bob)
        .unwrap()
        .deliver(
            "INBOX",
            &mut "x".repeat(1000).as_bytes(),
            &maildex_store::DeliverOptions::default(),
        )
        .unwrap();
    c.send("MAIL FROM:<a@b.example>\r\nRCPT TO:<bob@a.example>\r\n");
    c.expect("250 ");
    c.expect("552 5.2.2 <bob@a.example> Mailbox over quota");
    assert_eq!(s.files("bob", "INBOX").len(), 3);
    assert!(s.tmp_files().is_empty());
    s.assert_clean("bob");
}

#[test]
fn message_too_big_is_552_and_leaves_nothing() {
    let s = server("max_message_size = 2000", "", &[]);
    let mut c = s.lmtp_session();
    c.send("MAIL FROM:<a@b.example> SIZE=2001\r\n");
    c.expect("552 5.3.4");
    let big = format!("{}{}\r\n", message("big"), "y".repeat(3000));
    c.send("MAIL FROM:<a@b.example>\r\nRCPT TO:<alice@x>\r\nRCPT TO:<bob@x>\r\nDATA\r\n");
    c.expect("250 ");
    c.expect("250 ");
    c.expect("250 ");
    c.expect("354 ");
    c.send(&big);
    c.send(".\r\n");
    c.expect("552 5.3.4 <alice@x>");
    c.expect("552 5.3.4 <bob@x>");
    // the session goes on
    let r = crate::support::lmtp::transaction(&mut c, &["alice@x"], &message("small"));
    assert!(r[0].starts_with("250 2.0.0"), "{r:?}");
    assert_eq!(s.files("alice", "INBOX").len(), 1);
    assert!(s.files("bob", "INBOX").is_empty());
    assert!(s.tmp_files().is_empty());
}

#[test]
fn too_many_recipients_get_452() {
    let s = server("max_recipients = 2", "", &[]);
    let mut c = s.lmtp_session();
    c.send("MAIL FROM:<a@b.example>\r\nRCPT TO:<alice@x>\r\nRCPT TO:<bob@x>\r\nRCPT TO:<carol@example.org>\r\nDATA\r\n");
    c.expect("250 ");
    c.expect("250 ");
    c.expect("250 ");
    c.expect("452 4.5.3");
    c.expect("354 ");
    c.send(message("two"));
    c.send(".\r\n");
    c.expect("250 2.0.0 <alice@x>");
    c.expect("250 2.0.0 <bob@x>");
    assert!(s.files("carol@example.org", "INBOX").is_empty());
}

#[test]
fn a_connection_dropped_mid_data_leaves_nothing() {
    let s = server("", "", &[]);
    for bdat in [false, true] {
        let mut c = s.lmtp_session();
        c.send("MAIL FROM:<a@b.example>\r\nRCPT TO:<alice@x>\r\nRCPT TO:<bob@x>\r\n");
        c.expect("250 ");
        c.expect("250 ");
        c.expect("250 ");
        if bdat {
            c.send("BDAT 1000000 LAST\r\n");
        } else {
            c.send("DATA\r\n");
            c.expect("354 ");
        }
        // more than one write batch, so the file exists on disk
        c.send(format!("Subject: cut\r\n\r\n{}", "z".repeat(150_000)));
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            s.tmp_files().len(),
            1,
            "the message is being written (bdat: {bdat})"
        );
        drop(c);
        let t0 = std::time::Instant::now();
        while !s.tmp_files().is_empty() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(s.tmp_files().is_empty(), "{:?}", s.tmp_files());
    }
    assert!(s.files("alice", "INBOX").is_empty());
    assert!(s.files("bob", "INBOX").is_empty());
    s.assert_clean("alice");
}

#[test]
fn bdat_delivers_chunks_as_one_message() {
    let s = server("", "", &[]);
    let mut c = s.lmtp_session();
    c.send("MAIL FROM:<a@b.example>\r\nRCPT TO:<alice@x>\r\nRCPT TO:<bob@x>\r\n");
    c.expect("250 ");
    c.expect("250 ");
    c.expect("250 ");
    let part1 = "Subject: chunks\r\n\r\nline one\r";
    let part2 = "\n.\r\nlast\r\n";
    c.send(format!("BDAT {}\r\n{part1}", part1.len()));
    c.expect("250 2.0.0");
    c.send(format!("BDAT {} LAST\r\n{part2}", part2.len()));
    c.expect("250 2.0.0 <alice@x>");
    c.expect("250 2.0.0 <bob@x>");
    let f = s.files("bob", "INBOX");
    let text = std::fs::read_to_string(&f[0]).unwrap();
    assert!(
        text.ends_with("Subject: chunks\n\nline one\n.\nlast\n"),
        "a lone dot in BDAT is data: {text:?}"
    );
}

#[test]
fn shutdown_waits_for_the_transaction_then_says_421() {
    let mut s = server_with("", "", &[], |c| {
        c.lmtp.shutdown_timeout = Duration::from_secs(10);
    });
    let mut idle = s.lmtp_session();
    let mut busy = s.lmtp_session();
    busy.send("MAIL FROM:<a@b.example>\r\nRCPT TO:<alice@x>\r\nDATA\r\n");
    busy.expect("250 ");
    busy.expect("250 ");
    busy.expect("354 ");
    let token_thread = {
        let t0 = std::time::Instant::now();
        let handle = std::thread::spawn(move || {
            s.stop();
            (s, t0.elapsed())
        });
        idle.expect("421 4.3.2");
        assert!(idle.closed());
        busy.send(message("late"));
        busy.send(".\r\n");
        busy.expect("250 2.0.0");
        busy.expect("421 4.3.2");
        handle
    };
    let (s, _) = token_thread.join().unwrap();
    assert_eq!(s.files("alice", "INBOX").len(), 1);
}

#[test]
fn idle_clients_time_out_with_421() {
    let s = server_with("", "", &[], |c| {
        c.lmtp.command_timeout = Duration::from_millis(300);
    });
    let mut c = s.lmtp_session();
    c.expect("421 4.4.2");
    assert!(c.closed());
}
