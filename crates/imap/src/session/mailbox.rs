//! Mailbox commands: CREATE, DELETE, RENAME, SUBSCRIBE, UNSUBSCRIBE, LIST (with
//! LIST-EXTENDED, LIST-STATUS, SPECIAL-USE), LSUB and STATUS (RFC 3501 §6.3.3-§6.3.10,
//! RFC 5258, RFC 5819, RFC 6154, RFC 8438).

use std::collections::HashSet;
use std::sync::Arc;

use maildex_imap_proto::{
    encode, ListArgs, ListReturn, ListSelect, Mailbox, ResponseCode, StatusItem,
};
use maildex_store::mutf7;
use maildex_store::records::MailboxRecord;
use maildex_store::{MailboxInfo, UserStore};

use super::subscriptions::{subscribed_parents, unlisted_parents};
use super::{blocking, CmdError, Done, Session, State};

/// The store's UTF-8 name of a wire mailbox name (modified UTF-7, RFC 3501 §5.1.3).
pub(crate) fn imap_name(m: &Mailbox) -> Result<String, CmdError> {
    if m.is_inbox() {
        return Ok("INBOX".into());
    }
    // a well-formed astring naming no possible mailbox is a refusal, not a syntax error
    // (Dovecot: `NO Mailbox name is not valid mUTF-7`)
    let invalid = |detail: String| {
        CmdError::No(
            None,
            format!("Mailbox name is not valid modified UTF-7{detail}"),
        )
    };
    let raw = std::str::from_utf8(m.as_bytes()).map_err(|_| invalid(String::new()))?;
    let name = mutf7::decode(raw).map_err(|e| invalid(format!(": {e}")))?;
    if name.is_empty() {
        return Err(CmdError::no(ResponseCode::Cannot, "Empty mailbox name."));
    }
    // a name that says INBOX in another case is INBOX (RFC 3501 §5.1)
    Ok(if name.eq_ignore_ascii_case("INBOX") {
        "INBOX".into()
    } else {
        name
    })
}

/// Writes a UTF-8 store name as a wire mailbox name.
pub(crate) fn write_name(out: &mut Vec<u8>, name: &str) {
    let wire = if name == "INBOX" {
        "INBOX".to_string()
    } else {
        mutf7::encode(name)
    };
    encode::astring(out, wire.as_bytes());
}

/// Longest reference plus pattern LIST and LSUB take; longer gets `NO [LIMIT]` (RFC 5530
/// §3). A mailbox name is one Maildir++ folder name, at most 255 bytes, so what a longer
/// pattern adds can only be wildcards, which [`wildcard`] collapses anyway.
const MAX_PATTERN: usize = 1024;

/// RFC 3501 §6.3.8 wildcard match of `name` (wire form) against `pattern`: `*` matches
/// anything, `%` anything but the hierarchy separator `.`. A run of wildcards is first
/// collapsed to one (`*` if it holds one, else `%`: `%%` matches what `%` does), and a
/// pattern with more literal bytes than the name cannot match, so what is left is at most
/// twice the name's length; then dynamic programming over it, O(name²) whatever the
/// pattern (a name is at most 255 bytes), no backtracking.
fn wildcard(pattern: &[u8], name: &[u8]) -> bool {
    let is_wild = |c: u8| c == b'*' || c == b'%';
    let mut collapsed: Vec<u8> = Vec::with_capacity(pattern.len().min(2 * name.len() + 1));
    let mut literals = 0;
    for &c in pattern {
        match collapsed.last_mut() {
            Some(last) if is_wild(c) && is_wild(*last) => {
                if c == b'*' {
                    *last = b'*';
                }
            }
            _ => {
                if !is_wild(c) {
                    literals += 1;
                    if literals > name.len() {
                        return false;
                    }
                }
                collapsed.push(c);
            }
        }
    }
    // reach[i]: the pattern consumed so far can end just before name[i]
    let mut reach = vec![false; name.len() + 1];
    let mut next = vec![false; name.len() + 1];
    reach[0] = true;
    for &p in &collapsed {
        match p {
            b'*' | b'%' => {
                let mut on = false;
                for i in 0..=name.len() {
                    on |= reach[i];
                    next[i] = on;
                    if p == b'%' && i < name.len() && name[i] == b'.' {
                        on = false;
                    }
                }
            }
            c => {
                next[0] = false;
                for i in 0..name.len() {
                    next[i + 1] = reach[i] && name[i] == c;
                }
            }
        }
        std::mem::swap(&mut reach, &mut next);
        if !reach.iter().any(|&r| r) {
            return false;
        }
    }
    reach[name.len()]
}

/// Whether wire name `name` matches `reference` + `pattern`; INBOX matches case-insensitively.
fn list_match(reference: &[u8], pattern: &[u8], name: &[u8]) -> bool {
    let mut full = reference.to_vec();
    full.extend_from_slice(pattern);
    if name == b"INBOX" && full.len() >= 5 && full[..5].eq_ignore_ascii_case(b"INBOX") {
        let mut p = b"INBOX".to_vec();
        p.extend_from_slice(&full[5..]);
        return wildcard(&p, name);
    }
    wildcard(&full, name)
}

fn wire(name: &str) -> Vec<u8> {
    if name == "INBOX" {
        b"INBOX".to_vec()
    } else {
        mutf7::encode(name).into_bytes()
    }
}

/// Writes `* STATUS name (items)` from a mailbox record (RFC 3501 §7.2.4); `append_limit`
/// is the APPENDLIMIT of every mailbox (RFC 7889 §3.2: the same as the capability's),
/// `deleted_vsize` the RFC822.SIZE of its `\Deleted` messages (0 unless asked for).
fn status_line(
    out: &mut Vec<u8>,
    name: &str,
    m: &MailboxRecord,
    items: &[StatusItem],
    append_limit: u64,
    deleted_vsize: u64,
) {
    out.extend_from_slice(b"* STATUS ");
    write_name(out, name);
    out.extend_from_slice(b" (");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        let value = match item {
            StatusItem::Messages => u64::from(m.counts.messages),
            StatusItem::Recent => u64::from(m.counts.recent),
            StatusItem::UidNext => u64::from(m.uid_next.get()),
            StatusItem::UidValidity => u64::from(m.uidvalidity),
            StatusItem::Unseen => u64::from(m.counts.unseen),
            StatusItem::Size => m.counts.vsize,
            StatusItem::HighestModSeq => m.highest_modseq.get(),
            StatusItem::Deleted => u64::from(m.counts.deleted),
            // RFC 9208 §4.2: what EXPUNGE would give back, in the unit of STORAGE (1024
            // octets, rounded up as GETQUOTA's use is), counted as QUOTA counts the use
            StatusItem::DeletedStorage => deleted_vsize.div_ceil(1024),
            StatusItem::AppendLimit => append_limit,
        };
        out.extend_from_slice(format!("{} {value}", item.as_str()).as_bytes());
    }
    out.extend_from_slice(b")\r\n");
}

impl Session {
    fn selected_name(&self) -> Option<&str> {
        match &self.state {
            State::Selected(_, s) => Some(s.name()),
            _ => None,
        }
    }

    pub(super) async fn create(&mut self, mailbox: Mailbox) -> Result<Done, CmdError> {
        let mut name = imap_name(&mailbox)?;
        // RFC 3501 §6.3.3: a trailing separator only says "a hierarchy is coming"
        while name.len() > 1 && name.ends_with('.') {
            name.pop();
        }
        if name == "INBOX" {
            return Err(CmdError::no(
                ResponseCode::AlreadyExists,
                "Mailbox already exists.",
            ));
        }
        let store = self.store()?;
        blocking(move || store.create_mailbox(&name)).await??;
        Ok(Done::ok("Create completed."))
    }

    pub(super) async fn delete(&mut self, mailbox: Mailbox) -> Result<Done, CmdError> {
        let name = imap_name(&mailbox)?;
        if name == "INBOX" {
            return Err(CmdError::no(
                ResponseCode::Cannot,
                "INBOX can't be deleted.",
            ));
        }
        let store = self.store()?;
        let deselect = self.selected_name() == Some(name.as_str());
        blocking(move || store.delete_mailbox(&name)).await??;
        if deselect {
            // Dovecot closes the mailbox a session deletes under itself
            if let State::Selected(a, _) = std::mem::replace(&mut self.state, State::Logout) {
                self.state = State::Authenticated(a);
            }
        }
        Ok(Done::ok("Delete completed."))
    }

    pub(super) async fn rename(&mut self, from: Mailbox, to: Mailbox) -> Result<Done, CmdError> {
        let from = imap_name(&from)?;
        let to = imap_name(&to)?;
        if to == "INBOX" {
            return Err(CmdError::no(
                ResponseCode::AlreadyExists,
                "Mailbox already exists.",
            ));
        }
        let store = self.store()?;
        blocking(move || store.rename_mailbox(&from, &to)).await??;
        Ok(Done::ok("Rename completed."))
    }

    pub(super) async fn subscribe(&mut self, mailbox: Mailbox, on: bool) -> Result<Done, CmdError> {
        let name = imap_name(&mailbox)?;
        let store = self.store()?;
        if on {
            blocking(move || store.subscribe(&name)).await??;
            Ok(Done::ok("Subscribe completed."))
        } else {
            blocking(move || store.unsubscribe(&name)).await??;
            Ok(Done::ok("Unsubscribe completed."))
        }
    }

    pub(super) async fn list(&mut self, args: ListArgs) -> Result<Done, CmdError> {
        // RFC 3501 §6.3.8: an empty pattern asks for the separator and root
        if !args.extended && args.patterns.len() == 1 && args.patterns[0].is_empty() {
            self.out
                .extend_from_slice(b"* LIST (\\Noselect) \".\" \"\"\r\n");
            return Ok(Done::ok("List completed."));
        }
        let store = self.store()?;
        check_pattern_length(&args.reference, &args.patterns)?;
        let (reference, patterns) = (args.reference.clone(), args.patterns.clone());
        let (infos, subscribed, matched) = blocking(move || -> Result<_, CmdError> {
            let (infos, subscribed) = (store.list_mailboxes()?, store.subscriptions()?);
            // matched here, on a blocking thread: the cost grows with the mailboxes
            let names = infos.iter().map(|i| &i.name).chain(&subscribed);
            let matched: HashSet<String> = names
                .filter(|n| {
                    let w = wire(n);
                    patterns.iter().any(|p| list_match(&reference, p, &w))
                })
                .cloned()
                .collect();
            Ok((infos, subscribed, matched))
        })
        .await??;
        let sel_subscribed = args.selection.contains(&ListSelect::Subscribed);
        let sel_special = args.selection.contains(&ListSelect::SpecialUse);
        let recursive = args.selection.contains(&ListSelect::RecursiveMatch);
        let ret_subscribed = sel_subscribed || args.returns.contains(&ListReturn::Subscribed);
        let status_items: Option<Vec<StatusItem>> = args.returns.iter().find_map(|r| match r {
            ListReturn::Status(items) => Some(items.clone()),
            _ => None,
        });
        // RFC 7162 §3.1 (STATUS HIGHESTMODSEQ), asked through LIST-STATUS (RFC 5819)
        if status_items
            .as_ref()
            .is_some_and(|i| i.contains(&StatusItem::HighestModSeq))
        {
            self.enable_condstore();
        }
        let matches = |name: &str| matched.contains(name);
        let mut rows: Vec<(String, Vec<&'static str>, bool, Option<&'static str>)> = Vec::new();
        if sel_subscribed {
            // RFC 5258 §3.1: subscribed names, existing or not; RECURSIVEMATCH adds
            // CHILDINFO (§3.5) to those with subscribed children, and the levels above
            // subscribed children that are not listed themselves
            let parents = subscribed_parents(&subscribed);
            for name in &subscribed {
                let info = infos.iter().find(|i| &i.name == name);
                if matches(name) {
                    let mut attrs = vec!["\\Subscribed"];
                    match info {
                        Some(i) if i.selectable => attrs.push(children_attr(i)),
                        _ => attrs.push("\\NonExistent"),
                    }
                    let special = info.and_then(|i| i.special_use).map(|s| s.attribute());
                    if sel_special && special.is_none() {
                        continue;
                    }
                    let childinfo = recursive && parents.contains(name.as_str());
                    rows.push((name.clone(), attrs, childinfo, special));
                }
            }
            if recursive && !sel_special {
                for parent in unlisted_parents(&subscribed, matches) {
                    let attrs = match infos.iter().find(|i| i.name == parent) {
                        Some(i) if i.selectable => vec![children_attr(i)],
                        Some(i) => vec!["\\NonExistent", children_attr(i)],
                        None => vec!["\\NonExistent"],
                    };
                    rows.push((parent, attrs, true, None));
                }
            }
        } else {
            for i in &infos {
                if !matches(&i.name) {
                    continue;
                }
                let special = i.special_use.map(|s| s.attribute());
                if sel_special && special.is_none() {
                    continue;
                }
                let mut attrs = Vec::new();
                if !i.selectable {
                    attrs.push(if args.extended {
                        "\\NonExistent"
                    } else {
                        "\\Noselect"
                    });
                }
                attrs.push(children_attr(i));
                if ret_subscribed && subscribed.contains(&i.name) {
                    attrs.push("\\Subscribed");
                }
                rows.push((i.name.clone(), attrs, false, special));
            }
        }
        // sets, not scans per row: a listing of 20,000 mailboxes ran for seconds on the reactor
        let selectable_infos: HashSet<&str> = infos
            .iter()
            .filter(|i| i.selectable)
            .map(|i| i.name.as_str())
            .collect();
        let selectable: HashSet<String> = rows
            .iter()
            .filter(|(n, attrs, _, _)| {
                !attrs.contains(&"\\NonExistent")
                    && !attrs.contains(&"\\Noselect")
                    && selectable_infos.contains(n.as_str())
            })
            .map(|(n, ..)| n.clone())
            .collect();
        for (name, attrs, childinfo, special) in &rows {
            let mut line = b"* LIST (".to_vec();
            let mut all: Vec<&str> = attrs.clone();
            if let Some(s) = special {
                all.push(s);
            }
            line.extend_from_slice(all.join(" ").as_bytes());
            line.extend_from_slice(b") \".\" ");
            write_name(&mut line, name);
            if *childinfo {
                // the tag is an astring (RFC 5258 §6); as an atom, as Dovecot writes it
                line.extend_from_slice(b" (CHILDINFO (\"SUBSCRIBED\"))");
            }
            line.extend_from_slice(b"\r\n");
            self.out.extend_from_slice(&line);
            // RFC 5819 §2: a STATUS after each selectable mailbox's LIST
            if let (Some(items), true) = (&status_items, selectable.contains(name)) {
                if let Some((rec, deleted)) = self.status_of(name, items).await? {
                    let limit = self.shared.settings.limits.max_append;
                    status_line(&mut self.out, name, &rec, items, limit, deleted);
                }
            }
        }
        Ok(Done::ok("List completed."))
    }

    pub(super) async fn lsub(
        &mut self,
        reference: Vec<u8>,
        pattern: Vec<u8>,
    ) -> Result<Done, CmdError> {
        let store = self.store()?;
        check_pattern_length(&reference, std::slice::from_ref(&pattern))?;
        type Lsub = (Vec<MailboxInfo>, Vec<String>, Vec<String>);
        let (infos, listed, parents) = blocking(move || -> Result<Lsub, CmdError> {
            // matched here, on a blocking thread, as for LIST
            let matches = |name: &str| list_match(&reference, &pattern, &wire(name));
            let subscribed = store.subscriptions()?;
            // RFC 3501 §6.3.9: a level above subscribed names the pattern does not reach is
            // listed `\Noselect` (`a.b` subscribed, `a` not: `LSUB "" %` returns `a`)
            let parents = unlisted_parents(&subscribed, matches);
            let listed = subscribed.into_iter().filter(|n| matches(n)).collect();
            Ok((store.list_mailboxes()?, listed, parents))
        })
        .await??;
        for name in &listed {
            let exists = infos.iter().any(|i| &i.name == name && i.selectable);
            self.out.extend_from_slice(if exists {
                b"* LSUB () \".\" "
            } else {
                b"* LSUB (\\Noselect) \".\" "
            });
            write_name(&mut self.out, name);
            self.out.extend_from_slice(b"\r\n");
        }
        for parent in parents {
            self.out.extend_from_slice(b"* LSUB (\\Noselect) \".\" ");
            write_name(&mut self.out, &parent);
            self.out.extend_from_slice(b"\r\n");
        }
        Ok(Done::ok("Lsub completed."))
    }

    /// A mailbox's record and, when `items` ask for DELETED-STORAGE, the RFC822.SIZE of its
    /// `\Deleted` messages (else 0); `None` when there is no such mailbox.
    async fn status_of(
        &mut self,
        name: &str,
        items: &[StatusItem],
    ) -> Result<Option<(MailboxRecord, u64)>, CmdError> {
        let store: Arc<UserStore> = self.store()?;
        let n = name.to_owned();
        let deleted = items.contains(&StatusItem::DeletedStorage);
        Ok(blocking(move || {
            let Some(rec) = store.mailbox_status(&n)? else {
                return Ok(None);
            };
            let size = if deleted && rec.counts.deleted > 0 {
                store.deleted_vsize(&n)?
            } else {
                0
            };
            Ok::<_, maildex_store::StoreError>(Some((rec, size)))
        })
        .await??)
    }

    pub(super) async fn status(
        &mut self,
        mailbox: Mailbox,
        items: Vec<StatusItem>,
    ) -> Result<Done, CmdError> {
        let name = imap_name(&mailbox)?;
        // RFC 7162 §3.1: STATUS HIGHESTMODSEQ enables CONDSTORE
        if items.contains(&StatusItem::HighestModSeq) {
            self.enable_condstore();
        }
        let Some((rec, deleted)) = self.status_of(&name, &items).await? else {
            return Err(CmdError::no(
                ResponseCode::NonExistent,
                "Mailbox doesn't exist.",
            ));
        };
        let limit = self.shared.settings.limits.max_append;
        status_line(&mut self.out, &name, &rec, &items, limit, deleted);
        // the selected mailbox may have changed too (RFC 3501 §7: any command may carry updates)
        self.refresh(true).await?;
        Ok(Done::ok("Status completed."))
    }
}

/// `NO [LIMIT]` for a reference and pattern over [`MAX_PATTERN`] bytes together.
fn check_pattern_length(reference: &[u8], patterns: &[Vec<u8>]) -> Result<(), CmdError> {
    if patterns
        .iter()
        .any(|p| reference.len() + p.len() > MAX_PATTERN)
    {
        return Err(CmdError::no(
            ResponseCode::Limit,
            format!("Mailbox pattern over {MAX_PATTERN} bytes."),
        ));
    }
    Ok(())
}

fn children_attr(i: &MailboxInfo) -> &'static str {
    if i.has_children {
        "\\HasChildren"
    } else {
        "\\HasNoChildren"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_follow_rfc_3501() {
        assert!(list_match(b"", b"*", b"a.b.c"));
        assert!(list_match(b"", b"%", b"a"));
        assert!(!list_match(b"", b"%", b"a.b"));
        assert!(list_match(b"", b"a.%", b"a.b"));
        assert!(list_match(b"a.", b"%", b"a.b"));
        assert!(list_match(b"", b"inbox", b"INBOX"));
        assert!(!list_match(b"", b"inbox", b"Inbox.x"));
        assert!(list_match(b"", b"S*t", b"Sent"));
        assert!(!list_match(b"", b"S*x", b"Sent"));
    }

    #[test]
    fn collapsed_wildcard_runs_match_as_before() {
        assert!(list_match(b"", b"%%", b"a"));
        assert!(!list_match(b"", b"%%", b"a.b"));
        assert!(list_match(b"", b"%*%", b"a.b"));
        assert!(list_match(b"", b"*%", b"a.b"));
        assert!(list_match(b"", b"a%%.%b", b"ax.yb"));
        assert!(!list_match(b"", b"a%%b", b"a.b"));
        assert!(list_match(b"", b"%", b""));
        // more literal bytes than the name: no match, whatever the wildcards
        assert!(!list_match(b"", b"*a*a*a*", b"aa"));
    }

    #[test]
    fn a_60_kb_pattern_costs_what_the_name_does() {
        let star = b"*".repeat(60_000);
        assert!(list_match(b"", &star, b"a.b.c"));
        let mixed = b"*%".repeat(30_000);
        let name = b"x".repeat(255);
        // collapsed to `*`: 300 names here were 5 billion steps before
        for _ in 0..300 {
            assert!(list_match(b"", &mixed, &name));
        }
    }

    #[test]
    fn hostile_patterns_stay_cheap() {
        let pattern = b"*a%a*a%a*a".repeat(100);
        let mut name = b"a".repeat(5000);
        name.push(b'b');
        assert!(!list_match(b"", &pattern, &name));
    }
}
