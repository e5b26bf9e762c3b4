//! Maildir message file names: `<base>[:2,<flags>]`.
//!
//! The base is everything before the first `:` (Dovecot's `maildir_filename_base_cmp`
//! stops there too); Dovecot keeps `,S=<size>` and `,W=<vsize>` inside the base, e.g.
//! `1700000000.M1P2Q3.host,S=1234,W=1260:2,FS`. The info is `2,` followed by flag
//! letters; Dovecot keeps anything after a further `,` in the info untouched, and so
//! do we.

use std::cmp::Ordering;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::flags::{Flags, Keywords};
use crate::util::escaped_hostname;
use crate::MaildirError;

/// A parsed Maildir message file name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MaildirName {
    /// Everything before the first `:` — the message's identity across flag changes.
    pub base: String,
    /// The `,S=<size>` field of the base (physical file size), if present and valid.
    pub size: Option<u64>,
    /// The `,W=<vsize>` field of the base (size with CRLF line ends), if present and valid.
    pub vsize: Option<u64>,
    /// System flags from the info.
    pub flags: Flags,
    /// Keyword letters `a`..`z` from the info.
    pub keywords: Keywords,
    /// Info characters we do not interpret, kept in their original order: unknown
    /// flag letters, and verbatim everything from a `,` after the flags on.
    pub unknown_flags: String,
    /// The name had a `:2,` info (files in `cur/` do; new files in `new/` do not).
    pub has_info: bool,
}

impl MaildirName {
    /// Parses a file name (no directory part).
    ///
    /// Rejects names that cannot be Maildir messages: empty, starting with `.`
    /// (temporary and hidden files), containing `/`, NUL, CR or LF (Dovecot ignores
    /// files with CR/LF because they would break `dovecot-uidlist` lines), an empty
    /// base, an info that is not `2,` (the experimental `:1,` semantics), or a second
    /// `:` inside the flags (Dovecot would read the flags after the last `:`).
    pub fn parse(file_name: &str) -> Result<MaildirName, MaildirError> {
        let bad = |reason| MaildirError::BadFileName {
            name: file_name.to_string(),
            reason,
        };
        if file_name.is_empty() {
            return Err(bad("empty name"));
        }
        if file_name.starts_with('.') {
            return Err(bad("starts with '.'"));
        }
        if file_name.contains('/') {
            return Err(bad("contains '/'"));
        }
        if file_name
            .bytes()
            .any(|b| matches!(b, b'\0' | b'\n' | b'\r'))
        {
            return Err(bad("contains NUL, CR or LF"));
        }
        let (base, info) = match file_name.split_once(':') {
            Some((b, i)) => (b, Some(i)),
            None => (file_name, None),
        };
        if base.is_empty() {
            return Err(bad("empty base before ':'"));
        }
        let mut name = MaildirName {
            base: base.to_string(),
            size: size_field(base, b'S'),
            vsize: size_field(base, b'W'),
            has_info: info.is_some(),
            ..MaildirName::default()
        };
        if let Some(info) = info {
            let letters = info
                .strip_prefix("2,")
                .ok_or_else(|| bad("info after ':' does not start with \"2,\""))?;
            if letters.contains(':') {
                return Err(bad("more than one ':'"));
            }
            // Dovecot (maildir-filename-flags.c): flags run up to the next ','; what
            // follows is another flag set it does not know and keeps as is.
            let (set, tail) = match letters.find(',') {
                Some(i) => (&letters[..i], &letters[i..]),
                None => (letters, ""),
            };
            for c in set.chars() {
                let b = u8::try_from(c).unwrap_or(0);
                if let Some(f) = Flags::from_letter(b) {
                    name.flags.insert(f);
                } else if let Some(i) = Keywords::index_of_letter(b) {
                    name.keywords.insert(i);
                } else {
                    name.unknown_flags.push(c);
                }
            }
            name.unknown_flags.push_str(tail);
        }
        Ok(name)
    }

    /// The file name: base, then `:2,` and the flag letters in ASCII order (as
    /// Dovecot writes them, unknown letters kept in place) when there is an info or
    /// any flag.
    pub fn file_name(&self) -> String {
        let mut s = self.base.clone();
        let any =
            !self.flags.is_empty() || !self.keywords.is_empty() || !self.unknown_flags.is_empty();
        if !(self.has_info || any) {
            return s;
        }
        s.push_str(":2,");
        // Uppercase flag letters sort before lowercase keyword letters.
        let known: Vec<char> = self
            .flags
            .letters()
            .chars()
            .chain(self.keywords.letters().chars())
            .collect();
        let (unknown, tail) = match self.unknown_flags.find(',') {
            Some(i) => (&self.unknown_flags[..i], &self.unknown_flags[i..]),
            None => (self.unknown_flags.as_str(), ""),
        };
        // Dovecot inserts each known flag before the first kept letter that sorts
        // after it ("flags must be sorted by their ASCII code. unknown flags are kept").
        let mut k = known.iter().peekable();
        for c in unknown.chars() {
            while let Some(&&kc) = k.peek() {
                if kc < c {
                    s.push(kc);
                    k.next();
                } else {
                    break;
                }
            }
            s.push(c);
        }
        s.extend(k);
        s.push_str(tail);
        s
    }

    /// The same message with other flags and keywords (and an info, so it belongs in
    /// `cur/`). Unknown letters are kept.
    pub fn with_flags(&self, flags: Flags, keywords: Keywords) -> MaildirName {
        MaildirName {
            flags,
            keywords,
            has_info: true,
            ..self.clone()
        }
    }
}

/// The base of a file name: everything before the first `:`.
pub fn base_of(file_name: &str) -> &str {
    file_name.split_once(':').map_or(file_name, |(b, _)| b)
}

/// Reads a `,<key>=<digits>` field from a base (Dovecot's `maildir_filename_get_size`):
/// the digits must end the base or be followed by `,`.
fn size_field(base: &str, key: u8) -> Option<u64> {
    let bytes = base.as_bytes();
    // a sync parses every name of a folder: look at the commas only
    let start = memchr::memchr_iter(b',', bytes)
        .find(|&i| bytes.get(i + 1) == Some(&key) && bytes.get(i + 2) == Some(&b'='))?
        + 3;
    let rest = &bytes[start..];
    let end = rest
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(rest.len());
    if end == 0 || (end < rest.len() && rest[end] != b',') {
        return None;
    }
    // digits only: what u64's parse accepts, None on overflow as it gives
    rest[..end].iter().try_fold(0u64, |acc, d| {
        acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// Orders file names the way Dovecot orders new messages before giving them UIDs
/// (`maildir_filename_sort_cmp`): by the leading seconds, then by the microseconds of
/// an `M<usecs>` part, then by base.
pub fn sort_cmp(a: &str, b: &str) -> Ordering {
    fn secs(s: &str) -> (u64, &str) {
        let end = s
            .bytes()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(s.len());
        let v = s[..end].bytes().fold(0u64, |acc, d| {
            acc.saturating_mul(10).saturating_add(u64::from(d - b'0'))
        });
        (v, &s[end..])
    }
    fn usecs(rest: &str) -> Option<u64> {
        let rest = rest.strip_prefix('.')?;
        let uniq = rest.split(['.', ':']).next()?;
        let m = uniq.find('M')?;
        let digits = &uniq[m + 1..];
        let end = digits
            .bytes()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(digits.len());
        digits[..end].parse().ok().or(Some(0))
    }
    let (sa, ra) = secs(a);
    let (sb, rb) = secs(b);
    sa.cmp(&sb)
        .then_with(|| match (usecs(ra), usecs(rb)) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => Ordering::Equal,
        })
        .then_with(|| base_of(a).cmp(base_of(b)))
}

/// A new unique name without size fields: `<secs>.M<usecs>P<pid>Q<counter>.<host>`
/// (the Maildir convention; Q is a process-wide counter so names made in the same
/// microsecond still differ).
pub fn unique_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, AtomicOrdering::Relaxed) + 1;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{}.M{}P{}Q{}.{}",
        now.as_secs(),
        now.subsec_micros(),
        std::process::id(),
        n,
        escaped_hostname()
    )
}

/// A Dovecot-style unique base with sizes:
/// `<secs>.M<usecs>P<pid>Q<counter>.<hostname>,S=<size>,W=<vsize>`.
pub fn unique_base(size: u64, vsize: u64) -> String {
    with_sizes(&unique_id(), size, vsize)
}

pub(crate) fn with_sizes(id: &str, size: u64, vsize: u64) -> String {
    format!("{id},S={size},W={vsize}")
}

#[cfg(test)]
#[path = "filename_tests.rs"]
mod tests;
