//! Bad input over a real socket: every case of the LMTP issue gets the reply the RFCs
//! prescribe, and nothing is lost, duplicated or half-written.

use crate::support::daemon::Server;
use crate::support::lmtp::{message, server};

/// After the scenario: no tmp file, and the users' indexes match their Maildirs.
fn settle(s: &Server) {
    assert!(s.tmp_files().is_empty(), "{:?}", s.tmp_files());
    for u in ["alice", "bob"] {
        s.assert_clean(u);
    }
}

fn file_text(s: &Server, user: &str) -> Vec<String> {
    s.files(user, "INBOX")
        .iter()
        .map(|p| String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned())
        .collect()
}

#[test]
fn bare_lf_and_bare_cr_line_ends() {
    let s = server("", "", &[]);
    let mut c = s.lmtp_session();
    // commands with bare LF are taken (as postfix and Dovecot do)
    c.send("MAIL FROM:<a@b.example>\nRCPT TO:<alice@x>\nDATA\n");
    c.expect("250 ");
    c.expect("250 ");
    c.expect("354 ");
    c.send("Subject: lf\n\nbare\rcr kept\nend\n.\n");
    c.expect("250 2.0.0 <alice@x>");
    let t = file_text(&s, "alice");
    assert_eq!(t.len(), 1);
    assert!(
        t[0].ends_with("Subject: lf\n\nbare\rcr kept\nend\n"),
        "{t:?}"
    );
    settle(&s);
}

#[test]
fn nul_and_8bit_bytes_and_long_lines_are_stored_as_sent() {
    let s = server("", "", &[]);
    let mut c = s.lmtp_session();
    c.send("MAIL FROM:<a@b.example> BODY=8BITMIME\r\nRCPT TO:<alice@x>\r\nDATA\r\n");
    c.expect("250 ");
    c.expect("250 ");
    c.expect("354 ");
    let long = "L".repeat(5000);
    let mut body = Vec::new();
    body.extend_from_slice("Subject: Grüße \u{00e9}\r\nX-Bin: a\0b\r\n\r\n".as_bytes());
    body.extend_from_slice(long.as_bytes());
    body.extend_from_slice(b"\r\n\xff\xfe raw\r\n.\r\n");
    c.send(&body);
    c.expect("250 2.0.0");
    let f = s.files("alice", "INBOX");
    let bytes = std::fs::read(&f[0]).unwrap();
    let expect_tail: Vec<u8> = [
        "Subject: Grüße \u{00e9}\nX-Bin: a\0b\n\n".as_bytes(),
        long.as_bytes(),
        b"\n\xff\xfe raw\n",
    ]
    .concat();
    assert!(bytes.ends_with(&expect_tail));
    // the index has the 8-bit subject in its header block
    assert_eq!(s.indexed_files("alice", "INBOX").len(), 1);
    settle(&s);
}

#[test]
fn overlong_command_lines() {
    let s = server("", "", &[]);
    let mut c = s.lmtp_session();
    // over 512: refused, session goes on
    c.send(format!("NOOP {}\r\n", "x".repeat(600)));
    c.expect("500 5.5.2");
    c.send("NOOP\r\n");
    c.expect("250 ");
    // over max_line_length (1000) without a line end: the session ends
    c.send("RCPT TO:<".to_string() + &"y".repeat(1200));
    c.expect("500 5.5.2");
    assert!(c.closed());
    settle(&s);
}

#[test]
fn message_without_header_body_separator() {
    let s = server("", "", &[]);
    let mut c = s.lmtp_session();
    let r = crate::support::lmtp::transaction(&mut c, &["alice@x"], "just a line, no headers\r\n");
    assert!(r[0].starts_with("250 2.0.0"), "{r:?}");
    let r = crate::support::lmtp::transaction(&mut c, &["alice@x"], "Subject: only headers\r\n");
    assert!(r[0].starts_with("250 2.0.0"), "{r:?}");
    // an empty message too
    let r = crate::support::lmtp::transaction(&mut c, &["alice@x"], "");
    assert!(r[0].starts_with("250 2.0.0"), "{r:?}");
    assert_eq!(s.indexed_files("alice", "INBOX").len(), 3);
    settle(&s);
}

#[test]
fn invalid_addresses_and_out_of_order_commands() {
    let s = server("", "", &[]);
    let mut c = s.lmtp_connect();
    c.send("MAIL FROM:<a@b.example>\r\n");
    c.expect("503 "); // before LHLO
    c.send("LHLO x\r\n");
    c.reply();
    c.send("RCPT TO:<alice@x>\r\n");
    c.expect("503 5.5.1"); // RCPT before MAIL
    c.send("DATA\r\n");
    c.expect("503 5.5.1"); // DATA before MAIL
    c.send("MAIL FROM:<no-at-sign\r\n");
    c.expect("501 5.5.4");
    c.send("MAIL FROM:<a@b.example>\r\n");
    c.expect("250 ");
    c.send("MAIL FROM:<a@b.example>\r\n");
    c.expect("503 5.5.1"); // nested MAIL
    for bad in ["<a b@x>", "<@x>", "alice@x", "<alice@>", "<a@b@c>"] {
        c.send(format!("RCPT TO:{bad}\r\n"));
        let r = c.reply();
        assert!(r.starts_with("501 ") || r.starts_with("550 "), "{bad}: {r}");
    }
    c.send("DATA\r\n");
    c.expect("554 5.5.1"); // no valid recipient
    c.send("BDAT 5 LAST\r\nhello");
    c.expect("554 5.5.1");
    c.send("RSET\r\nVRFY alice\r\n");
    c.expect("250 ");
    c.expect("252 ");
    c.send("QUIT\r\n");
    c.expect("221 ");
    assert!(s.files("alice", "INBOX").is_empty());
    settle(&s);
}

#[test]
fn pipelined_transactions_in_one_write() {
    let s = server("", "", &[]);
    let mut c = s.lmtp_session();
    // postfix style: everything in one write, then more transactions right behind
    let mut all = String::new();
    for i in 0..3 {
        all.push_str("MAIL FROM:<a@b.example>\r\nRCPT TO:<alice@x>\r\nRCPT TO:<nobody@x>\r\nRCPT TO:<bob@x>\r\nDATA\r\n");
        all.push_str(&message(&format!("p{i}")));
        all.push_str(".\r\n");
    }
    all.push_str("RSET\r\nQUIT\r\n");
    c.send(all);
    for _ in 0..3 {
        c.expect("250 2.1.0");
        c.expect("250 2.1.5");
        c.expect("550 5.1.1");
        c.expect("250 2.1.5");
        c.expect("354 ");
        c.expect("250 2.0.0 <alice@x>");
        c.expect("250 2.0.0 <bob@x>");
    }
    c.expect("250 ");
    c.expect("221 ");
    assert_eq!(s.indexed_files("alice", "INBOX").len(), 3);
    assert_eq!(s.indexed_files("bob", "INBOX").len(), 3);
    settle(&s);
}

#[test]
fn data_after_bdat_and_rcpt_after_bdat_are_refused() {
    let s = server("", "", &[]);
    let mut c = s.lmtp_session();
    c.send("MAIL FROM:<a@b.example>\r\nRCPT TO:<alice@x>\r\nBDAT 4\r\nab\r\n");
    c.expect("250 ");
    c.expect("250 ");
    c.expect("250 2.0.0");
    c.send("RCPT TO:<bob@x>\r\n");
    c.expect("503 ");
    c.send("DATA\r\n");
    c.expect("503 ");
    c.send("BDAT 0 LAST\r\n");
    c.expect("250 2.0.0 <alice@x>");
    assert_eq!(file_text(&s, "alice").len(), 1);
    assert!(s.files("bob", "INBOX").is_empty());
    settle(&s);
}

#[test]
fn rset_in_the_middle_discards_the_transaction() {
    let s = server("", "", &[]);
    let mut c = s.lmtp_session();
    c.send("MAIL FROM:<a@b.example>\r\nRCPT TO:<alice@x>\r\nBDAT 100000\r\n");
    c.expect("250 ");
    c.expect("250 ");
    c.send("z".repeat(100_000));
    c.expect("250 2.0.0");
    c.send("RSET\r\n");
    c.expect("250 ");
    let r = crate::support::lmtp::transaction(&mut c, &["bob@x"], &message("after"));
    assert!(r[0].starts_with("250 2.0.0"));
    assert!(s.files("alice", "INBOX").is_empty());
    settle(&s);
}
