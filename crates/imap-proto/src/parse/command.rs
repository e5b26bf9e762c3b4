//! Command dispatch and the small commands (RFC 3501 §6, RFC 9051 §6).

use super::core::Parser;
use super::{fail, fetch, list, search, PResult};
use crate::command::{Command, StoreArgs, StoreMode};

/// Parses everything after the tag (RFC 3501 §9 `command`).
pub(crate) fn command(p: &mut Parser<'_>) -> PResult<Command> {
    let name = p.word().or_else(|_| fail("Missing command"))?;
    let cmd = match name.as_str() {
        "CAPABILITY" => Command::Capability,
        "NOOP" => Command::Noop,
        "LOGOUT" => Command::Logout,
        "STARTTLS" => Command::StartTls,
        "CHECK" => Command::Check,
        "CLOSE" => Command::Close,
        "EXPUNGE" => Command::Expunge { uids: None },
        "IDLE" => Command::Idle,
        "NAMESPACE" => Command::Namespace,
        "UNSELECT" => Command::Unselect,
        "AUTHENTICATE" => authenticate(p)?,
        "LOGIN" => {
            // RFC 3501 §6.2.3: LOGIN SP userid SP password
            p.sp()?;
            let username = p.astring()?;
            p.sp()?;
            let password = p.astring()?;
            Command::Login { username, password }
        }
        "SELECT" | "EXAMINE" => {
            p.sp()?;
            let mailbox = p.mailbox()?;
            let params = list::select_params(p)?;
            if name == "SELECT" {
                Command::Select { mailbox, params }
            } else {
                Command::Examine { mailbox, params }
            }
        }
        "CREATE" => list::create(p)?,
        "DELETE" => Command::Delete {
            mailbox: one_mailbox(p)?,
        },
        "SUBSCRIBE" => Command::Subscribe {
            mailbox: one_mailbox(p)?,
        },
        "UNSUBSCRIBE" => Command::Unsubscribe {
            mailbox: one_mailbox(p)?,
        },
        "RENAME" => {
            let from = one_mailbox(p)?;
            let to = one_mailbox(p)?;
            Command::Rename { from, to }
        }
        "LIST" => Command::List(list::list(p)?),
        "LSUB" => {
            p.sp()?;
            let reference = p.astring()?;
            p.sp()?;
            let pattern = p.list_mailbox()?;
            Command::Lsub { reference, pattern }
        }
        "STATUS" => list::status(p)?,
        "APPEND" => return fail("APPEND must be streamed"),
        "ENABLE" => enable(p)?,
        "GETQUOTA" => {
            p.sp()?;
            Command::GetQuota { root: p.astring()? }
        }
        "GETQUOTAROOT" => Command::GetQuotaRoot {
            mailbox: one_mailbox(p)?,
        },
        "SETQUOTA" => set_quota(p)?,
        "ID" => list::id(p)?,
        "UID" => return uid(p),
        "SEARCH" | "SORT" | "THREAD" | "FETCH" | "STORE" | "COPY" | "MOVE" => {
            return uid_able(p, &name, false)
        }
        _ => return fail(format!("Unknown command {}", printable(&name))),
    };
    p.end()?;
    Ok(cmd)
}

/// Command names echoed in errors are cut and kept printable.
fn printable(s: &str) -> String {
    s.chars()
        .take(32)
        .filter(|c| c.is_ascii_graphic())
        .collect()
}

fn one_mailbox(p: &mut Parser<'_>) -> PResult<crate::types::Mailbox> {
    p.sp()?;
    p.mailbox()
}

/// `SETQUOTA SP quota-root-name SP setquota-list` (RFC 9208 §7): `setquota-list = "("
/// [setquota-resource *(SP setquota-resource)] ")"`, `setquota-resource = resource-name SP
/// resource-limit` (an atom and a number64).
fn set_quota(p: &mut Parser<'_>) -> PResult<Command> {
    p.sp()?;
    let root = p.astring()?;
    p.sp()?;
    p.expect(b'(', "Missing (")?;
    let mut limits = Vec::new();
    while !p.eat(b')') {
        if !limits.is_empty() {
            p.sp()?;
        }
        let name = p.word()?;
        p.sp()?;
        limits.push((name, p.number64()?));
        p.check_items(limits.len())?;
    }
    Ok(Command::SetQuota { root, limits })
}

/// `AUTHENTICATE SP auth-type [SP (base64 / "=")]` (RFC 3501 §6.2.2,
/// RFC 4959 §4).
fn authenticate(p: &mut Parser<'_>) -> PResult<Command> {
    p.sp()?;
    let mechanism = p.word()?;
    let initial_response = if p.eat(b' ') {
        if p.eat(b'=') {
            Some(Vec::new())
        } else {
            // RFC 3501 §9 base64 = *(4base64-char) [base64-terminal]
            let b64 = p.take_while(
                |b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='),
                "base64",
            )?;
            if b64.len() % 4 != 0 {
                return fail("Invalid base64");
            }
            Some(b64.to_vec())
        }
    } else {
        None
    };
    Ok(Command::Authenticate {
        mechanism,
        initial_response,
    })
}

/// `ENABLE 1*(SP capability)` (RFC 5161 §4).
fn enable(p: &mut Parser<'_>) -> PResult<Command> {
    let mut capabilities = Vec::new();
    while !p.at_end() {
        p.sp()?;
        capabilities.push(p.word()?);
        p.check_items(capabilities.len())?;
    }
    if capabilities.is_empty() {
        return fail("Missing argument");
    }
    Ok(Command::Enable { capabilities })
}

/// `UID SP (copy / move / fetch / search / sort / thread / store / uid-expunge)`
/// (RFC 3501 §6.4.8, RFC 4315 §2.1, RFC 6851 §3.3, RFC 5256 §5).
fn uid(p: &mut Parser<'_>) -> PResult<Command> {
    p.sp()?;
    let name = p.word()?;
    match name.as_str() {
        "SEARCH" | "SORT" | "THREAD" | "FETCH" | "STORE" | "COPY" | "MOVE" => {
            uid_able(p, &name, true)
        }
        "EXPUNGE" => {
            p.sp()?;
            let uids = p.sequence_set()?;
            p.end()?;
            Ok(Command::Expunge { uids: Some(uids) })
        }
        _ => fail(format!("Unknown command UID {}", printable(&name))),
    }
}

fn uid_able(p: &mut Parser<'_>, name: &str, uid: bool) -> PResult<Command> {
    let cmd = match name {
        "SEARCH" => Command::Search {
            uid,
            args: search::search(p)?,
        },
        "SORT" => Command::Sort {
            uid,
            args: search::sort(p)?,
        },
        "THREAD" => Command::Thread {
            uid,
            args: search::thread(p)?,
        },
        "FETCH" => {
            p.sp()?;
            let set = p.sequence_set()?;
            p.sp()?;
            let args = fetch::fetch(p)?;
            Command::Fetch { uid, set, args }
        }
        "STORE" => {
            p.sp()?;
            let set = p.sequence_set()?;
            let args = store(p)?;
            Command::Store { uid, set, args }
        }
        _ => {
            p.sp()?;
            let set = p.sequence_set()?;
            p.sp()?;
            let mailbox = p.mailbox()?;
            if name == "COPY" {
                Command::Copy { uid, set, mailbox }
            } else {
                Command::Move { uid, set, mailbox }
            }
        }
    };
    p.end()?;
    Ok(cmd)
}

/// `STORE set [SP "(" UNCHANGEDSINCE n ")"] SP store-att-flags`
/// (RFC 3501 §9 `store-att-flags`, RFC 7162 §3.1.3, RFC 4466 §2.5).
fn store(p: &mut Parser<'_>) -> PResult<StoreArgs> {
    p.sp()?;
    let mut unchanged_since = None;
    if p.eat(b'(') {
        p.enter()?;
        loop {
            let m = p.word()?;
            if m != "UNCHANGEDSINCE" {
                return fail(format!("Unknown STORE modifier {}", printable(&m)));
            }
            if unchanged_since.is_some() {
                return fail("Duplicate STORE modifier");
            }
            p.sp()?;
            unchanged_since = Some(p.number64()?);
            if p.eat(b')') {
                break;
            }
            p.sp()?;
        }
        p.leave();
        p.sp()?;
    }
    let mode = if p.eat(b'+') {
        StoreMode::Add
    } else if p.eat(b'-') {
        StoreMode::Remove
    } else {
        StoreMode::Replace
    };
    let silent = if p.eat_word(b"FLAGS") {
        false
    } else if p.eat_word(b"FLAGS.SILENT") {
        true
    } else {
        return fail("Invalid STORE data item");
    };
    p.sp()?;
    // RFC 3501 §9: store-att-flags takes a flag-list or bare flags.
    let flags = if p.peek() == Some(b'(') {
        p.flag_list()?
    } else {
        let mut flags = vec![p.flag()?];
        while p.eat(b' ') {
            flags.push(p.flag()?);
            p.check_items(flags.len())?;
        }
        flags
    };
    Ok(StoreArgs {
        mode,
        silent,
        flags,
        unchanged_since,
    })
}
