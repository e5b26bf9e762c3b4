//! The untagged data a session sends about its selected mailbox, each written in one place
//! from typed values (RFC 3501 §7.2-§7.4): FLAGS, PERMANENTFLAGS, EXISTS, RECENT, EXPUNGE,
//! and the `FETCH` frame with its flag list. A new item (MODSEQ, VANISHED) is added here
//! once, not at every site that tells a client of a change.

use std::io::Write as _;

use maildex_imap_proto::encode::{self, Status};
use maildex_imap_proto::{Flag, ResponseCode, SeqNum, SeqRange, SequenceSet};
use maildex_store::records::flag;
use maildex_store::{ModSeq, Uid};

/// The system flags, in the order FLAGS and PERMANENTFLAGS list them (Dovecot's).
const SYSTEM: &[u8] = b"\\Answered \\Flagged \\Deleted \\Seen \\Draft";

/// A message's flags as a session shows them: the system flag bits (the index's, which are
/// the Maildir's), keyword names, and whether it is `\Recent` for this session.
pub(crate) struct FlagsOf<K> {
    /// System flag bits ([`maildex_store::records::flag`]).
    pub bits: u8,
    /// Keyword names the message has.
    pub keywords: K,
    /// `\Recent` (RFC 3501 §2.3.2).
    pub recent: bool,
}

/// Flags from system bits, keyword letter bits and the mailbox's keyword table.
pub(crate) fn flags_of(
    bits: u8,
    keyword_bits: u32,
    table: &[String],
    recent: bool,
) -> FlagsOf<impl Iterator<Item = &str>> {
    let keywords = table
        .iter()
        .enumerate()
        .take(32)
        .filter(move |(i, _)| keyword_bits & (1 << i) != 0)
        .map(|(_, k)| k.as_str());
    FlagsOf {
        bits,
        keywords,
        recent,
    }
}

/// Writes a flag list, `(\Seen $Label \Recent)` (RFC 3501 §9 `flag-list`, with `\Recent`
/// as FETCH FLAGS shows it): system flags, keywords, `\Recent`.
pub(crate) fn flag_list<'a>(out: &mut Vec<u8>, f: FlagsOf<impl Iterator<Item = &'a str>>) {
    out.push(b'(');
    let start = out.len();
    let put = |out: &mut Vec<u8>, s: &[u8]| {
        if out.len() > start {
            out.push(b' ');
        }
        out.extend_from_slice(s);
    };
    for (bit, name) in [
        (flag::SEEN, &b"\\Seen"[..]),
        (flag::ANSWERED, b"\\Answered"),
        (flag::FLAGGED, b"\\Flagged"),
        (flag::DELETED, b"\\Deleted"),
        (flag::DRAFT, b"\\Draft"),
    ] {
        if f.bits & bit != 0 {
            put(out, name);
        }
    }
    for k in f.keywords {
        put(out, k.as_bytes());
    }
    if f.recent {
        put(out, b"\\Recent");
    }
    out.push(b')');
}

/// `* FLAGS (...)`: the flags of the mailbox, keywords included (RFC 3501 §7.2.6).
pub(crate) fn flags(out: &mut Vec<u8>, keywords: &[String]) {
    out.extend_from_slice(b"* FLAGS (");
    out.extend_from_slice(SYSTEM);
    for k in keywords {
        out.push(b' ');
        out.extend_from_slice(k.as_bytes());
    }
    out.extend_from_slice(b")\r\n");
}

/// `* OK [PERMANENTFLAGS (...)]` (RFC 3501 §7.1): the flags a client may store, with `\*`
/// (new keywords allowed); `None` for a read-only mailbox, where none can be.
pub(crate) fn permanent_flags(out: &mut Vec<u8>, keywords: Option<&[String]>) {
    let Some(keywords) = keywords else {
        let code = ResponseCode::PermanentFlags {
            flags: Vec::new(),
            allow_new: false,
        };
        encode::status_line(out, None, Status::Ok, Some(&code), "Read-only mailbox.");
        return;
    };
    let mut flags = vec![
        Flag::Answered,
        Flag::Flagged,
        Flag::Deleted,
        Flag::Seen,
        Flag::Draft,
    ];
    flags.extend(keywords.iter().map(|k| Flag::Keyword(k.clone())));
    let code = ResponseCode::PermanentFlags {
        flags,
        allow_new: true,
    };
    encode::status_line(out, None, Status::Ok, Some(&code), "Flags permitted.");
}

/// `* OK [code] text`: the other data SELECT sends (UNSEEN, UIDVALIDITY, UIDNEXT;
/// RFC 3501 §6.3.1).
pub(crate) fn ok(out: &mut Vec<u8>, code: ResponseCode, text: &str) {
    encode::status_line(out, None, Status::Ok, Some(&code), text);
}

/// `* n EXISTS` (RFC 3501 §7.3.1).
pub(crate) fn exists(out: &mut Vec<u8>, n: u32) {
    let _ = write!(out, "* {n} EXISTS\r\n");
}

/// `* n RECENT` (RFC 3501 §7.3.2).
pub(crate) fn recent(out: &mut Vec<u8>, n: u32) {
    let _ = write!(out, "* {n} RECENT\r\n");
}

/// `* seq EXPUNGE` (RFC 3501 §7.4.1).
pub(crate) fn expunge(out: &mut Vec<u8>, seq: u32) {
    let _ = write!(out, "* {seq} EXPUNGE\r\n");
}

/// Opens `* seq FETCH (`; the items follow, then [`fetch_end`] (RFC 3501 §7.4.2).
pub(crate) fn fetch_start(out: &mut Vec<u8>, seq: u32) {
    let _ = write!(out, "* {seq} FETCH (");
}

/// Closes a FETCH response.
pub(crate) fn fetch_end(out: &mut Vec<u8>) {
    out.extend_from_slice(b")\r\n");
}

/// `* seq FETCH ([UID uid ]FLAGS (...)[ MODSEQ (m)])`: a flag change told to a client;
/// MODSEQ once CONDSTORE is enabled (RFC 7162 §3.1.4, §3.1.3).
pub(crate) fn fetch_flags<'a>(
    out: &mut Vec<u8>,
    seq: u32,
    uid: Option<Uid>,
    f: FlagsOf<impl Iterator<Item = &'a str>>,
    modseq: Option<ModSeq>,
) {
    fetch_start(out, seq);
    if let Some(uid) = uid {
        let _ = write!(out, "UID {uid} ");
    }
    out.extend_from_slice(b"FLAGS ");
    flag_list(out, f);
    if let Some(m) = modseq {
        let _ = write!(out, " MODSEQ ({m})");
    }
    fetch_end(out);
}

/// `* seq FETCH ([UID uid ]MODSEQ (m))`: a .SILENT STORE's change told to a CONDSTORE
/// client, which must learn the new modseq (RFC 7162 §3.1.3; Dovecot sends it for every
/// changed message once CONDSTORE is enabled).
pub(crate) fn fetch_modseq(out: &mut Vec<u8>, seq: u32, uid: Option<Uid>, modseq: ModSeq) {
    fetch_start(out, seq);
    if let Some(uid) = uid {
        let _ = write!(out, "UID {uid} ");
    }
    let _ = write!(out, "MODSEQ ({modseq})");
    fetch_end(out);
}

/// `* VANISHED [(EARLIER) ]uid-set` (RFC 7162 §3.2.10): expunged UIDs, told instead of
/// EXPUNGE once QRESYNC is enabled (without EARLIER: each one leaves the view now), or
/// what a client that was away missed (EARLIER). Nothing for no UIDs.
pub(crate) fn vanished(out: &mut Vec<u8>, earlier: bool, ranges: &[(Uid, Uid)]) {
    if ranges.is_empty() {
        return;
    }
    out.extend_from_slice(if earlier {
        b"* VANISHED (EARLIER) "
    } else {
        b"* VANISHED "
    });
    for (i, &(a, b)) in ranges.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if a == b {
            let _ = write!(out, "{a}");
        } else {
            let _ = write!(out, "{a}:{b}");
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// `numbers` (UIDs or sequence numbers as the command has them; any order, repeats
/// allowed) as a set of merged ranges, for a response code (APPENDUID, MODIFIED).
pub(crate) fn uid_set(numbers: impl IntoIterator<Item = u32>) -> SequenceSet {
    let mut v: Vec<u32> = numbers.into_iter().collect();
    v.sort_unstable();
    v.dedup();
    SequenceSet::Ranges(
        merged(v)
            .into_iter()
            .map(|(a, b)| SeqRange {
                start: SeqNum::Value(a),
                end: SeqNum::Value(b),
            })
            .collect(),
    )
}

/// Sorted, duplicate-free UIDs as ranges.
pub(crate) fn ranges_of(sorted: &[Uid]) -> Vec<(Uid, Uid)> {
    merged(sorted.iter().map(|u| u.get()))
        .into_iter()
        .map(|(a, b)| (Uid(a), Uid(b)))
        .collect()
}

/// Sorted, duplicate-free numbers as ranges.
fn merged(sorted: impl IntoIterator<Item = u32>) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for u in sorted {
        match out.last_mut() {
            Some(l) if l.1.checked_add(1) == Some(u) => l.1 = u,
            _ => out.push((u, u)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_lists_and_lines() {
        let table = vec!["$Label1".to_string(), "Work".into(), "Junk".into()];
        let mut out = Vec::new();
        let f = flags_of(flag::SEEN | flag::DRAFT, 0b101, &table, true);
        fetch_flags(&mut out, 3, Some(Uid(9)), f, Some(ModSeq(12)));
        assert_eq!(
            out,
            b"* 3 FETCH (UID 9 FLAGS (\\Seen \\Draft $Label1 Junk \\Recent) MODSEQ (12))\r\n"
        );
        out.clear();
        vanished(
            &mut out,
            true,
            &ranges_of(&[Uid(3), Uid(4), Uid(5), Uid(9)]),
        );
        vanished(&mut out, false, &[(Uid(7), Uid(7))]);
        vanished(&mut out, false, &[]);
        assert_eq!(out, b"* VANISHED (EARLIER) 3:5,9\r\n* VANISHED 7\r\n");
        out.clear();
        flag_list(&mut out, flags_of(0, 0, &table, false));
        assert_eq!(out, b"()");
        out.clear();
        flags(&mut out, &table[..1]);
        permanent_flags(&mut out, Some(&table[..1]));
        permanent_flags(&mut out, None);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Label1)\r\n\
             * OK [PERMANENTFLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Label1 \\*)] Flags permitted.\r\n\
             * OK [PERMANENTFLAGS ()] Read-only mailbox.\r\n"
        );
    }
}
