//! SELECT parameters, CREATE, LIST, STATUS and ID (RFC 3501 §6.3,
//! RFC 4466, RFC 5258, RFC 5819, RFC 6154, RFC 7162, RFC 2971).

use super::core::Parser;
use super::{fail, PResult};
use crate::command::{Command, Qresync, SelectParams};
use crate::list::{ListArgs, ListReturn, ListSelect, SpecialUse, StatusItem};

/// `[SP "(" select-param *(SP select-param) ")"]` (RFC 4466 §2.1,
/// RFC 7162 §3.1.8 CONDSTORE, §3.2.5 QRESYNC).
pub(crate) fn select_params(p: &mut Parser<'_>) -> PResult<SelectParams> {
    let mut params = SelectParams::default();
    if p.at_end() {
        return Ok(params);
    }
    p.sp()?;
    p.expect(b'(', "select parameters")?;
    p.enter()?;
    loop {
        let name = p.word()?;
        match name.as_str() {
            "CONDSTORE" => params.condstore = true,
            "QRESYNC" => {
                p.sp()?;
                params.qresync = Some(qresync(p)?);
            }
            _ => return fail(format!("Unknown select parameter {name}")),
        }
        if p.eat(b')') {
            break;
        }
        p.sp()?;
    }
    p.leave();
    Ok(params)
}

/// `"(" uidvalidity SP mod-sequence-value [SP known-uids]
/// [SP seq-match-data] ")"` (RFC 7162 §3.2.5, §7).
fn qresync(p: &mut Parser<'_>) -> PResult<Qresync> {
    p.expect(b'(', "QRESYNC parameters")?;
    p.enter()?;
    let uidvalidity = p.nz_number()?;
    p.sp()?;
    let modseq = p.number64()?;
    let mut q = Qresync {
        uidvalidity,
        modseq,
        known_uids: None,
        seq_match: None,
    };
    if p.eat(b' ') {
        if p.peek() != Some(b'(') {
            q.known_uids = Some(p.sequence_set()?);
            if p.eat(b' ') {
                q.seq_match = Some(seq_match(p)?);
            }
        } else {
            q.seq_match = Some(seq_match(p)?);
        }
    }
    p.expect(b')', ")")?;
    p.leave();
    Ok(q)
}

fn seq_match(
    p: &mut Parser<'_>,
) -> PResult<(crate::sequence::SequenceSet, crate::sequence::SequenceSet)> {
    p.expect(b'(', "(")?;
    let seqs = p.sequence_set()?;
    p.sp()?;
    let uids = p.sequence_set()?;
    p.expect(b')', ")")?;
    Ok((seqs, uids))
}

/// `CREATE SP mailbox [SP "(" "USE" SP "(" use-attr *(SP use-attr) ")" ")"]`
/// (RFC 3501 §6.3.3, RFC 4466 §2.2, RFC 6154 §3, §6).
pub(crate) fn create(p: &mut Parser<'_>) -> PResult<Command> {
    p.sp()?;
    let mailbox = p.mailbox()?;
    let mut special_use = Vec::new();
    if !p.at_end() {
        p.sp()?;
        p.expect(b'(', "CREATE parameters")?;
        p.enter()?;
        loop {
            let name = p.word()?;
            if name != "USE" {
                return fail(format!("Unknown CREATE parameter {name}"));
            }
            p.sp()?;
            p.expect(b'(', "(")?;
            loop {
                p.expect(b'\\', "special-use attribute")?;
                let a = p.atom()?;
                let mut full = vec![b'\\'];
                full.extend_from_slice(a);
                match SpecialUse::from_name(&full) {
                    Some(u) if !special_use.contains(&u) => special_use.push(u),
                    Some(_) => {}
                    // RFC 6154 §6: the server answers NO [USEATTR]; an
                    // attribute outside the grammar is a syntax error.
                    None => {
                        return fail(format!(
                            "Unknown special-use attribute {}",
                            String::from_utf8_lossy(&full)
                        ))
                    }
                }
                if p.eat(b')') {
                    break;
                }
                p.sp()?;
            }
            if p.eat(b')') {
                break;
            }
            p.sp()?;
        }
        p.leave();
    }
    Ok(Command::Create {
        mailbox,
        special_use,
    })
}

/// `LIST [SP list-select-opts] SP mailbox SP mbox-or-pat
/// [SP list-return-opts]` (RFC 5258 §6; RFC 3501 §6.3.8 basic form).
pub(crate) fn list(p: &mut Parser<'_>) -> PResult<ListArgs> {
    p.sp()?;
    let mut args = ListArgs {
        selection: Vec::new(),
        reference: Vec::new(),
        patterns: Vec::new(),
        returns: Vec::new(),
        extended: false,
    };
    if p.eat(b'(') {
        args.extended = true;
        if !p.eat(b')') {
            loop {
                let opt = match p.word()?.as_str() {
                    "SUBSCRIBED" => ListSelect::Subscribed,
                    "REMOTE" => ListSelect::Remote,
                    "RECURSIVEMATCH" => ListSelect::RecursiveMatch,
                    "SPECIAL-USE" => ListSelect::SpecialUse,
                    other => return fail(format!("Unknown LIST selection option {other}")),
                };
                if !args.selection.contains(&opt) {
                    args.selection.push(opt);
                }
                if p.eat(b')') {
                    break;
                }
                p.sp()?;
            }
        }
        // RFC 5258 §3.1: RECURSIVEMATCH alone is a syntax error.
        if args.selection.contains(&ListSelect::RecursiveMatch)
            && !args
                .selection
                .iter()
                .any(|o| matches!(o, ListSelect::Subscribed | ListSelect::SpecialUse))
        {
            return fail("RECURSIVEMATCH needs another selection option");
        }
        p.sp()?;
    }
    args.reference = p.astring()?;
    p.sp()?;
    if p.eat(b'(') {
        // RFC 5258 §6: "(" mbox-or-pat *(SP mbox-or-pat) ")"
        args.extended = true;
        loop {
            args.patterns.push(p.list_mailbox()?);
            p.check_items(args.patterns.len())?;
            if p.eat(b')') {
                break;
            }
            p.sp()?;
        }
    } else {
        args.patterns.push(p.list_mailbox()?);
    }
    if !p.at_end() {
        p.sp()?;
        if !p.eat_word(b"RETURN") {
            return fail("Expected RETURN");
        }
        args.extended = true;
        p.sp()?;
        p.expect(b'(', "return options")?;
        p.enter()?;
        if !p.eat(b')') {
            loop {
                let opt = match p.word()?.as_str() {
                    "SUBSCRIBED" => ListReturn::Subscribed,
                    "CHILDREN" => ListReturn::Children,
                    "SPECIAL-USE" => ListReturn::SpecialUse,
                    "STATUS" => {
                        p.sp()?;
                        ListReturn::Status(status_items(p)?)
                    }
                    other => return fail(format!("Unknown LIST return option {other}")),
                };
                args.returns.push(opt);
                p.check_items(args.returns.len())?;
                if p.eat(b')') {
                    break;
                }
                p.sp()?;
            }
        }
        p.leave();
    }
    Ok(args)
}

/// `STATUS SP mailbox SP "(" status-att *(SP status-att) ")"`
/// (RFC 3501 §6.3.10).
pub(crate) fn status(p: &mut Parser<'_>) -> PResult<Command> {
    p.sp()?;
    let mailbox = p.mailbox()?;
    p.sp()?;
    let items = status_items(p)?;
    Ok(Command::Status { mailbox, items })
}

fn status_items(p: &mut Parser<'_>) -> PResult<Vec<StatusItem>> {
    p.expect(b'(', "status items")?;
    let mut items = Vec::new();
    loop {
        let item = match p.word()?.as_str() {
            "MESSAGES" => StatusItem::Messages,
            "RECENT" => StatusItem::Recent,
            "UIDNEXT" => StatusItem::UidNext,
            "UIDVALIDITY" => StatusItem::UidValidity,
            "UNSEEN" => StatusItem::Unseen,
            "SIZE" => StatusItem::Size,
            "HIGHESTMODSEQ" => StatusItem::HighestModSeq,
            "DELETED" => StatusItem::Deleted,
            "DELETED-STORAGE" => StatusItem::DeletedStorage,
            "APPENDLIMIT" => StatusItem::AppendLimit,
            other => return fail(format!("Unknown STATUS item {other}")),
        };
        if !items.contains(&item) {
            items.push(item);
        }
        if p.eat(b')') {
            return Ok(items);
        }
        p.sp()?;
    }
}

/// `ID SP ("(" string SP nstring *(SP string SP nstring) ")" / nil)`
/// (RFC 2971 §4). RFC 2971 §3.3 caps the list at 30 pairs; we enforce
/// `max_items` only.
pub(crate) fn id(p: &mut Parser<'_>) -> PResult<Command> {
    p.sp()?;
    if p.eat_word(b"NIL") {
        return Ok(Command::Id { params: None });
    }
    p.expect(b'(', "ID parameters")?;
    let mut params = Vec::new();
    if !p.eat(b')') {
        loop {
            let key = p.string()?;
            p.sp()?;
            let value = p.nstring()?;
            params.push((key, value));
            p.check_items(params.len())?;
            if p.eat(b')') {
                break;
            }
            p.sp()?;
        }
    }
    Ok(Command::Id {
        params: Some(params),
    })
}
