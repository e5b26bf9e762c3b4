//! The Dovecot authentication protocol, server side, as postfix's `xsasl_dovecot_server.c`
//! speaks it (Dovecot's doc/auth-protocol: "Dovecot Authentication Protocol v1.x").
//!
//! Lines end in LF; a line is a command and TAB-separated parameters; optional parameters
//! are `name=value` or a bare boolean, unknown ones are ignored; values are tab-escaped
//! (\001 then `0` NUL, `1` \001, `t` TAB, `r` CR, `n`/`l` LF). The server sends its
//! handshake ([`handshake`]) at once; the client sends `VERSION` (major 1) and `CPID`, then
//! `AUTH <id> <mech> service=.. [resp=<base64>] [rip=..] [secured] ...` and `CONT <id>
//! <base64>` lines; the server answers each request with `CONT <id> <base64>`, `OK <id>
//! user=<name>` or `FAIL <id> [user=<name>] [temp] [reason=..]`.
//!
//! [`Connection`] holds the state of one client connection: fed one line at a time it
//! says what to send back or which credentials to check ([`Event::Verify`]); the answer to
//! a check is encoded by [`verdict`].

use std::net::IpAddr;

use base64::Engine;

/// Longest line read, LF excluded: Dovecot's auth protocol expects every line to fit in
/// 16384 bytes. A longer one ends the connection.
pub const MAX_LINE: usize = 16384;

/// Most requests of one connection waiting for a `CONT` at once (postfix has one at a
/// time); a further `AUTH` fails at once.
pub const MAX_PENDING: usize = 16;

/// The protocol version the server sends (`VERSION 1 2`, as Dovecot 2.3).
pub const VERSION: (u32, u32) = (1, 2);

/// The server's handshake: version, mechanisms (both `plaintext`: postfix offers them only
/// where `smtpd_sasl_security_options` allows plaintext), process id, connection id, cookie
/// (hex), `DONE`.
pub fn handshake(spid: u32, cuid: u32, cookie: &[u8; 16]) -> Vec<u8> {
    let mut hex = String::with_capacity(32);
    for b in cookie {
        hex.push_str(&format!("{b:02x}"));
    }
    format!(
        "VERSION\t{}\t{}\nMECH\tPLAIN\tplaintext\nMECH\tLOGIN\tplaintext\nSPID\t{spid}\nCUID\t{cuid}\nCOOKIE\t{hex}\nDONE\n",
        VERSION.0, VERSION.1
    )
    .into_bytes()
}

/// Tab-escapes `s` onto `out`.
pub fn escape(s: &[u8], out: &mut Vec<u8>) {
    for &b in s {
        match b {
            0 => out.extend_from_slice(b"\x010"),
            1 => out.extend_from_slice(b"\x011"),
            b'\t' => out.extend_from_slice(b"\x01t"),
            b'\r' => out.extend_from_slice(b"\x01r"),
            b'\n' => out.extend_from_slice(b"\x01n"),
            _ => out.push(b),
        }
    }
}

/// Undoes [`escape`]; an unknown escape stands for the character itself, a trailing \001
/// is dropped.
pub fn unescape(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut it = s.iter();
    while let Some(&b) = it.next() {
        if b != 1 {
            out.push(b);
            continue;
        }
        match it.next() {
            Some(b'0') => out.push(0),
            Some(b'1') => out.push(1),
            Some(b't') => out.push(b'\t'),
            Some(b'r') => out.push(b'\r'),
            Some(b'n' | b'l') => out.push(b'\n'),
            Some(&c) => out.push(c),
            None => {}
        }
    }
    out
}

/// A mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mech {
    /// RFC 4616.
    Plain,
    /// draft-murchison-sasl-login.
    Login,
}

impl Mech {
    /// The name as in `MECH` and `AUTH`.
    pub fn name(self) -> &'static str {
        match self {
            Mech::Plain => "PLAIN",
            Mech::Login => "LOGIN",
        }
    }
}

/// Credentials to check, from a finished PLAIN or LOGIN exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The request id the answer goes to.
    pub id: u32,
    /// The mechanism.
    pub mech: Mech,
    /// The login name (authentication identity), as sent (lossily UTF-8).
    pub login: String,
    /// The password.
    pub password: Vec<u8>,
    /// The SMTP client's address (`rip=`), when postfix gave a valid one.
    pub rip: Option<IpAddr>,
    /// The service (`smtp` from postfix).
    pub service: String,
    /// The SMTP session is under TLS (`secured`).
    pub secured: bool,
}

/// What to do after a line.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// Nothing to send (VERSION, CPID, CANCEL).
    Nothing,
    /// Send this (a `CONT` challenge or a `FAIL`).
    Reply(Vec<u8>),
    /// Check these, then send [`verdict`] for them.
    Verify(Credentials),
    /// A protocol error: close the connection (Dovecot disconnects such a client); the
    /// reason is for the log.
    Close(&'static str),
}

/// The outcome of a check, for [`verdict`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The password matched; the user's name goes into `user=`.
    Ok,
    /// Wrong password, no such user, or not allowed: all alike.
    Fail,
    /// The directory is down: `FAIL ... temp`.
    TempFail,
}

/// The answer to a check of `id`: `OK <id> user=<user>`, `FAIL <id> user=<login>`, or `FAIL
/// <id> user=<login> temp reason=...`. `user` is the user's name for OK, the login as given
/// otherwise.
pub fn verdict(id: u32, user: &str, outcome: Outcome) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + user.len());
    out.extend_from_slice(match outcome {
        Outcome::Ok => b"OK\t".as_slice(),
        _ => b"FAIL\t",
    });
    out.extend_from_slice(id.to_string().as_bytes());
    out.extend_from_slice(b"\tuser=");
    escape(user.as_bytes(), &mut out);
    if outcome == Outcome::TempFail {
        out.extend_from_slice(b"\ttemp\treason=Temporary authentication failure.");
    }
    out.push(b'\n');
    out
}

fn fail(id: u32, reason: &str) -> Event {
    let mut out = format!("FAIL\t{id}\treason=").into_bytes();
    escape(reason.as_bytes(), &mut out);
    out.push(b'\n');
    Event::Reply(out)
}

fn cont(id: u32, challenge: &[u8]) -> Event {
    let b64 = base64::engine::general_purpose::STANDARD.encode(challenge);
    Event::Reply(format!("CONT\t{id}\t{b64}\n").into_bytes())
}

/// A request waiting for the client's next `CONT`.
#[derive(Debug)]
struct Pending {
    id: u32,
    mech: Mech,
    /// LOGIN: the user name, once given.
    user: Option<Vec<u8>>,
    rip: Option<IpAddr>,
    service: String,
    secured: bool,
}

/// One client connection's state: whether `VERSION` came, and the requests in progress.
#[derive(Debug, Default)]
pub struct Connection {
    version_seen: bool,
    pending: Vec<Pending>,
}

impl Connection {
    /// A connection that has sent nothing yet.
    pub fn new() -> Connection {
        Connection::default()
    }

    /// Requests waiting for a `CONT`.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Handles one line (without its LF; a CR before it is dropped).
    pub fn line(&mut self, line: &[u8]) -> Event {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let mut fields = line.split(|&b| b == b'\t');
        let cmd = fields.next().unwrap_or_default();
        if !self.version_seen {
            // the first line must be a compatible VERSION
            if cmd != b"VERSION" || fields.next() != Some(b"1") {
                return Event::Close("the client's first line is not VERSION 1");
            }
            self.version_seen = true;
            return Event::Nothing;
        }
        match cmd {
            b"VERSION" | b"CPID" => Event::Nothing,
            b"AUTH" => self.auth(fields),
            b"CONT" => self.cont(fields),
            b"CANCEL" => {
                if let Some(id) = fields.next().and_then(parse_id) {
                    self.pending.retain(|p| p.id != id);
                }
                Event::Nothing
            }
            _ => Event::Close("unknown command"),
        }
    }

    fn auth<'a>(&mut self, mut fields: impl Iterator<Item = &'a [u8]>) -> Event {
        let Some(id) = fields.next().and_then(parse_id) else {
            return Event::Close("AUTH without a valid id");
        };
        if self.pending.iter().any(|p| p.id == id) {
            return Event::Close("AUTH with the id of a request in progress");
        }
        let Some(mech) = fields.next() else {
            return Event::Close("AUTH without a mechanism");
        };
        let (mut service, mut resp, mut rip, mut secured) = (None, None, None, false);
        for f in fields {
            let (name, value) = match memchr::memchr(b'=', f) {
                Some(i) => (&f[..i], Some(&f[i + 1..])),
                None => (f, None),
            };
            match (name, value) {
                (b"service", Some(v)) => {
                    service = Some(String::from_utf8_lossy(&unescape(v)).into_owned())
                }
                (b"resp", Some(v)) => resp = Some(unescape(v)),
                (b"rip", Some(v)) => {
                    rip = std::str::from_utf8(&unescape(v))
                        .ok()
                        .and_then(|s| s.parse::<IpAddr>().ok())
                }
                (b"secured", _) => secured = true,
                _ => {} // unknown parameters are ignored (the protocol says so)
            }
        }
        let Some(service) = service else {
            return Event::Close("AUTH without service=");
        };
        let mech = if mech.eq_ignore_ascii_case(b"PLAIN") {
            Mech::Plain
        } else if mech.eq_ignore_ascii_case(b"LOGIN") {
            Mech::Login
        } else {
            return fail(id, "Unsupported authentication mechanism.");
        };
        let initial = match resp.map(|r| decode(&r)).transpose() {
            Ok(i) => i,
            Err(()) => return fail(id, "Invalid base64 data in initial response"),
        };
        if self.pending.len() >= MAX_PENDING {
            return fail(id, "Too many authentication requests in progress.");
        }
        let pending = Pending {
            id,
            mech,
            user: None,
            rip,
            service,
            secured,
        };
        // an empty initial response (`resp=`, SMTP's `AUTH PLAIN =`) is answered with the
        // first challenge, as none at all (Dovecot's mech_generic_auth_initial)
        match (mech, initial) {
            (Mech::Plain, Some(data)) if !data.is_empty() => plain(pending, &data),
            (Mech::Login, Some(data)) if !data.is_empty() => self.login_user(pending, data),
            (Mech::Plain, _) => {
                self.pending.push(pending);
                cont(id, b"")
            }
            (Mech::Login, _) => {
                self.pending.push(pending);
                cont(id, b"Username:")
            }
        }
    }

    fn cont<'a>(&mut self, mut fields: impl Iterator<Item = &'a [u8]>) -> Event {
        let Some(id) = fields.next().and_then(parse_id) else {
            return Event::Close("CONT without a valid id");
        };
        let Some(i) = self.pending.iter().position(|p| p.id == id) else {
            // a request that finished or never began: as Dovecot, fail it and go on
            return fail(id, "Authentication request timed out");
        };
        let p = self.pending.swap_remove(i);
        let Ok(data) = decode(fields.next().unwrap_or_default()) else {
            return fail(id, "Invalid base64 data in continued response");
        };
        match (p.mech, &p.user) {
            (Mech::Plain, _) => plain(p, &data),
            (Mech::Login, None) => self.login_user(p, data),
            (Mech::Login, Some(_)) => {
                let user = p.user.clone().unwrap_or_default();
                verify(p, &user, data)
            }
        }
    }

    /// LOGIN got the user name: ask for the password.
    fn login_user(&mut self, mut p: Pending, user: Vec<u8>) -> Event {
        let id = p.id;
        p.user = Some(user);
        self.pending.push(p);
        cont(id, b"Password:")
    }
}

/// PLAIN (RFC 4616 §2): `[authzid] NUL authcid NUL passwd`; an authzid other than the
/// authcid (acting as another user) is refused.
fn plain(p: Pending, data: &[u8]) -> Event {
    let mut parts = data.splitn(3, |&b| b == 0);
    let (Some(authzid), Some(authcid), Some(password)) = (parts.next(), parts.next(), parts.next())
    else {
        return fail(p.id, "Invalid PLAIN message.");
    };
    if !authzid.is_empty() && authzid != authcid {
        return fail(p.id, "Authorization failed.");
    }
    verify(p, authcid, password.to_vec())
}

fn verify(p: Pending, login: &[u8], password: Vec<u8>) -> Event {
    Event::Verify(Credentials {
        id: p.id,
        mech: p.mech,
        login: String::from_utf8_lossy(login).into_owned(),
        password,
        rip: p.rip,
        service: p.service,
        secured: p.secured,
    })
}

fn parse_id(s: &[u8]) -> Option<u32> {
    if s.is_empty() || s.len() > 10 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

fn decode(s: &[u8]) -> Result<Vec<u8>, ()> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn ready() -> Connection {
        let mut c = Connection::new();
        assert_eq!(c.line(b"VERSION\t1\t0"), Event::Nothing);
        assert_eq!(c.line(b"CPID\t4242"), Event::Nothing);
        c
    }

    fn reply(e: Event) -> String {
        match e {
            Event::Reply(r) => String::from_utf8(r).unwrap(),
            other => panic!("not a reply: {other:?}"),
        }
    }

    #[test]
    fn handshake_is_what_postfix_reads() {
        let h = String::from_utf8(handshake(7, 9, &[0xab; 16])).unwrap();
        let lines: Vec<&str> = h.lines().collect();
        assert_eq!(lines[0], "VERSION\t1\t2");
        assert!(lines.contains(&"MECH\tPLAIN\tplaintext"));
        assert!(lines.contains(&"MECH\tLOGIN\tplaintext"));
        assert!(lines.contains(&"SPID\t7"));
        assert!(lines.contains(&"CUID\t9"));
        assert!(lines.contains(&format!("COOKIE\t{}", "ab".repeat(16)).as_str()));
        assert_eq!(*lines.last().unwrap(), "DONE");
    }

    #[test]
    fn plain_with_an_initial_response_as_postfix_sends_it() {
        let mut c = ready();
        let line = format!(
            "AUTH\t1\tPLAIN\tservice=smtp\tnologin\tlip=127.0.0.1\trip=192.0.2.7\tsecured\tresp={}",
            b64(b"\0alice@example.org\0secret")
        );
        let Event::Verify(cr) = c.line(line.as_bytes()) else {
            panic!()
        };
        assert_eq!(cr.id, 1);
        assert_eq!(cr.login, "alice@example.org");
        assert_eq!(cr.password, b"secret");
        assert_eq!(cr.rip, Some("192.0.2.7".parse().unwrap()));
        assert!(cr.secured);
        assert_eq!(cr.service, "smtp");
        assert_eq!(c.pending(), 0);
    }

    #[test]
    fn plain_without_initial_response_gets_an_empty_challenge() {
        let mut c = ready();
        assert_eq!(
            reply(c.line(b"AUTH\t5\tPLAIN\tservice=smtp")),
            "CONT\t5\t\n"
        );
        let line = format!("CONT\t5\t{}", b64(b"bob\0bob\0pw"));
        let Event::Verify(cr) = c.line(line.as_bytes()) else {
            panic!()
        };
        assert_eq!((cr.id, cr.login.as_str(), cr.rip), (5, "bob", None));
        // an empty initial response is no response
        assert_eq!(
            reply(c.line(b"AUTH\t6\tPLAIN\tservice=smtp\tresp=")),
            "CONT\t6\t\n"
        );
    }

    #[test]
    fn login_asks_for_user_and_password() {
        let mut c = ready();
        assert_eq!(
            reply(c.line(b"AUTH\t2\tLOGIN\tservice=smtp\trip=::1")),
            format!("CONT\t2\t{}\n", b64(b"Username:"))
        );
        assert_eq!(
            reply(c.line(format!("CONT\t2\t{}", b64(b"carol")).as_bytes())),
            format!("CONT\t2\t{}\n", b64(b"Password:"))
        );
        let Event::Verify(cr) = c.line(format!("CONT\t2\t{}", b64(b"pw")).as_bytes()) else {
            panic!()
        };
        assert_eq!(
            (cr.login.as_str(), cr.password.as_slice()),
            ("carol", &b"pw"[..])
        );
        assert_eq!(cr.mech, Mech::Login);
        // LOGIN with the user name as initial response
        assert_eq!(
            reply(
                c.line(format!("AUTH\t3\tLOGIN\tservice=smtp\tresp={}", b64(b"dave")).as_bytes())
            ),
            format!("CONT\t3\t{}\n", b64(b"Password:"))
        );
    }

    #[test]
    fn bad_requests_fail_and_protocol_errors_close() {
        let mut c = ready();
        assert_eq!(
            reply(c.line(b"AUTH\t1\tPLAIN\tservice=smtp\tresp=!!!")),
            "FAIL\t1\treason=Invalid base64 data in initial response\n"
        );
        assert!(reply(c.line(b"AUTH\t2\tCRAM-MD5\tservice=smtp")).starts_with("FAIL\t2\t"));
        assert!(reply(c.line(b"CONT\t99\tAAAA")).starts_with("FAIL\t99\t"));
        let bad_plain = format!("AUTH\t3\tPLAIN\tservice=smtp\tresp={}", b64(b"no-nuls"));
        assert!(reply(c.line(bad_plain.as_bytes())).starts_with("FAIL\t3\t"));
        let other = format!(
            "AUTH\t4\tPLAIN\tservice=smtp\tresp={}",
            b64(b"root\0bob\0pw")
        );
        assert_eq!(
            reply(c.line(other.as_bytes())),
            "FAIL\t4\treason=Authorization failed.\n"
        );
        assert_eq!(
            reply(c.line(b"AUTH\t6\tPLAIN\tservice=smtp")),
            "CONT\t6\t\n"
        );
        assert!(reply(c.line(b"CONT\t6\t%%%")).starts_with("FAIL\t6\t"));
        assert!(matches!(c.line(b"AUTH\t7\tPLAIN"), Event::Close(_)));
        assert!(matches!(
            c.line(b"AUTH\tx\tPLAIN\tservice=smtp"),
            Event::Close(_)
        ));
        assert!(matches!(c.line(b"HELLO"), Event::Close(_)));
        assert!(matches!(
            Connection::new().line(b"CPID\t1"),
            Event::Close(_)
        ));
        assert!(matches!(
            Connection::new().line(b"VERSION\t2\t0"),
            Event::Close(_)
        ));
    }

    #[test]
    fn requests_in_progress_are_bounded_and_ids_unique() {
        let mut c = ready();
        for id in 0..MAX_PENDING as u32 {
            let line = format!("AUTH\t{id}\tLOGIN\tservice=smtp");
            assert!(reply(c.line(line.as_bytes())).starts_with("CONT"));
        }
        let line = format!("AUTH\t{}\tLOGIN\tservice=smtp", MAX_PENDING);
        assert!(reply(c.line(line.as_bytes())).starts_with("FAIL"));
        assert_eq!(c.pending(), MAX_PENDING);
        assert!(matches!(
            c.line(b"AUTH\t0\tLOGIN\tservice=smtp"),
            Event::Close(_)
        ));
        assert_eq!(c.line(b"CANCEL\t0"), Event::Nothing);
        assert_eq!(c.pending(), MAX_PENDING - 1);
    }

    #[test]
    fn verdicts_and_escaping() {
        assert_eq!(verdict(3, "alice", Outcome::Ok), b"OK\t3\tuser=alice\n");
        assert_eq!(
            verdict(4, "a\tb", Outcome::Fail),
            b"FAIL\t4\tuser=a\x01tb\n"
        );
        assert_eq!(
            verdict(5, "x", Outcome::TempFail),
            b"FAIL\t5\tuser=x\ttemp\treason=Temporary authentication failure.\n"
        );
        let mut out = Vec::new();
        escape(b"\0\x01\t\r\nz", &mut out);
        assert_eq!(unescape(&out), b"\0\x01\t\r\nz");
    }

    proptest::proptest! {
        #[test]
        fn any_line_is_handled_without_panic(lines in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200), 0..20)) {
            let mut c = ready();
            for l in &lines {
                let _ = c.line(l);
                proptest::prop_assert!(c.pending() <= MAX_PENDING);
            }
        }

        #[test]
        fn escaping_round_trips(s in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..100)) {
            let mut out = Vec::new();
            escape(&s, &mut out);
            proptest::prop_assert!(!out.contains(&b'\t') && !out.contains(&b'\n'));
            proptest::prop_assert_eq!(unescape(&out), s);
        }

        #[test]
        fn plain_credentials_round_trip(user in "[a-z@.]{1,30}", pw in proptest::collection::vec(1u8.., 0..60), id in 0u32..) {
            let mut c = ready();
            let mut msg = vec![0];
            msg.extend_from_slice(user.as_bytes());
            msg.push(0);
            msg.extend_from_slice(&pw);
            let line = format!("AUTH\t{id}\tPLAIN\tservice=smtp\tresp={}", b64(&msg));
            match c.line(line.as_bytes()) {
                Event::Verify(cr) => {
                    proptest::prop_assert_eq!(cr.id, id);
                    proptest::prop_assert_eq!(cr.login, user);
                    proptest::prop_assert_eq!(cr.password, pw);
                }
                other => proptest::prop_assert!(false, "{:?}", other),
            }
        }
    }
}
