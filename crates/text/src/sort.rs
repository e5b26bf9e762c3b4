//! Sort and thread keys (RFC 5256, RFC 5957), computed once when a message is indexed and
//! compared as stored: the sent date, the base subject, the first address of From/To/Cc
//! and the display names, Message-ID and References. Every rule follows Dovecot 2.3, whose
//! answers `tests/it/imap/dovecot_sort.rs` compares ours with.

use maildex_index::SortKeys;
use maildex_mime::{Address, Envelope};

use crate::casemap::casemap;
use crate::header::{decode_header, fields_values};

/// The keys of a message from its root header block and the ENVELOPE its summary read.
pub fn sort_keys(root_header: &[u8], envelope: &Envelope) -> SortKeys {
    const NAMES: [&[u8]; 5] = [
        b"subject",
        b"references",
        b"in-reply-to",
        b"date",
        b"message-id",
    ];
    // one walk of the block for every field; the first value of each
    let firsts: Vec<Option<Vec<u8>>> = fields_values(root_header, &NAMES)
        .into_iter()
        .map(|values| values.into_iter().next())
        .collect();
    let [subject, references, in_reply_to, date, message_id]: [Option<Vec<u8>>; 5] =
        firsts.try_into().unwrap_or_default();
    let (subject, reply_or_forward) = subject.map(|s| base_subject(&s)).unwrap_or_default();
    let references = {
        let refs = references.map(|r| message_ids(&r)).unwrap_or_default();
        if refs.is_empty() {
            // RFC 5256 §4 (1)(A): In-Reply-To's first msg-id when there is no References
            in_reply_to
                .and_then(|r| message_ids(&r).into_iter().next())
                .into_iter()
                .collect()
        } else {
            refs
        }
    };
    SortKeys {
        sent_date: date.and_then(|d| sent_date(&d)),
        subject,
        reply_or_forward,
        from: casemap(&addr_mailbox(&envelope.from)),
        to: casemap(&addr_mailbox(&envelope.to)),
        cc: casemap(&addr_mailbox(&envelope.cc)),
        display_from: casemap(&display_name(&envelope.from)),
        display_to: casemap(&display_name(&envelope.to)),
        message_id: message_id.and_then(|m| message_ids(&m).into_iter().next()),
        references,
    }
}

/// The first real address of a list (group markers skipped).
fn first_address(list: &[Address]) -> Option<&Address> {
    list.iter()
        .find(|a| !a.is_group_start() && !a.is_group_end())
}

/// RFC 5256 §3 FROM/TO/CC: the addr-mailbox (local part) of the first address.
fn addr_mailbox(list: &[Address]) -> String {
    first_address(list)
        .and_then(|a| a.mailbox.as_deref())
        .map(|m| String::from_utf8_lossy(m).into_owned())
        .unwrap_or_default()
}

/// RFC 5957 §3.1: the display name of the first address, RFC 2047 decoded, or its
/// addr-spec when it has none (or an empty one).
fn display_name(list: &[Address]) -> String {
    let Some(a) = first_address(list) else {
        return String::new();
    };
    if let Some(name) = a.name.as_deref() {
        let decoded = decode_header(name);
        if !decoded.is_empty() {
            return decoded;
        }
    }
    match (a.mailbox.as_deref(), a.host.as_deref()) {
        (Some(m), Some(h)) => format!(
            "{}@{}",
            String::from_utf8_lossy(m),
            String::from_utf8_lossy(h)
        ),
        (Some(m), None) => String::from_utf8_lossy(m).into_owned(),
        _ => String::new(),
    }
}

/// RFC 5256 §2.1 base subject of a raw Subject value, and whether a reply or forward
/// marker was removed on the way (`Re:`, `Fwd:`, `(fwd)`, `[fwd: ...]`).
pub fn base_subject(raw: &[u8]) -> (String, bool) {
    // (1) RFC 2047 decoding, casemap, tabs and line breaks to spaces, runs of spaces as one
    let decoded = casemap(&decode_header(raw));
    let mut s = String::with_capacity(decoded.len());
    let mut last_space = false;
    for c in decoded.chars() {
        if matches!(c, ' ' | '\t' | '\r' | '\n') {
            if !last_space {
                s.push(' ');
            }
            last_space = true;
        } else {
            s.push(c);
            last_space = false;
        }
    }
    let mut marked = false;
    let mut start = 0usize;
    let mut end = s.len();
    loop {
        // (2) subj-trailer = "(fwd)" / WSP, repeatedly
        while end > start {
            if s[..end].ends_with(' ') {
                end -= 1;
            } else if end - start >= 5 && s[..end].ends_with("(FWD)") {
                marked = true;
                end -= 5;
            } else {
                break;
            }
        }
        // (3)-(5): subj-leader and a leading subj-blob that leaves something, repeatedly
        loop {
            let mut found = false;
            if let Some(n) = subj_leader(&s[start..end], &mut marked) {
                start += n;
                found = true;
            }
            if let Some(n) = blob(&s[start..end]) {
                if start + n < end {
                    start += n;
                    found = true;
                }
            }
            if !found {
                break;
            }
        }
        // (6) "[fwd:" subject "]": unwrap and repeat from (2)
        if s[start..end].starts_with("[FWD:") && s[..end].ends_with(']') && end - start >= 6 {
            marked = true;
            start += 5;
            end -= 1;
            continue;
        }
        break;
    }
    (s[start..end].to_owned(), marked)
}

/// A subj-blob at the start: `[` BLOBCHARs `]` and one following space; its length.
fn blob(s: &str) -> Option<usize> {
    let rest = s.strip_prefix('[')?;
    let close = rest.find(['[', ']'])?;
    if !rest[close..].starts_with(']') {
        return None;
    }
    let mut n = 1 + close + 1;
    if s[n..].starts_with(' ') {
        n += 1;
    }
    Some(n)
}

/// subj-leader = (*subj-blob subj-refwd) / WSP, where subj-refwd = ("re" / ("fw" ["d"]))
/// *WSP [subj-blob] ":"; its length (as Dovecot, a leading space goes even when the rest
/// is no leader).
fn subj_leader(s: &str, marked: &mut bool) -> Option<usize> {
    let space = usize::from(s.starts_with(' '));
    let mut at = space;
    while s[at..].starts_with('[') {
        match blob(&s[at..]) {
            Some(n) => at += n,
            None => return (space > 0).then_some(space),
        }
    }
    let word = ["RE", "FWD", "FW"]
        .iter()
        .find(|w| s[at..].starts_with(**w));
    let Some(word) = word else {
        return (space > 0).then_some(space);
    };
    at += word.len();
    if s[at..].starts_with(' ') {
        at += 1;
    }
    if s[at..].starts_with('[') {
        match blob(&s[at..]) {
            Some(n) => at += n,
            None => return (space > 0).then_some(space),
        }
    }
    if !s[at..].starts_with(':') {
        return (space > 0).then_some(space);
    }
    *marked = true;
    Some(at + 1)
}

/// The msg-ids of a Message-ID, References or In-Reply-To value, without their angle
/// brackets, in order: each `<...>` holding an `@` (Dovecot's `message_id_get_next`
/// skips the others).
pub fn message_ids(raw: &[u8]) -> Vec<String> {
    let v = maildex_mime::unfold(raw);
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(open) = memchr::memchr(b'<', &v[i..]) {
        let from = i + open + 1;
        let Some(close) = memchr::memchr(b'>', &v[from..]) else {
            break;
        };
        let id = &v[from..from + close];
        i = from + close + 1;
        if id.contains(&b'@') && !id.contains(&b'<') {
            let id: Vec<u8> = id.iter().copied().filter(|b| !b" \t".contains(b)).collect();
            out.push(String::from_utf8_lossy(&id).into_owned());
        }
    }
    out
}

/// RFC 5256 §3 DATE: the sent date of a Date: value in seconds since the epoch (UTC), as
/// Dovecot's `message_date_parse` reads it: `[day ","] dd month [yy]yy hh:mm[:ss] [zone]`,
/// `.` also accepted between the time's fields, a two-digit year 70-99 as 19xx and
/// otherwise 20xx, an unknown zone as +0000. `None` when it cannot be read, and for the
/// epoch itself (Dovecot takes 0 as "no date").
pub fn sent_date(raw: &[u8]) -> Option<i64> {
    let v = strip_comments(&maildex_mime::unfold(raw));
    let mut toks = Tokens { v: &v, at: 0 };
    let mut t = toks.atom()?;
    if t.len() == 3 && !t.iter().all(u8::is_ascii_digit) {
        if !toks.eat(b",") {
            return None;
        }
        t = toks.atom()?;
    }
    if t.is_empty() || t.len() > 2 || !t.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let day = digits(t)?;
    let m = toks.atom()?;
    if m.len() < 3 {
        return None;
    }
    const MONTHS: [&[u8]; 12] = [
        b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov",
        b"dec",
    ];
    let month = MONTHS
        .iter()
        .position(|n| n.eq_ignore_ascii_case(&m[..3]))? as i64
        + 1;
    let y = toks.atom()?;
    if (y.len() != 2 && y.len() != 4) || !y.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut year = digits(y)?;
    if y.len() == 2 {
        year += if year < 70 { 2000 } else { 1900 };
    } else if year < 1900 {
        return None;
    }
    let h = toks.atom()?;
    if h.is_empty() || h.len() > 2 || !h.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let hour = digits(h)?;
    if !(toks.eat(b":") || toks.eat(b".")) {
        return None;
    }
    let mi = toks.atom()?;
    if mi.len() != 2 || !mi.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let min = digits(mi)?;
    let mut sec = 0;
    if toks.eat(b":") || toks.eat(b".") {
        let s = toks.atom()?;
        if s.len() != 2 || !s.iter().all(u8::is_ascii_digit) {
            return None;
        }
        sec = digits(s)?;
    }
    let zone = toks.atom().map_or(0, zone_minutes);
    // Dovecot's utc_mktime: fields out of range are refused (no normalising)
    if !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    if day > days_in_month(year, month) {
        return None;
    }
    let t = days_from_civil(year, month, day) * 86_400 + hour * 3600 + min * 60 + sec.min(59)
        - zone * 60;
    (t != 0).then_some(t)
}

fn digits(t: &[u8]) -> Option<i64> {
    std::str::from_utf8(t).ok()?.parse().ok()
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A zone as Dovecot reads it: `+hhmm`/`-hhmm`, military letters, UT/GMT, the US zones;
/// anything else is +0000.
fn zone_minutes(z: &[u8]) -> i64 {
    if z.len() == 5 && (z[0] == b'+' || z[0] == b'-') && z[1..].iter().all(u8::is_ascii_digit) {
        let n = |i: usize| i64::from(z[i] - b'0');
        let off = (n(1) * 10 + n(2)) * 60 + n(3) * 10 + n(4);
        return if z[0] == b'+' { off } else { -off };
    }
    if z.len() == 1 {
        // Dovecot reads military zones from the letter as written (upper case expected)
        let c = z[0].to_ascii_uppercase();
        let raw = i64::from(z[0]);
        return match c {
            b'A'..=b'I' => (raw - i64::from(b'A') + 1) * 60,
            b'J' => 0,
            b'K'..=b'M' => (raw - i64::from(b'A')) * 60,
            b'N'..=b'Y' => (i64::from(b'M') - raw) * 60,
            _ => 0,
        };
    }
    if z.len() == 3 && z[2] == b'T' {
        let base = match z[0].to_ascii_uppercase() {
            b'E' => -5 * 60,
            b'C' => -6 * 60,
            b'M' => -7 * 60,
            b'P' => -8 * 60,
            _ => return 0,
        };
        return match z[1].to_ascii_uppercase() {
            b'D' => base + 60,
            b'S' => base,
            _ => 0,
        };
    }
    0
}

/// Drops comments (nested, with quoted pairs).
fn strip_comments(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    let mut depth = 0u32;
    let mut i = 0;
    while i < v.len() {
        match v[i] {
            b'\\' if depth > 0 => i += 1,
            b'(' => depth += 1,
            b')' if depth > 0 => {
                depth -= 1;
                out.push(b' ');
            }
            _ if depth > 0 => {}
            b => out.push(b),
        }
        i += 1;
    }
    out
}

/// RFC 5322 atoms of a date, white space skipped between them.
struct Tokens<'a> {
    v: &'a [u8],
    at: usize,
}

impl<'a> Tokens<'a> {
    fn skip_ws(&mut self) {
        while self.at < self.v.len() && self.v[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    /// The next atom (atext run); `None` at the end or when a special comes first.
    fn atom(&mut self) -> Option<&'a [u8]> {
        self.skip_ws();
        let start = self.at;
        while self.at < self.v.len() && is_atext(self.v[self.at]) {
            self.at += 1;
        }
        let t = &self.v[start..self.at];
        self.skip_ws();
        (!t.is_empty()).then_some(t)
    }

    /// Takes `s` when it comes next.
    fn eat(&mut self, s: &[u8]) -> bool {
        if self.v[self.at..].starts_with(s) {
            self.at += s.len();
            self.skip_ws();
            true
        } else {
            false
        }
    }
}

/// RFC 5322 §3.2.3 atext (8-bit bytes too, as Dovecot's parser takes them).
fn is_atext(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-/=?^_`{|}~".contains(&b) || b >= 0x80
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_subject_as_rfc_5256_section_2_1() {
        let b = |s: &str| base_subject(s.as_bytes());
        assert_eq!(b("Re: hello"), ("HELLO".into(), true));
        assert_eq!(b("re: RE: Fwd: [list] hello (fwd)"), ("HELLO".into(), true));
        assert_eq!(b("[fwd: hi there]"), ("HI THERE".into(), true));
        assert_eq!(b("[list] hello"), ("HELLO".into(), false));
        assert_eq!(b("[list]"), ("[LIST]".into(), false));
        assert_eq!(b("  a \t  b  "), ("A B".into(), false));
        assert_eq!(b("Re [x]: y"), ("Y".into(), true));
        assert_eq!(b("Rex: y"), ("REX: Y".into(), false));
        assert_eq!(
            b("=?iso-8859-1?q?=E9t=E9?="),
            ("E\u{301}TE\u{301}".into(), false)
        );
        assert_eq!(
            b("=?utf-8?b?UmU6IMOpdMOp?="),
            ("E\u{301}TE\u{301}".into(), true)
        );
        assert_eq!(b(""), (String::new(), false));
    }

    #[test]
    fn sent_dates_as_dovecot_reads_them() {
        assert_eq!(sent_date(b"Thu, 01 Jan 1970 00:00:01 +0000"), Some(1));
        assert_eq!(sent_date(b"Thu, 01 Jan 1970 00:00:00 +0000"), None);
        assert_eq!(
            sent_date(b"Fri, 21 Nov 1997 09:55:06 -0600"),
            Some(880_127_706)
        );
        assert_eq!(sent_date(b"21 Nov 97 09.55 -0600"), Some(880_127_700));
        assert_eq!(sent_date(b"1 Jan 05 00:00 XYZ"), Some(1_104_537_600));
        assert_eq!(sent_date(b"1 Jan 2005 00:00 EST"), Some(1_104_555_600));
        assert_eq!(sent_date(b"Thursday, 1 Jan 2005 00:00"), None);
        assert_eq!(sent_date(b"yesterday"), None);
        assert_eq!(sent_date(b"31 Feb 2005 00:00"), None);
        assert_eq!(sent_date(b"1 Jan 2005"), None);
    }

    #[test]
    fn message_ids_skip_what_is_no_msg_id() {
        assert_eq!(
            message_ids(b"<a@b> junk <nope> <c@d>\n <e@f"),
            vec!["a@b".to_owned(), "c@d".to_owned()]
        );
    }
}
