//! The harness against the real Dovecot: IMAP login and SELECT on the configured Maildir
//! layout, an LMTP delivery that lands in that Maildir, and no process left after drop, even
//! when the owning thread panics.
//!
//! Needs `dovecot-core dovecot-imapd dovecot-lmtpd`, so ignored by default:
//! `cargo test -p maildex-dovecot-harness -- --ignored`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use maildex_dovecot_harness::{Dovecot, Options, User};

const USER: &str = "user0001@example.org";

fn maildir(root: &Path) -> std::path::PathBuf {
    root.join("example.org/user0001/Maildir")
}

fn start(tmp: &Path) -> Dovecot {
    let mail = tmp.join("mail");
    let md = maildir(&mail);
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(md.join(sub)).unwrap();
    }
    for i in 0..3 {
        std::fs::write(
            md.join(format!("cur/100{i}.M1P1.host,S=40:2,S")),
            format!("From: a@example.org\nSubject: m{i}\n\nbody {i}\n"),
        )
        .unwrap();
    }
    let opts = Options {
        mail_location: format!("maildir:{}/%d/%n/Maildir", mail.display()),
        users: vec![User::new(USER, "secret")],
        mail_root: Some(mail),
        ..Options::default()
    };
    Dovecot::start(&tmp.join("dc"), opts).unwrap()
}

/// Reads lines until one starts with `prefix`; returns all lines read.
fn until(r: &mut impl BufRead, prefix: &str) -> String {
    let mut all = String::new();
    loop {
        let mut line = String::new();
        assert!(r.read_line(&mut line).unwrap() > 0, "closed; got {all}");
        all.push_str(&line);
        if line.starts_with(prefix) {
            return all;
        }
    }
}

#[test]
#[ignore = "needs dovecot-core, dovecot-imapd, dovecot-lmtpd"]
fn imap_and_lmtp_on_private_ports() {
    let tmp = tempfile::tempdir().unwrap();
    let dc = start(tmp.path());

    // LMTP (RFC 2033): one delivery, one reply per recipient after DATA.
    let s = TcpStream::connect(dc.lmtp_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut w = s;
    until(&mut r, "220 ");
    w.write_all(b"LHLO bench\r\n").unwrap();
    until(&mut r, "250 ");
    w.write_all(format!("MAIL FROM:<x@example.net>\r\nRCPT TO:<{USER}>\r\nDATA\r\n").as_bytes())
        .unwrap();
    until(&mut r, "354 ");
    w.write_all(b"From: x@example.net\r\nSubject: new\r\n\r\nhi\r\n.\r\n")
        .unwrap();
    let reply = until(&mut r, "2");
    assert!(reply.contains("250"), "{reply}");

    let s = TcpStream::connect(dc.imap_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut w = s;
    until(&mut r, "* OK");
    w.write_all(format!("a LOGIN {USER} secret\r\n").as_bytes())
        .unwrap();
    assert!(until(&mut r, "a ").starts_with("a OK"));
    w.write_all(b"b SELECT INBOX\r\n").unwrap();
    let sel = until(&mut r, "b ");
    assert!(sel.contains("* 4 EXISTS"), "{sel}");
    // SELECT moves new/ mail to cur/ (Dovecot does, as a read-write SELECT may).
    let md = maildir(&tmp.path().join("mail"));
    let files = ["new", "cur"]
        .iter()
        .map(|d| std::fs::read_dir(md.join(d)).unwrap().count())
        .sum::<usize>();
    assert_eq!(
        files, 4,
        "the LMTP delivery is a file of the configured Maildir"
    );
    assert!(dc.processes().len() >= 3, "{:?}", dc.processes());
    let (mem, n) = dc.memory();
    assert!(n >= 3 && mem.rss_kib > 1000, "{mem:?} over {n}");
    drop(w);
    drop(r);

    let pids = dc.processes();
    drop(dc);
    for pid in pids {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| s.contains(") Z")),
            "process {pid} survived"
        );
    }
}

#[test]
#[ignore = "needs dovecot-core, dovecot-imapd, dovecot-lmtpd"]
fn nothing_survives_a_panicking_test() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().to_owned();
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let dc = start(&path);
        tx.send(dc.processes()).unwrap();
        panic!("test failure while Dovecot runs");
    });
    assert!(h.join().is_err());
    let pids = rx.recv().unwrap();
    assert!(!pids.is_empty());
    std::thread::sleep(Duration::from_millis(100));
    for pid in pids {
        let alive =
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z"));
        assert!(!alive, "process {pid} survived the panic");
    }
}
