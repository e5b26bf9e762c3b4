//! LOGIN, AUTHENTICATE PLAIN and LOGIN (with or without SASL-IR) and STARTTLS (RFC 3501
//! §6.2, RFC 4959, RFC 4616, draft-murchison-sasl-login, RFC 9051 §6.2.1).

use std::sync::Arc;

use base64::Engine;
use maildex_imap_proto::{AuthLine, ResponseCode, Tag};

use super::{blocking, Authed, CmdError, Done, Session, State};
use crate::stream::Stream;
use maildex_accounts::LogName;
use maildex_net::login::Verdict;

impl Session {
    pub(super) async fn starttls(&mut self, tag: &Tag) -> Result<Done, CmdError> {
        let Some(tls) = self.shared.tls.clone() else {
            return Err(CmdError::Bad("TLS is not configured".into()));
        };
        if self.stream.is_tls() {
            return Err(CmdError::Bad("TLS is already active".into()));
        }
        self.tagged(
            tag,
            maildex_imap_proto::encode::Status::Ok,
            None,
            "Begin TLS negotiation now.",
        );
        self.flush().await?;
        // RFC 9051 §6.2.1 / RFC 3207 §4.2 style: anything the client pipelined after
        // STARTTLS was sent in the clear and is never executed
        let dropped = self.rx.unread();
        self.rx.discard_buffered();
        if dropped > 0 {
            tracing::info!(
                bytes = dropped,
                "dropped plaintext pipelined after STARTTLS"
            );
        }
        let Stream::Plain(tcp) = std::mem::replace(&mut self.stream, Stream::Detached) else {
            return Err(CmdError::Bye("TLS state confused".into()));
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.config());
        match tokio::time::timeout(std::time::Duration::from_secs(30), acceptor.accept(tcp)).await {
            Ok(Ok(s)) => {
                self.stream = Stream::Tls(Box::new(s));
                Ok(Done::Written)
            }
            Ok(Err(e)) => Err(CmdError::Io(e)),
            Err(_) => Err(CmdError::Io(std::io::ErrorKind::TimedOut.into())),
        }
    }

    pub(super) async fn login(
        &mut self,
        username: Vec<u8>,
        password: Vec<u8>,
    ) -> Result<Done, CmdError> {
        if !self.plaintext_ok() {
            return Err(CmdError::no(
                ResponseCode::PrivacyRequired,
                "Plaintext authentication disallowed on non-secure connections.",
            ));
        }
        // a name that is not UTF-8 names no user: it fails like any unknown one
        let login = String::from_utf8_lossy(&username).into_owned();
        self.check_password(login, password, "LOGIN-command").await
    }

    pub(super) async fn authenticate(
        &mut self,
        mechanism: &str,
        initial: Option<Vec<u8>>,
    ) -> Result<Done, CmdError> {
        let login_mech = mechanism.eq_ignore_ascii_case("LOGIN");
        if !login_mech && !mechanism.eq_ignore_ascii_case("PLAIN") {
            return Err(CmdError::No(
                None,
                "Unsupported authentication mechanism.".into(),
            ));
        }
        if !self.plaintext_ok() {
            return Err(CmdError::no(
                ResponseCode::PrivacyRequired,
                "Plaintext authentication disallowed on non-secure connections.",
            ));
        }
        let (login, password) = if login_mech {
            self.sasl_login(initial).await?
        } else {
            self.sasl_plain(initial).await?
        };
        let login = String::from_utf8_lossy(&login).into_owned();
        let mechanism = if login_mech { "LOGIN" } else { "PLAIN" };
        self.check_password(login, password, mechanism).await
    }

    /// PLAIN (RFC 4616): one message `[authzid] NUL authcid NUL passwd`, as the initial
    /// response (RFC 4959) or the answer to an empty challenge. Returns (user, password).
    async fn sasl_plain(
        &mut self,
        initial: Option<Vec<u8>>,
    ) -> Result<(Vec<u8>, Vec<u8>), CmdError> {
        let plain = match initial {
            Some(ir) => decode_base64(&ir)?,
            None => self.sasl_challenge(b"").await?,
        };
        // RFC 4616 §2: [authzid] NUL authcid NUL passwd
        let mut fields = plain.splitn(3, |&b| b == 0);
        let (Some(authzid), Some(authcid), Some(password)) =
            (fields.next(), fields.next(), fields.next())
        else {
            return Err(CmdError::Bad("Invalid PLAIN message.".into()));
        };
        if !authzid.is_empty() && authzid != authcid {
            // acting as another user is not offered
            return Err(CmdError::no(
                ResponseCode::AuthorizationFailed,
                "Authorization failed.",
            ));
        }
        Ok((authcid.to_vec(), password.to_vec()))
    }

    /// LOGIN (draft-murchison-sasl-login-00 §2, as Dovecot and Outlook speak it): the
    /// challenges "Username:" and "Password:"; an initial response is the user name.
    async fn sasl_login(
        &mut self,
        initial: Option<Vec<u8>>,
    ) -> Result<(Vec<u8>, Vec<u8>), CmdError> {
        let user = match initial {
            Some(ir) if !ir.is_empty() => decode_base64(&ir)?,
            _ => self.sasl_challenge(b"Username:").await?,
        };
        let password = self.sasl_challenge(b"Password:").await?;
        Ok((user, password))
    }

    /// Sends a challenge and reads the client's decoded answer. RFC 3501 §7.5: the
    /// challenge is base64 after `+ ` (an empty one is `+ ` alone); §6.2.2: a `*`
    /// answer cancels the exchange (BAD), one that is not base64 is BAD too.
    async fn sasl_challenge(&mut self, challenge: &[u8]) -> Result<Vec<u8>, CmdError> {
        let encoded = base64::engine::general_purpose::STANDARD.encode(challenge);
        maildex_imap_proto::encode::continuation(&mut self.out, &encoded);
        self.flush().await?;
        match maildex_imap_proto::auth_line(&self.read_line().await?) {
            AuthLine::Cancel => Err(CmdError::Bad("Authentication canceled.".into())),
            AuthLine::Response(r) => decode_base64(&r),
        }
    }

    /// Reads one raw line (AUTHENTICATE responses, IDLE's DONE).
    pub(super) async fn read_line(&mut self) -> Result<Vec<u8>, CmdError> {
        loop {
            if let Some(line) = self.rx.next_line() {
                return line.map_err(|_| CmdError::Bye("Line too long.".into()));
            }
            let n = self.read_some().await?;
            self.rx.feed(&self.read_buf[..n]);
        }
    }

    /// Checks a login through the shared [`maildex_net::login::LoginGate`]. Every failure
    /// answers alike and costs the address a penalty, whatever failed: no such user, a
    /// wrong password, a password over [`maildex_net::login::MAX_PASSWORD_LEN`], a user not
    /// allowed from this address, a hash the server cannot check (issue 15 #29).
    async fn check_password(
        &mut self,
        login: String,
        password: Vec<u8>,
        mechanism: &str,
    ) -> Result<Done, CmdError> {
        let ip = self.peer.ip();
        let accounts = Arc::clone(&self.shared.accounts);
        let who = login.clone();
        let verdict = self
            .shared
            .logins
            .check(
                ip,
                &login,
                password,
                move |password| accounts.verify_login(&who, &password, ip),
                |u| u.name.as_str(),
            )
            .await;
        let user = match verdict {
            Verdict::Accepted(user) => user,
            Verdict::Refused => {
                tracing::info!(login = %LogName::new(&login), "login failed");
                return Err(CmdError::no(
                    ResponseCode::AuthenticationFailed,
                    "Authentication failed.",
                ));
            }
            Verdict::Unavailable(e) => {
                // RFC 5530 §3: UNAVAILABLE, "temporary failure because a subsystem is
                // down"; no penalty, the client did nothing wrong (Dovecot: "Temporary
                // authentication failure.")
                tracing::error!(login = %LogName::new(&login), error = %e, "login: user directory unavailable");
                return Err(CmdError::no(
                    ResponseCode::Unavailable,
                    "Temporary authentication failure.",
                ));
            }
            Verdict::Internal(e) => return Err(CmdError::server(e)),
        };
        let accounts = Arc::clone(&self.shared.accounts);
        let u = user.clone();
        let store = blocking(move || accounts.session_store(&u))
            .await?
            .map_err(|e| {
                tracing::error!(user = %user.name, error = %e, "cannot open the user's mail");
                CmdError::no(ResponseCode::Unavailable, "Mail storage is not available.")
            })?;
        tracing::Span::current().record("user", user.name.as_str());
        tracing::info!(tls = self.stream.is_tls(), mechanism, "logged in");
        self.state = State::Authenticated(Authed { user, store });
        let caps = self.capabilities();
        Ok(Done::OkCode(
            ResponseCode::Capability(caps),
            "Logged in".into(),
        ))
    }
}

fn decode_base64(data: &[u8]) -> Result<Vec<u8>, CmdError> {
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|_| CmdError::Bad("Invalid base64 data.".into()))
}
