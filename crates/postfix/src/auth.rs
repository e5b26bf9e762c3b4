//! The SASL socket: the Dovecot auth protocol (`maildex_postfix_proto::auth`) answered
//! through the shared login gate.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use maildex_accounts::LogName;
use maildex_net::login::Verdict;
use maildex_postfix_proto::auth::{self, Credentials, Event, Outcome};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::{Shared, Stream};

/// Serves one client connection until it closes or breaks the protocol.
pub(crate) async fn serve(stream: Box<dyn Stream>, shared: &Shared) -> std::io::Result<()> {
    let mut stream = BufReader::new(stream);
    let cuid = rand::random::<u32>();
    let cookie: [u8; 16] = rand::random();
    stream
        .write_all(&auth::handshake(std::process::id(), cuid, &cookie))
        .await?;
    stream.flush().await?;
    let mut conn = auth::Connection::new();
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        // at most MAX_LINE bytes and the LF: a client cannot make the line grow further
        let n = (&mut stream)
            .take(auth::MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if n == 0 {
            return Ok(());
        }
        if line.pop() != Some(b'\n') {
            if line.len() >= auth::MAX_LINE {
                tracing::warn!(
                    bytes = line.len(),
                    "SASL client sent a line over the limit; closing"
                );
            }
            return Ok(());
        }
        let reply = match conn.line(&line) {
            Event::Nothing => continue,
            Event::Reply(r) => r,
            Event::Verify(cr) => check(cr, shared).await,
            Event::Close(reason) => {
                tracing::warn!(reason, "SASL client broke the protocol; closing");
                return Ok(());
            }
        };
        stream.write_all(&reply).await?;
        stream.flush().await?;
    }
}

/// Checks credentials as an IMAP login is checked; the client address is the SMTP
/// client's (`rip=`), or 0.0.0.0 when postfix gave none (all such share one penalty).
async fn check(cr: Credentials, shared: &Shared) -> Vec<u8> {
    let ip = cr.rip.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let accounts = Arc::clone(&shared.accounts);
    let who = cr.login.clone();
    let verdict = shared
        .logins
        .check(
            ip,
            &cr.login,
            cr.password,
            move |password| accounts.verify_login(&who, &password, ip),
            |u| u.name.as_str(),
        )
        .await;
    let login = LogName::new(&cr.login);
    let mech = cr.mech.name();
    match verdict {
        Verdict::Accepted(user) => {
            tracing::info!(user = %user.name, service = %cr.service, mech, rip = %ip, secured = cr.secured, "SASL login");
            auth::verdict(cr.id, &user.name, Outcome::Ok)
        }
        Verdict::Refused => {
            tracing::info!(login = %login, service = %cr.service, mech, rip = %ip, "SASL login failed");
            auth::verdict(cr.id, &cr.login, Outcome::Fail)
        }
        Verdict::Unavailable(e) => {
            tracing::error!(login = %login, error = %e, "SASL login: user directory unavailable");
            auth::verdict(cr.id, &cr.login, Outcome::TempFail)
        }
        Verdict::Internal(e) => {
            tracing::error!(login = %login, error = %e, "SASL login failed inside");
            auth::verdict(cr.id, &cr.login, Outcome::TempFail)
        }
    }
}
