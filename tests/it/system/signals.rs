//! The signals an admin sends to the real `maildex serve` process: SIGHUP reloads the users
//! file and the TLS certificate without dropping anyone, SIGTERM says `* BYE` to every
//! session and exits cleanly. Responses are parsed by imap-codec (tests/support/imap).

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::imap::{try_tls_client, Client, Stream};
use crate::support::process::{free_port, maildex_bin, Daemon};

fn write_config(root: &Path, imap: u16, imaps: u16) -> std::path::PathBuf {
    let r = root.display();
    let path = root.join("maildex.toml");
    std::fs::write(
        &path,
        format!(
            "[imap]\nlisten = [\"127.0.0.1:{imap}\"]\nlisten_tls = [\"127.0.0.1:{imaps}\"]\n\
             [lmtp]\nlisten = []\n\
             [tls]\ncert = \"{r}/cert.pem\"\nkey = \"{r}/key.pem\"\n\
             [storage]\nmail_location = \"{r}/mail/%u\"\nindex_root = \"{r}/index/%u\"\n\
             fsync = false\nindex_map_size = \"4MiB\"\n\
             [auth]\nusers_file = \"{r}/users\"\n"
        ),
    )
    .unwrap();
    path
}

/// An IMAPS session that trusts only the certificate in `cert`; Err when the handshake
/// fails (the server presents another certificate).
fn tls_session(addr: SocketAddr, cert: &Path) -> Result<Client, String> {
    let tcp = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    let mut tls = try_tls_client(cert, tcp).map_err(|e| e.to_string())?;
    while tls.conn.is_handshaking() {
        tls.conn
            .complete_io(&mut tls.sock)
            .map_err(|e| e.to_string())?;
    }
    let mut c = Client::wrap(Stream::Tls(Box::new(tls)));
    c.read_greeting();
    Ok(c)
}

fn login(addr: SocketAddr, user: &str) -> String {
    let mut c = Client::connect(addr);
    c.cmd(&format!("LOGIN {user} pw")).status()
}

fn signal(d: &Daemon, sig: &str) {
    let st = Command::new("kill")
        .args([sig, &d.pid().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn sighup_reloads_users_and_certificate_and_sigterm_says_bye() {
    let bin = maildex_bin();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (imap, imaps) = (free_port(), free_port());
    let config = write_config(root, imap, imaps);
    std::fs::write(root.join("users"), "alice:{PLAIN}pw\n").unwrap();
    let (cert, key) = (root.join("cert.pem"), root.join("key.pem"));
    maildex_imap::tls::write_self_signed(&["localhost"], &cert, &key).unwrap();
    let first_cert = root.join("first.pem");
    std::fs::copy(&cert, &first_cert).unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], imap).into();
    let tls_addr: SocketAddr = ([127, 0, 0, 1], imaps).into();
    let daemon = Daemon::start(&bin, &config, root, addr);

    // a session that stays open across both reloads
    let mut kept = Client::connect(addr);
    kept.ok("LOGIN alice pw");
    kept.ok("SELECT INBOX");
    assert_eq!(login(addr, "dave"), "NO", "dave is not a user yet");
    assert!(tls_session(tls_addr, &first_cert).is_ok());

    // a new user and a new certificate, then SIGHUP
    std::fs::write(root.join("users"), "alice:{PLAIN}pw\ndave:{PLAIN}pw\n").unwrap();
    maildex_imap::tls::write_self_signed(&["localhost"], &cert, &key).unwrap();
    assert!(
        tls_session(tls_addr, &cert).is_err(),
        "the new certificate is not served before the reload"
    );
    signal(&daemon, "-HUP");
    let t0 = Instant::now();
    while login(addr, "dave") != "OK" {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "SIGHUP did not reload the users file: {}",
            daemon.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // reloaded together with the users: new connections get the new certificate
    let mut t = tls_session(tls_addr, &cert).expect("the new certificate after SIGHUP");
    t.ok("LOGIN dave pw");
    assert!(tls_session(tls_addr, &first_cert).is_err());
    // nobody was dropped
    kept.ok("NOOP");

    // SIGTERM: every session is told BYE, and the process exits 0
    signal(&daemon, "-TERM");
    for c in [&mut kept, &mut t] {
        let r = c.read();
        assert!(r.text().starts_with("* BYE"), "{}", r.text());
        assert!(c.closed_within(Duration::from_secs(10)));
    }
    let mut daemon = daemon;
    let st = daemon.wait();
    assert!(
        st.success(),
        "exit after SIGTERM: {st}: {}",
        daemon.log_text()
    );
}
