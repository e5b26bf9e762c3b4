//! Passwords and message contents never reach the logs at the default level (`info`):
//! the daemon runs in-process with a subscriber that keeps every line it writes, while
//! clients log in with wrong and right passwords (LOGIN, a LOGIN literal, AUTHENTICATE
//! PLAIN with an initial response and as a continuation), deliver over LMTP, APPEND and
//! fetch messages, and send broken commands that carry the same secrets; wrong passwords go
//! over the postfix SASL socket too. Login names a
//! client sends are logged escaped and cut (issue 15 #32).

use std::io::Write;
use std::sync::{Arc, Mutex};

use crate::support::daemon::{Opts, Server};
use crate::support::imap::simple;
use base64::Engine;

/// Every log line written, shared with the subscriber.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

const SECRETS: &[&str] = &[
    "Wr0ngPassw0rd-1",
    "Wr0ngPassw0rd-2",
    "Wr0ngPassw0rd-3",
    "Wr0ngPassw0rd-4",
    "BodySecret-LMTP",
    "BodySecret-APPEND",
    "SubjectSecret-LMTP",
    "BodySecret-broken",
    "Wr0ngPassw0rd-5",
    "Wr0ngPassw0rd-6",
];

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// A capture of the log lines of one server, and the subscriber that writes there: given
/// to the server alone (`Opts::log`), since the tests beside this one share the process.
fn capture() -> (Captured, tracing::Dispatch) {
    let logs = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(logs.clone())
        .finish();
    (logs, tracing::Dispatch::new(subscriber))
}

/// A server whose log lines go to a new capture, with a postfix SASL socket.
fn logged_server() -> (Server, Captured) {
    let (logs, log) = capture();
    let dir = tempfile::tempdir().unwrap();
    let sasl = dir.path().join("auth.sock");
    let s = Server::start_with(Opts {
        log: Some(log),
        dir: Some(dir),
        tweak: Some(Box::new(move |c| {
            c.postfix.auth_socket = Some(maildex_config::Listen::Unix(sasl))
        })),
        ..Opts::default()
    });
    (s, logs)
}

/// Wrong passwords over the postfix SASL socket: PLAIN with an initial response, LOGIN
/// with the password as a continuation (issue 20 #2).
fn sasl_wrong_passwords(s: &Server) {
    use std::io::BufRead;
    let Some(maildex_config::Listen::Unix(path)) = &s.config.postfix.auth_socket else {
        panic!("no SASL socket")
    };
    let mut w = std::os::unix::net::UnixStream::connect(path).unwrap();
    w.set_read_timeout(Some(crate::support::imap::PATIENCE))
        .unwrap();
    let r = std::io::BufReader::new(w.try_clone().unwrap());
    let lines = format!(
        "VERSION\t1\t0\nCPID\t1\nAUTH\t1\tPLAIN\tservice=smtp\tresp={}\n\
         AUTH\t2\tLOGIN\tservice=smtp\tresp={}\nCONT\t2\t{}\n",
        b64("\0alice\0Wr0ngPassw0rd-5"),
        b64("alice"),
        b64("Wr0ngPassw0rd-6")
    );
    w.write_all(lines.as_bytes()).unwrap();
    let fails = r
        .lines()
        .map(Result::unwrap)
        .filter(|l| l.starts_with("FAIL"))
        .take(2)
        .count();
    assert_eq!(fails, 2);
}

#[test]
fn no_password_or_message_text_is_logged_at_the_default_level() {
    let (s, logs) = logged_server();
    // wrong passwords, every way a password can arrive
    let mut c = s.connect();
    let r = c.cmd("LOGIN alice Wr0ngPassw0rd-1");
    assert_eq!(r.status(), "NO", "{}", r.all());
    c.send(b"A2 LOGIN alice {15+}\r\nWr0ngPassw0rd-2\r\n");
    assert_eq!(c.until("A2").status(), "NO");
    let ir = b64("\0alice\0Wr0ngPassw0rd-3");
    let r = c.cmd(&format!("AUTHENTICATE PLAIN {ir}"));
    assert_eq!(r.status(), "NO", "{}", r.all());
    c.send(b"A4 AUTHENTICATE PLAIN\r\n");
    assert!(c.read().is_continuation());
    c.send(format!("{}\r\n", b64("\0alice\0Wr0ngPassw0rd-4")));
    assert_eq!(c.until("A4").status(), "NO");
    // the right one, then mail in and out
    c.ok("LOGIN alice pw");
    // the Message-ID is logged on purpose (issue 15 #8, as Dovecot's msgid=): another one
    let lmtp = simple("SubjectSecret-LMTP", "BodySecret-LMTP in the body")
        .replace("<SubjectSecret-LMTP@", "<logged-id@");
    s.deliver("alice", &lmtp);
    let msg = "Subject: a\r\n\r\nBodySecret-APPEND\r\n";
    c.send(format!("A6 APPEND INBOX {{{}+}}\r\n{msg}\r\n", msg.len()));
    assert_eq!(c.until("A6").status(), "OK");
    c.ok("SELECT INBOX");
    let r = c.ok("FETCH 1:* (BODY[] ENVELOPE)");
    assert!(r.all().contains("BodySecret-LMTP"), "{}", r.all());
    // broken commands carrying secret text
    let r = c.cmd("FROBNICATE BodySecret-broken");
    assert_eq!(r.status(), "BAD", "{}", r.all());
    let r = c.cmd("SEARCH BODY");
    assert_eq!(r.status(), "BAD", "{}", r.all());
    c.ok("LOGOUT");
    sasl_wrong_passwords(&s);
    drop(s);

    let text = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    // the capture works: the daemon logs its listeners, failed logins and deliveries
    for expected in [
        "listening",
        "login failed",
        "SASL login failed",
        "delivered",
        "<logged-id@example.net>",
    ] {
        assert!(text.contains(expected), "no {expected:?} in:\n{text}");
    }
    let encoded = [
        b64("\0alice\0Wr0ngPassw0rd-3"),
        b64("\0alice\0Wr0ngPassw0rd-4"),
        b64("\0alice\0Wr0ngPassw0rd-5"),
        b64("Wr0ngPassw0rd-6"),
    ];
    for secret in SECRETS
        .iter()
        .copied()
        .chain(encoded.iter().map(String::as_str))
    {
        assert!(
            !text.contains(secret),
            "{secret:?} reached the logs:\n{text}"
        );
    }
}

#[test]
fn login_names_in_log_lines_are_escaped_and_cut() {
    let (s, logs) = logged_server();
    let mut c = s.connect();
    // a name that would forge a line, and one of 60 KB
    let forged = "x\r\n2026-11-26T00:00:00Z  INFO logged in user=admin\x1b[2J";
    c.send(format!(
        "A1 LOGIN {{{}+}}\r\n{forged} wrong\r\n",
        forged.len()
    ));
    assert_eq!(c.until("A1").status(), "NO");
    let long = format!("L{}", "o".repeat(60_000));
    c.send(format!("A2 LOGIN {{{}+}}\r\n{long} wrong\r\n", long.len()));
    assert_eq!(c.until("A2").status(), "NO");
    let ir = b64(&format!("\0{forged}\0wrong"));
    assert_eq!(c.cmd(&format!("AUTHENTICATE PLAIN {ir}")).status(), "NO");
    drop(c);
    let text = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    for line in text.lines() {
        assert!(
            !line.contains('\x1b'),
            "escape code in a log line: {line:?}"
        );
        assert!(
            !line.trim_start().starts_with("2026-11-26T00:00:00Z"),
            "forged log line: {line:?}"
        );
        assert!(line.len() < 2048, "log line of {} bytes", line.len());
    }
    assert!(
        text.contains("x\\r\\n2026-11-26T00:00:00Z  INFO logged in user=admin\\u{1b}[2J"),
        "{text}"
    );
    assert!(text.contains("...(60001 bytes)"), "{text}");
}
