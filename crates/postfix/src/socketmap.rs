//! The socketmap server: maps `mailbox` (for `virtual_mailbox_maps`) and `alias` (for
//! `virtual_alias_maps`), answered from the accounts.

use std::sync::Arc;

use maildex_accounts::Accounts;
use maildex_postfix_proto::socketmap::{self, Answer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{Shared, Stream};

/// Serves one client connection until it closes or sends a malformed request.
pub(crate) async fn serve(mut stream: Box<dyn Stream>, shared: &Shared) -> std::io::Result<()> {
    // a request and its netstring frame; more is never held
    let cap = socketmap::MAX_REQUEST + 16;
    let mut buf: Vec<u8> = Vec::with_capacity(512);
    let mut chunk = [0u8; 4096];
    loop {
        loop {
            let (name, key, used) = match socketmap::parse(&buf) {
                Ok(Some((r, n))) => (r.name.to_vec(), r.key.to_vec(), n),
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "socketmap client sent a malformed request; closing");
                    return Ok(());
                }
            };
            buf.drain(..used);
            let answer = lookup(&shared.accounts, &name, &key).await;
            stream.write_all(&answer.encode()).await?;
            stream.flush().await?;
        }
        let room = cap.saturating_sub(buf.len()).min(chunk.len());
        let n = stream.read(&mut chunk[..room]).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Answers one request. A key that is not UTF-8 names no user.
async fn lookup(accounts: &Arc<Accounts>, name: &[u8], key: &[u8]) -> Answer {
    let Ok(key) = std::str::from_utf8(key) else {
        return Answer::NotFound;
    };
    let key = key.to_owned();
    let accounts = Arc::clone(accounts);
    let answer = match name {
        b"mailbox" => {
            tokio::task::spawn_blocking(move || match accounts.mailbox_user(&key) {
                Ok(Some(u)) => Answer::Ok(u.name),
                Ok(None) => Answer::NotFound,
                Err(e) => Answer::Temp(e.to_string()),
            })
            .await
        }
        b"alias" => {
            tokio::task::spawn_blocking(move || match accounts.alias_targets(&key) {
                Ok(Some(targets)) => Answer::Ok(alias_value(&key, &targets)),
                Ok(None) => Answer::NotFound,
                Err(e) => Answer::Temp(e.to_string()),
            })
            .await
        }
        _ => {
            return Answer::Perm(format!(
                "unknown map {:?}: maildex serves \"mailbox\" and \"alias\"",
                String::from_utf8_lossy(name)
            ))
        }
    };
    answer.unwrap_or_else(|e| Answer::Temp(format!("lookup failed: {e}")))
}

/// The targets of `alias` as postfix's `virtual_alias_maps` wants them: comma-separated
/// addresses. A target without a domain (a bare user name of the users file) gets the
/// alias's domain, or postfix would append `$myorigin` to it.
fn alias_value(alias: &str, targets: &[String]) -> String {
    let domain = alias.rsplit_once('@').map(|(_, d)| d);
    let mut out = String::new();
    for t in targets {
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(t);
        if let (false, Some(d)) = (t.contains('@'), domain) {
            out.push('@');
            out.push_str(d);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn bare_targets_get_the_alias_domain() {
        let t = vec!["alice".to_owned(), "bob@example.net".to_owned()];
        assert_eq!(
            super::alias_value("team@example.org", &t),
            "alice@example.org,bob@example.net"
        );
        assert_eq!(super::alias_value("team", &t), "alice,bob@example.net");
    }
}
