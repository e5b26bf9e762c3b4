//! The tests' one LMTP client (raw socket), the daemon as LMTP tests start it, and a
//! one-call delivery.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;

use maildex_config::Config;

use super::daemon::{Opts, Server};
use super::imap::PATIENCE;

/// Users every test has: alice and bob (bare: any domain), carol@example.org.
pub const USERS: &str = "alice:{PLAIN}pw\nbob:{PLAIN}pw\ncarol@example.org:{PLAIN}pw\n";

/// Config text for a scratch root: Maildirs `root/mail/%u`, indexes `root/index/%u`.
pub fn config_text(root: &Path, lmtp_extra: &str, storage_extra: &str) -> String {
    let r = root.display();
    // lmtp_extra may bring its own listeners
    let listen = if lmtp_extra.contains("listen =") {
        ""
    } else {
        "listen = [\"127.0.0.1:0\"]\n"
    };
    format!(
        "[imap]\nlisten = []\n[lmtp]\n{listen}{lmtp_extra}\n\
         [storage]\nmail_location = \"{r}/mail/%u\"\nindex_root = \"{r}/index/%u\"\n\
         fsync = false\nindex_map_size = \"4MiB\"\n{storage_extra}\n\
         [auth]\nusers_file = \"{r}/users\"\n"
    )
}

/// The daemon for LMTP tests: [`USERS`], no TLS, extra `[lmtp]` and `[storage]` lines,
/// and `files` (name, content) written into the scratch root first.
pub fn server(lmtp_extra: &str, storage_extra: &str, files: &[(&'static str, &str)]) -> Server {
    Server::start_with(opts(lmtp_extra, storage_extra, files))
}

/// [`server`] with a change to the validated config (timers under the file's minimum).
pub fn server_with(
    lmtp_extra: &str,
    storage_extra: &str,
    files: &[(&'static str, &str)],
    tweak: impl FnOnce(&mut Config) + Send + 'static,
) -> Server {
    Server::start_with(Opts {
        tweak: Some(Box::new(tweak)),
        ..opts(lmtp_extra, storage_extra, files)
    })
}

fn opts(lmtp_extra: &str, storage_extra: &str, files: &[(&'static str, &str)]) -> Opts {
    Opts {
        tls: false,
        lmtp_extra: lmtp_extra.to_owned(),
        storage_extra: storage_extra.to_owned(),
        users: USERS.to_owned(),
        files: files.iter().map(|(n, c)| (*n, (*c).to_owned())).collect(),
        ..Opts::default()
    }
}

/// A raw LMTP client.
pub struct Client {
    pub reader: BufReader<TcpStream>,
    pub stream: TcpStream,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        Client::wrap(TcpStream::connect(addr).unwrap())
    }

    /// A client on a connection already made (behind a PROXY header, say).
    pub fn wrap(stream: TcpStream) -> Client {
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        Client {
            reader: BufReader::new(stream.try_clone().unwrap()),
            stream,
        }
    }

    pub fn send(&mut self, data: impl AsRef<[u8]>) {
        self.stream.write_all(data.as_ref()).unwrap();
    }

    /// One complete (possibly multi-line) reply; what came before EOF (empty) at EOF.
    pub fn reply(&mut self) -> String {
        self.read_reply().unwrap_or_else(|partial| partial)
    }

    /// [`Client::send`] for a server that may die: `None` when the write fails.
    pub fn try_send(&mut self, data: impl AsRef<[u8]>) -> Option<()> {
        self.stream.write_all(data.as_ref()).ok()
    }

    /// One complete reply, or `None` at EOF, on a read error or a timeout (for a server
    /// that may die).
    pub fn try_reply(&mut self) -> Option<String> {
        self.read_reply().ok()
    }

    /// One complete reply; `Err` with what came before at EOF or on a read error.
    fn read_reply(&mut self) -> Result<String, String> {
        let mut all = String::new();
        loop {
            let mut line = Vec::new();
            match self.reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return Err(all),
                Ok(_) => {}
            }
            let line = String::from_utf8_lossy(&line).into_owned();
            all.push_str(&line);
            if line.len() < 4 || line.as_bytes()[3] != b'-' {
                return Ok(all);
            }
        }
    }

    /// Reads one reply and checks it starts with `prefix`.
    pub fn expect(&mut self, prefix: &str) -> String {
        let r = self.reply();
        assert!(r.starts_with(prefix), "expected {prefix:?}, got {r:?}");
        r
    }

    /// True once the server closed the connection.
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.reader.read(&mut b), Ok(0))
    }
}

/// A small message with LF line ends as DATA text (dot-stuffing left to the caller).
pub fn message(subject: &str) -> String {
    format!(
        "From: sender@example.net\r\nTo: alice@example.org\r\nSubject: {subject}\r\n\
         Message-ID: <{subject}@example.net>\r\n\r\nHello {subject}.\r\n"
    )
}

/// MAIL, the RCPTs (each must get `250`), DATA, the message; returns the replies after
/// the data, one per recipient.
pub fn transaction(c: &mut Client, rcpts: &[&str], msg: &str) -> Vec<String> {
    c.send("MAIL FROM:<sender@example.net>\r\n");
    c.expect("250 ");
    for r in rcpts {
        c.send(format!("RCPT TO:<{r}>\r\n"));
        c.expect("250 ");
    }
    c.send("DATA\r\n");
    c.expect("354 ");
    c.send(msg);
    c.send(".\r\n");
    rcpts.iter().map(|_| c.reply()).collect()
}

/// A raw LMTP delivery of `message` (LF line ends) to `user`: dot-stuffed, CRLF on the wire.
pub fn deliver(addr: SocketAddr, user: &str, message: &str) {
    deliver_over(TcpStream::connect(addr).unwrap(), user, message);
}

/// [`deliver`] over a connection already made (behind a PROXY header, say).
pub fn deliver_over(tcp: TcpStream, user: &str, message: &str) {
    let mut c = Client::wrap(tcp);
    c.expect("220");
    c.send("LHLO test\r\n");
    c.expect("250");
    c.send("MAIL FROM:<sender@example.net>\r\n");
    c.expect("250");
    c.send(format!("RCPT TO:<{user}@example.org>\r\n"));
    c.expect("250");
    c.send("DATA\r\n");
    c.expect("354");
    let mut data = String::new();
    for line in message.lines() {
        if line.starts_with('.') {
            data.push('.');
        }
        data.push_str(line);
        data.push_str("\r\n");
    }
    data.push_str(".\r\n");
    c.send(data);
    c.expect("250");
    c.send("QUIT\r\n");
    c.expect("221");
}
