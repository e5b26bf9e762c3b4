//! The lines an admin greps (issue 15 #8), from the real `maildex serve` and `maildex
//! deliver` processes: one per IMAP login and per disconnect with their fields, one per
//! LMTP message with each recipient's result (refused and failed ones included, with the
//! real cause), session ids that differ between runs, no false "dropped plaintext" line
//! on STARTTLS, no rustls warning for a client that sends an IP address as SNI, and
//! `[log] format = "json"` writing JSON objects.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::imap::Client;
use crate::support::process::{free_port, maildex_bin, Daemon};

/// Ports of one daemon: IMAP, IMAPS, LMTP.
struct Ports {
    imap: SocketAddr,
    imaps: SocketAddr,
    lmtp: SocketAddr,
}

/// A scratch root with a config (users alice and bob, a self-signed certificate) with
/// `log` as its `[log]` section; returns the root, the config's path and the ports.
fn setup(log: &str) -> (tempfile::TempDir, PathBuf, Ports) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let r = root.display();
    let at = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
    let ports = Ports {
        imap: at(free_port()),
        imaps: at(free_port()),
        lmtp: at(free_port()),
    };
    let path = root.join("maildex.toml");
    std::fs::write(
        &path,
        format!(
            "[imap]\nlisten = [\"{}\"]\nlisten_tls = [\"{}\"]\n\
             [lmtp]\nlisten = [\"{}\"]\n\
             [tls]\ncert = \"{r}/cert.pem\"\nkey = \"{r}/key.pem\"\n\
             [storage]\nmail_location = \"{r}/mail/%u\"\nindex_root = \"{r}/index/%u\"\n\
             fsync = false\nindex_map_size = \"4MiB\"\n\
             [auth]\nusers_file = \"{r}/users\"\n[log]\n{log}\n",
            ports.imap, ports.imaps, ports.lmtp
        ),
    )
    .unwrap();
    std::fs::write(root.join("users"), "alice:{PLAIN}pw\nbob:{PLAIN}pw\n").unwrap();
    maildex_imap::tls::write_self_signed(
        &["localhost"],
        &root.join("cert.pem"),
        &root.join("key.pem"),
    )
    .unwrap();
    (dir, path, ports)
}

/// A file where `user`'s Maildir belongs: it cannot be created.
fn block_maildir(root: &Path, user: &str) {
    std::fs::create_dir_all(root.join("mail")).unwrap();
    std::fs::write(root.join("mail").join(user), "not a folder").unwrap();
}

fn start(config: &Path, root: &Path, ports: &Ports) -> Daemon {
    Daemon::start_with(
        &maildex_bin(),
        config,
        root,
        ports.imap,
        &[("MAILDEX_LOG", "info")],
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The log lines holding every one of `parts`.
fn lines_with<'a>(log: &'a str, parts: &[&str]) -> Vec<&'a str> {
    log.lines()
        .filter(|l| parts.iter().all(|p| l.contains(p)))
        .collect()
}

/// The value of `name=` in a text log line: a quoted string with its quotes, else up
/// to the next space or `}`.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let key = format!("{name}=");
    let at = line
        .match_indices(&key)
        .map(|(i, _)| i)
        .find(|&i| i > 0 && matches!(line.as_bytes()[i - 1], b' ' | b'{'))?;
    let rest = &line[at + key.len()..];
    let end = match rest.strip_prefix('"') {
        Some(quoted) => quoted.find('"')? + 2,
        None => rest.find([' ', '}']).unwrap_or(rest.len()),
    };
    Some(&rest[..end])
}

/// One LMTP transaction: from sender@example.org to alice, nobody and bob.
fn lmtp_message(addr: SocketAddr, message_id: &str) {
    let mut c = crate::support::lmtp::Client::connect(addr);
    c.expect("220");
    c.send("LHLO client.example\r\n");
    c.expect("250");
    c.send("MAIL FROM:<sender@example.org>\r\n");
    c.expect("250");
    c.send("RCPT TO:<alice@example.org>\r\n");
    c.expect("250");
    c.send("RCPT TO:<nobody@example.org>\r\n");
    c.expect("550");
    c.send("RCPT TO:<bob@example.org>\r\n");
    c.expect("250");
    c.send("DATA\r\n");
    c.expect("354");
    c.send(format!(
        "From: sender@example.org\r\nSubject: hi\r\nMessage-ID: {message_id}\r\n\r\nHello.\r\n.\r\n"
    ));
    c.expect("250"); // alice
    c.expect("451"); // bob: his Maildir is a file
                     // a transaction whose only recipient is refused: no DATA, its line all the same
    c.send("MAIL FROM:<other@example.org>\r\n");
    c.expect("250");
    c.send("RCPT TO:<ghost@example.org>\r\n");
    c.expect("550");
    c.send("QUIT\r\n");
    c.expect("221");
}

#[test]
fn login_disconnect_and_message_lines_carry_their_fields() {
    let (dir, config, ports) = setup("level = \"info\"");
    let root = dir.path();
    block_maildir(root, "bob");
    let mut daemon = start(&config, root, &ports);

    let mut c = Client::connect(ports.imap);
    c.ok("LOGIN alice pw");
    c.ok("NOOP");
    c.ok("LOGOUT");
    // STARTTLS, then AUTHENTICATE PLAIN over TLS, then the client goes away
    let mut t = Client::connect(ports.imap);
    t.starttls(&root.join("cert.pem"), "");
    t.ok("AUTHENTICATE PLAIN AGFsaWNlAHB3");
    drop(t);
    // a client that sends an IP address as SNI
    let out = Command::new("openssl")
        .args(["s_client", "-quiet", "-servername", "127.0.0.1", "-connect"])
        .arg(ports.imaps.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .and_then(|mut p| {
            p.stdin.take().unwrap().write_all(b"a LOGOUT\r\n")?;
            p.wait_with_output()
        })
        .expect("openssl s_client runs");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("a OK"),
        "the openssl session ran: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    lmtp_message(ports.lmtp, "<m1@example.org>");
    daemon.terminate();
    let log = daemon.log_text();

    // login: user, remote, session, TLS, mechanism
    let logins = lines_with(&log, &["logged in", "user=\"alice\"", "peer=127.0.0.1:"]);
    assert_eq!(logins.len(), 2, "{log}");
    assert!(logins[0].contains("tls=false") && logins[0].contains("mechanism=\"LOGIN-command\""));
    assert!(logins[1].contains("tls=true") && logins[1].contains("mechanism=\"PLAIN\""));
    let session = field(logins[0], "session").unwrap();
    // disconnect: the same session, with its traffic and how it ended
    let ends = lines_with(&log, &["disconnected", &format!("session={session} ")]);
    assert_eq!(ends.len(), 1, "{log}");
    assert_eq!(field(ends[0], "ended"), Some("\"LOGOUT\""), "{}", ends[0]);
    assert_eq!(field(ends[0], "commands"), Some("3"), "{}", ends[0]);
    assert_eq!(field(ends[0], "bytes_in"), Some("39"), "{}", ends[0]);
    assert!(field(ends[0], "bytes_out").unwrap().parse::<u64>().unwrap() > 100);
    assert!(field(ends[0], "duration_ms").is_some());
    let closed = lines_with(
        &log,
        &["disconnected", "user=\"alice\"", "ended=\"client closed\""],
    );
    assert_eq!(closed.len(), 1, "{log}");
    // shutdown ends nothing here, but the reason exists for an open session (below)

    // no false STARTTLS line, no rustls warning for the IP address as SNI
    assert!(!log.contains("dropped plaintext"), "{log}");
    assert!(!log.contains("rustls"), "{log}");

    // the LMTP message: one line, every recipient, the real cause of bob's failure
    let msgs = lines_with(&log, &["lmtp{", " message ", "<m1@"]);
    assert_eq!(msgs.len(), 1, "{log}");
    let m = msgs[0];
    assert!(m.contains("message_id=<m1@example.org>"), "{m}");
    assert!(m.contains("from=sender@example.org"), "{m}");
    assert!(
        m.contains("<alice@example.org> delivered alice/INBOX uid=1"),
        "{m}"
    );
    assert!(
        m.contains("<nobody@example.org> rejected at RCPT 550 5.1.1"),
        "{m}"
    );
    assert!(m.contains("<bob@example.org> failed 451 4.3.0: "), "{m}");
    assert!(m.contains(&format!("{}/mail/bob", root.display())), "{m}");
    assert!(!m.contains("Temporary local failure"), "{m}");
    let refused = lines_with(&log, &["lmtp{", " message ", "from=other@example.org"]);
    assert_eq!(refused.len(), 1, "{log}");
    assert!(
        refused[0].contains("results=<ghost@example.org> rejected at RCPT 550 5.1.1"),
        "{}",
        refused[0]
    );

    // another run: session ids do not repeat
    let mut again = start(&config, root, &ports);
    let mut c = Client::connect(ports.imap);
    c.ok("LOGIN alice pw");
    again.terminate();
    let log2 = again.log_text();
    let login2 = lines_with(&log2, &["logged in"]);
    assert_eq!(login2.len(), 1, "{log2}");
    let session2 = field(login2[0], "session").unwrap();
    assert_ne!(session2, session);
    let shut = lines_with(&log2, &["disconnected", &format!("session={session2} ")]);
    assert_eq!(shut.len(), 1, "{log2}");
    assert_eq!(
        field(shut[0], "ended"),
        Some("\"server shutdown\""),
        "{}",
        shut[0]
    );
}

#[test]
fn json_format_writes_one_object_per_line() {
    let (dir, config, ports) = setup("format = \"json\"");
    let root = dir.path();
    let mut daemon = start(&config, root, &ports);
    let mut c = Client::connect(ports.imap);
    c.ok("LOGIN alice pw");
    c.ok("LOGOUT");
    daemon.terminate();
    let log = daemon.log_text();
    // stdout (the start-up sync report) goes to the same file; every log line is JSON
    let json: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| l.contains("maildex_"))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let login = json
        .iter()
        .find(|v| v["fields"]["message"] == "logged in")
        .unwrap_or_else(|| panic!("{log}"));
    assert_eq!(login["level"], "INFO");
    assert_eq!(login["fields"]["tls"], false);
    assert_eq!(login["span"]["user"], "alice");
    assert!(login["span"]["session"].as_str().is_some(), "{login}");
    let end = json
        .iter()
        .find(|v| v["fields"]["message"] == "disconnected" && v["span"]["user"] == "alice")
        .unwrap_or_else(|| panic!("{log}"));
    assert_eq!(end["fields"]["ended"], "LOGOUT");
    assert_eq!(end["fields"]["commands"], 2);
}

#[test]
fn maildex_deliver_logs_the_message_line() {
    let (_dir, config, _) = setup("level = \"info\"");
    let mut p = Command::new(maildex_bin())
        .args(["deliver", "--config"])
        .arg(&config)
        .args(["-u", "alice", "-f", "sender@example.org"])
        .env_remove("MAILDEX_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    p.stdin
        .take()
        .unwrap()
        .write_all(b"Subject: hi\nMessage-ID:\n <d1@example.org>\n\nHello.\n")
        .unwrap();
    let out = p.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let lines = lines_with(&err, &[" message "]);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("message_id=<d1@example.org>"), "{err}");
    assert!(lines[0].contains("from=sender@example.org"), "{err}");
    assert!(
        lines[0].contains("<alice> delivered alice/INBOX uid=1"),
        "{err}"
    );
}

#[test]
fn an_os_error_appears_once_in_a_message() {
    let (dir, config, _) = setup("level = \"info\"");
    let root = dir.path();
    block_maildir(root, "alice");
    let missing = root.join("missing.toml");
    for (args, os_error) in [
        (
            vec![
                "index",
                "check",
                "--all",
                "--config",
                missing.to_str().unwrap(),
            ],
            "(os error 2)",
        ),
        (
            vec![
                "index",
                "rebuild",
                "--user",
                "alice",
                "--config",
                config.to_str().unwrap(),
            ],
            "(os error 17)",
        ),
    ] {
        let out = Command::new(maildex_bin()).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.matches(os_error).count(), 1, "{args:?}: {err}");
    }
}
