//! Response encoding helpers (RFC 3501 §4, §7, §9). Every function appends
//! to `out`; none writes a line end unless it says so.

use crate::code::ResponseCode;
use crate::sequence::SequenceSet;
use crate::types::{is_astring_char, DateTime, Flag, Mailbox, Tag};

/// Status of a status response (RFC 3501 §7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// `OK`
    Ok,
    /// `NO`
    No,
    /// `BAD`
    Bad,
    /// `BYE` (untagged only)
    Bye,
    /// `PREAUTH` (untagged greeting only)
    Preauth,
}

impl Status {
    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::No => "NO",
            Status::Bad => "BAD",
            Status::Bye => "BYE",
            Status::Preauth => "PREAUTH",
        }
    }
}

/// Writes `tag STATUS [code] text\r\n`, or `* STATUS ...` without a tag
/// (RFC 3501 §7.1). CR, LF and NUL in `text` become spaces so a response
/// can never be split (RFC 3501 §9 `text = 1*TEXT-CHAR`); an empty text
/// becomes the status word, since `text` must not be empty.
pub fn status_line(
    out: &mut Vec<u8>,
    tag: Option<&Tag>,
    status: Status,
    code: Option<&ResponseCode>,
    text: &str,
) {
    match tag {
        Some(t) => out.extend_from_slice(t.as_str().as_bytes()),
        None => out.push(b'*'),
    }
    out.push(b' ');
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    if let Some(code) = code {
        out.push(b'[');
        response_code(out, code);
        out.extend_from_slice(b"] ");
    }
    text_chars(
        out,
        if text.is_empty() {
            status.as_str()
        } else {
            text
        },
    );
    out.extend_from_slice(b"\r\n");
}

/// Writes a command continuation request `+ text\r\n` (RFC 3501 §7.5: `"+" SP
/// (resp-text / base64) CRLF`). An empty `text` writes `+ \r\n`, the empty base64
/// challenge of AUTHENTICATE (RFC 3501 §6.2.2, RFC 4959 §3); callers that want a
/// resp-text pass one (`"OK"` for literals).
pub fn continuation(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(b"+ ");
    text_chars(out, text);
    out.extend_from_slice(b"\r\n");
}

fn text_chars(out: &mut Vec<u8>, text: &str) {
    out.extend(text.bytes().map(|b| {
        if matches!(b, b'\r' | b'\n' | 0) {
            b' '
        } else {
            b
        }
    }));
}

/// Writes a response code without brackets (RFC 3501 §7.1, RFC 5530 §3,
/// RFC 4315 §3, RFC 7162 §3.1.2, §3.2.11).
pub fn response_code(out: &mut Vec<u8>, code: &ResponseCode) {
    use ResponseCode as C;
    let word = |out: &mut Vec<u8>, w: &str| out.extend_from_slice(w.as_bytes());
    match code {
        C::Alert => word(out, "ALERT"),
        C::BadCharset(cs) => {
            word(out, "BADCHARSET");
            if !cs.is_empty() {
                out.extend_from_slice(b" (");
                for (i, c) in cs.iter().enumerate() {
                    if i > 0 {
                        out.push(b' ');
                    }
                    astring(out, c.as_bytes());
                }
                out.push(b')');
            }
        }
        C::Capability(caps) => {
            word(out, "CAPABILITY");
            for c in caps {
                out.push(b' ');
                word(out, c);
            }
        }
        C::Parse => word(out, "PARSE"),
        C::PermanentFlags { flags, allow_new } => {
            word(out, "PERMANENTFLAGS ");
            out.push(b'(');
            for (i, f) in flags.iter().enumerate() {
                if i > 0 {
                    out.push(b' ');
                }
                word(out, f.as_str());
            }
            if *allow_new {
                if !flags.is_empty() {
                    out.push(b' ');
                }
                word(out, "\\*");
            }
            out.push(b')');
        }
        C::ReadOnly => word(out, "READ-ONLY"),
        C::ReadWrite => word(out, "READ-WRITE"),
        C::TryCreate => word(out, "TRYCREATE"),
        C::UidNext(n) => word(out, &format!("UIDNEXT {n}")),
        C::UidValidity(n) => word(out, &format!("UIDVALIDITY {n}")),
        C::Unseen(n) => word(out, &format!("UNSEEN {n}")),
        C::AppendUid { uidvalidity, uids } => {
            word(out, &format!("APPENDUID {uidvalidity} {uids}"));
        }
        C::CopyUid {
            uidvalidity,
            source,
            dest,
        } => word(out, &format!("COPYUID {uidvalidity} {source} {dest}")),
        C::UidNotSticky => word(out, "UIDNOTSTICKY"),
        C::HighestModSeq(n) => word(out, &format!("HIGHESTMODSEQ {n}")),
        C::NoModSeq => word(out, "NOMODSEQ"),
        C::Modified(set) => word(out, &format!("MODIFIED {set}")),
        C::Closed => word(out, "CLOSED"),
        C::Unavailable => word(out, "UNAVAILABLE"),
        C::AuthenticationFailed => word(out, "AUTHENTICATIONFAILED"),
        C::AuthorizationFailed => word(out, "AUTHORIZATIONFAILED"),
        C::Expired => word(out, "EXPIRED"),
        C::PrivacyRequired => word(out, "PRIVACYREQUIRED"),
        C::ContactAdmin => word(out, "CONTACTADMIN"),
        C::NoPerm => word(out, "NOPERM"),
        C::InUse => word(out, "INUSE"),
        C::ExpungeIssued => word(out, "EXPUNGEISSUED"),
        C::Corruption => word(out, "CORRUPTION"),
        C::ServerBug => word(out, "SERVERBUG"),
        C::ClientBug => word(out, "CLIENTBUG"),
        C::Cannot => word(out, "CANNOT"),
        C::Limit => word(out, "LIMIT"),
        C::OverQuota => word(out, "OVERQUOTA"),
        C::AlreadyExists => word(out, "ALREADYEXISTS"),
        C::NonExistent => word(out, "NONEXISTENT"),
        C::TooBig => word(out, "TOOBIG"),
        C::UseAttr => word(out, "USEATTR"),
        C::UnknownCte => word(out, "UNKNOWN-CTE"),
    }
}

/// True when `s` may be sent as a quoted string (RFC 3501 §9 `quoted`:
/// 7-bit TEXT-CHARs only; `"` and `\` are escaped). Longer strings are sent
/// as literals too, which keeps lines short.
fn quotable(s: &[u8]) -> bool {
    s.len() <= 1024
        && s.iter()
            .all(|&b| (0x01..=0x7f).contains(&b) && b != b'\r' && b != b'\n')
}

/// Writes `s` as a quoted string when it is safe, else as a literal
/// (RFC 3501 §4.3, §9 `string`).
pub fn string(out: &mut Vec<u8>, s: &[u8]) {
    if quotable(s) {
        out.push(b'"');
        for &b in s {
            if b == b'"' || b == b'\\' {
                out.push(b'\\');
            }
            out.push(b);
        }
        out.push(b'"');
    } else {
        literal(out, s);
    }
}

/// Writes `s` as an atom when every octet is an ASTRING-CHAR (and it is not
/// `NIL`, which a client would read as nil), else as a string
/// (RFC 3501 §9 `astring`).
pub fn astring(out: &mut Vec<u8>, s: &[u8]) {
    if !s.is_empty() && s.iter().all(|&b| is_astring_char(b)) && !s.eq_ignore_ascii_case(b"NIL") {
        out.extend_from_slice(s);
    } else {
        string(out, s);
    }
}

/// Writes `NIL` for `None`, else a string (RFC 3501 §9 `nstring`).
pub fn nstring(out: &mut Vec<u8>, s: Option<&[u8]>) {
    match s {
        Some(s) => string(out, s),
        None => out.extend_from_slice(b"NIL"),
    }
}

/// Writes `{n}\r\n` followed by `s` (RFC 3501 §4.3 `literal`).
pub fn literal(out: &mut Vec<u8>, s: &[u8]) {
    literal_header(out, s.len() as u64, false);
    out.extend_from_slice(s);
}

/// Writes `~{n}\r\n` followed by `s` (RFC 3516 §4.3 `literal8`, for
/// BINARY[] data that may hold NUL).
pub fn literal8(out: &mut Vec<u8>, s: &[u8]) {
    literal_header(out, s.len() as u64, true);
    out.extend_from_slice(s);
}

/// Writes only the literal announcement `{n}\r\n` (or `~{n}\r\n`), for data
/// the server streams itself (FETCH BODY[] from a file).
pub fn literal_header(out: &mut Vec<u8>, len: u64, binary: bool) {
    if binary {
        out.push(b'~');
    }
    out.extend_from_slice(format!("{{{len}}}\r\n").as_bytes());
}

/// Writes a mailbox name as an astring (RFC 3501 §9 `mailbox`).
pub fn mailbox(out: &mut Vec<u8>, m: &Mailbox) {
    astring(out, m.as_bytes());
}

/// Writes `(flag flag ...)` (RFC 3501 §9 `flag-list`); `recent` adds
/// `\Recent` (RFC 3501 §2.3.2) for FETCH FLAGS answers.
pub fn flag_list(out: &mut Vec<u8>, flags: &[Flag], recent: bool) {
    out.push(b'(');
    let mut first = true;
    for f in flags {
        if !first {
            out.push(b' ');
        }
        first = false;
        out.extend_from_slice(f.as_str().as_bytes());
    }
    if recent {
        if !first {
            out.push(b' ');
        }
        out.extend_from_slice(b"\\Recent");
    }
    out.push(b')');
}

/// Writes a sequence set as parsed (RFC 3501 §9 `sequence-set`).
pub fn sequence_set(out: &mut Vec<u8>, set: &SequenceSet) {
    out.extend_from_slice(set.to_string().as_bytes());
}

/// Writes numbers as a compact set: sorted, duplicates dropped, runs
/// joined (`1:5,7`; RFC 3501 §9 `sequence-set`, RFC 4315 `uid-set`).
/// Writes nothing for no numbers; callers must not send an empty set.
pub fn compact_set(out: &mut Vec<u8>, numbers: impl IntoIterator<Item = u32>) {
    let mut v: Vec<u32> = numbers.into_iter().collect();
    v.sort_unstable();
    v.dedup();
    compact_sorted(out, &v);
}

/// Like [`compact_set`] for a sorted, duplicate-free slice, keeping order
/// semantics of COPYUID (RFC 4315 §3: source and destination sets must
/// list UIDs in corresponding order, so runs are joined only ascending).
pub fn compact_sorted(out: &mut Vec<u8>, numbers: &[u32]) {
    let mut i = 0;
    let mut first = true;
    while i < numbers.len() {
        let start = numbers[i];
        let mut end = start;
        while i + 1 < numbers.len() && numbers[i + 1] == end.wrapping_add(1) && end != u32::MAX {
            i += 1;
            end = numbers[i];
        }
        if !first {
            out.push(b',');
        }
        first = false;
        if start == end {
            out.extend_from_slice(start.to_string().as_bytes());
        } else {
            out.extend_from_slice(format!("{start}:{end}").as_bytes());
        }
        i += 1;
    }
}

/// Writes a quoted date-time `"17-Jul-1996 02:44:25 -0700"` (RFC 3501 §9
/// `date-time`, used by INTERNALDATE).
pub fn date_time(out: &mut Vec<u8>, dt: &DateTime) {
    out.push(b'"');
    out.extend_from_slice(dt.to_string().as_bytes());
    out.push(b'"');
}
