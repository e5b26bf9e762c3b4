//! Basic value types of the grammar: tags, mailbox names, flags, dates.

use std::fmt;

/// A command tag (RFC 3501 §9: `tag = 1*<any ASTRING-CHAR except "+">`).
///
/// Always non-empty ASCII without `+`, space, CTL, `(`, `)`, `{`, `%`, `*`,
/// `"` or `\`; safe to write back verbatim in a tagged response.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tag(pub(crate) String);

impl Tag {
    /// Checks `s` against the tag grammar (RFC 3501 §9).
    pub fn new(s: &str) -> Option<Tag> {
        if !s.is_empty() && s.bytes().all(is_tag_char) {
            Some(Tag(s.to_owned()))
        } else {
            None
        }
    }

    /// The tag text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// RFC 3501 §9 `ATOM-CHAR`: any CHAR except atom-specials
/// (`(` `)` `{` SP CTL `%` `*` `"` `\` `]`).
pub fn is_atom_char(b: u8) -> bool {
    matches!(b, 0x21..=0x7e) && !matches!(b, b'(' | b')' | b'{' | b'%' | b'*' | b'"' | b'\\' | b']')
}

/// RFC 3501 §9 `ASTRING-CHAR = ATOM-CHAR / resp-specials` (`]` allowed).
pub fn is_astring_char(b: u8) -> bool {
    is_atom_char(b) || b == b']'
}

/// RFC 3501 §9 tag character: `ASTRING-CHAR` except `+`.
pub fn is_tag_char(b: u8) -> bool {
    is_astring_char(b) && b != b'+'
}

/// RFC 3501 §9 `list-char = ATOM-CHAR / list-wildcards / resp-specials`.
pub fn is_list_char(b: u8) -> bool {
    is_astring_char(b) || b == b'%' || b == b'*'
}

/// A mailbox name as sent by the client (RFC 3501 §5.1, §9 `mailbox`).
///
/// `INBOX` in any case is normalized to `INBOX` (RFC 3501 §5.1: "the case-
/// insensitive name INBOX is a special name reserved to mean the primary
/// mailbox"). Other names are kept as the raw bytes the client sent, which
/// for IMAP4rev1 clients are modified UTF-7 (RFC 3501 §5.1.3); decode them
/// with `maildex_maildir::mutf7`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mailbox(pub(crate) Vec<u8>);

impl Mailbox {
    /// Builds a mailbox name, normalizing any case of `INBOX`.
    pub fn new(raw: impl Into<Vec<u8>>) -> Mailbox {
        let raw = raw.into();
        if raw.eq_ignore_ascii_case(b"INBOX") {
            Mailbox(b"INBOX".to_vec())
        } else {
            Mailbox(raw)
        }
    }

    /// The name's bytes (`INBOX` normalized).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The name as text when it is valid UTF-8 (mUTF-7 always is).
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    /// True for the (normalized) name `INBOX`.
    pub fn is_inbox(&self) -> bool {
        self.0 == b"INBOX"
    }

    /// Consumes the name into its bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

/// A message flag a client may set, store or search for (RFC 3501 §2.3.2,
/// §9 `flag`).
///
/// `\Recent` is not a `Flag`: RFC 3501 §2.3.2 says it cannot be altered by
/// the client, and like Dovecot (`client_parse_mail_flags`) we answer a
/// STORE or APPEND that names it, or any other unknown `\`-flag, with
/// `BAD Invalid system flag \Recent`. SEARCH has its own RECENT key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Flag {
    /// `\Seen`
    Seen,
    /// `\Answered`
    Answered,
    /// `\Flagged`
    Flagged,
    /// `\Deleted`
    Deleted,
    /// `\Draft`
    Draft,
    /// A keyword (RFC 3501 §9 `flag-keyword = atom`), case preserved.
    Keyword(String),
}

impl Flag {
    /// Parses a system flag name (with the backslash), case-insensitively.
    pub fn system(name: &[u8]) -> Option<Flag> {
        let f = match name.to_ascii_lowercase().as_slice() {
            b"\\seen" => Flag::Seen,
            b"\\answered" => Flag::Answered,
            b"\\flagged" => Flag::Flagged,
            b"\\deleted" => Flag::Deleted,
            b"\\draft" => Flag::Draft,
            _ => return None,
        };
        Some(f)
    }

    /// The wire form (`\Seen`, or the keyword itself).
    pub fn as_str(&self) -> &str {
        match self {
            Flag::Seen => "\\Seen",
            Flag::Answered => "\\Answered",
            Flag::Flagged => "\\Flagged",
            Flag::Deleted => "\\Deleted",
            Flag::Draft => "\\Draft",
            Flag::Keyword(k) => k,
        }
    }
}

impl fmt::Display for Flag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A calendar date (RFC 3501 §9 `date`, e.g. `1-Feb-1994`), validated
/// (day within the month, leap years, year 1..=9999).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Date {
    /// Year, e.g. 1994.
    pub year: u16,
    /// Month 1..=12.
    pub month: u8,
    /// Day of month 1..=31.
    pub day: u8,
}

/// English three-letter month names (RFC 3501 §9 `date-month`).
pub(crate) const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

impl Date {
    /// Builds a date if it exists in the proleptic Gregorian calendar.
    pub fn new(year: u16, month: u8, day: u8) -> Option<Date> {
        if year == 0 || year > 9999 || !(1..=12).contains(&month) || day == 0 {
            return None;
        }
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
        let max = match month {
            2 if leap => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        (day <= max).then_some(Date { year, month, day })
    }

    /// Days since 1970-01-01 (negative before).
    pub fn days_since_epoch(&self) -> i64 {
        // Howard Hinnant's days_from_civil algorithm (public domain).
        let y = i64::from(self.year) - i64::from(self.month <= 2);
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let m = i64::from(self.month);
        let mp = (m + 9) % 12;
        let doy = (153 * mp + 2) / 5 + i64::from(self.day) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }
}

impl fmt::Display for Date {
    /// `1-Feb-1994` (RFC 3501 §9 `date-text`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let month = MONTHS[usize::from(self.month - 1)];
        write!(f, "{}-{}-{}", self.day, month, self.year)
    }
}

/// A date-time with zone (RFC 3501 §9 `date-time`, e.g.
/// `"17-Jul-1996 02:44:25 -0700"`), used by APPEND and INTERNALDATE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DateTime {
    /// The local calendar date.
    pub date: Date,
    /// Hour 0..=23.
    pub hour: u8,
    /// Minute 0..=59.
    pub minute: u8,
    /// Second 0..=60 (a leap second is accepted).
    pub second: u8,
    /// Offset from UTC in minutes, -1439..=1439 (RFC 3501 §9 `zone`).
    pub offset_minutes: i16,
}

impl DateTime {
    /// Builds a validated date-time.
    pub fn new(date: Date, hour: u8, minute: u8, second: u8, offset_minutes: i16) -> Option<Self> {
        if hour > 23 || minute > 59 || second > 60 || offset_minutes.abs() > 23 * 60 + 59 {
            return None;
        }
        Some(DateTime {
            date,
            hour,
            minute,
            second,
            offset_minutes,
        })
    }

    /// Seconds since the Unix epoch (UTC) of this instant.
    pub fn unix_seconds(&self) -> i64 {
        self.date.days_since_epoch() * 86_400
            + i64::from(self.hour) * 3600
            + i64::from(self.minute) * 60
            + i64::from(self.second)
            - i64::from(self.offset_minutes) * 60
    }

    /// The UTC-offset date-time of a Unix timestamp, shown at `offset_minutes`.
    pub fn from_unix(secs: i64, offset_minutes: i16) -> Option<DateTime> {
        let local = secs.checked_add(i64::from(offset_minutes) * 60)?;
        let days = local.div_euclid(86_400);
        let rem = local.rem_euclid(86_400);
        // Howard Hinnant's civil_from_days algorithm (public domain).
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        let date = Date::new(
            u16::try_from(year).ok()?,
            u8::try_from(month).ok()?,
            u8::try_from(day).ok()?,
        )?;
        DateTime::new(
            date,
            u8::try_from(rem / 3600).ok()?,
            u8::try_from(rem % 3600 / 60).ok()?,
            u8::try_from(rem % 60).ok()?,
            offset_minutes,
        )
    }
}

impl fmt::Display for DateTime {
    /// `17-Jul-1996 02:44:25 -0700` without quotes (RFC 3501 §9 `date-time`,
    /// day space-padded to two characters: `date-day-fixed`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let month = MONTHS[usize::from(self.date.month - 1)];
        let sign = if self.offset_minutes < 0 { '-' } else { '+' };
        let off = self.offset_minutes.unsigned_abs();
        write!(
            f,
            "{:>2}-{}-{:04} {:02}:{:02}:{:02} {}{:02}{:02}",
            self.date.day,
            month,
            self.date.year,
            self.hour,
            self.minute,
            self.second,
            sign,
            off / 60,
            off % 60
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inbox_is_normalized_only_when_whole() {
        assert_eq!(Mailbox::new("iNbOx").as_bytes(), b"INBOX");
        assert!(Mailbox::new("inbox").is_inbox());
        assert_eq!(Mailbox::new("inbox.Sent").as_bytes(), b"inbox.Sent");
        assert!(!Mailbox::new("INBOXES").is_inbox());
    }

    #[test]
    fn dates_are_validated() {
        assert!(Date::new(2024, 2, 29).is_some());
        assert!(Date::new(2023, 2, 29).is_none());
        assert!(Date::new(1900, 2, 29).is_none());
        assert!(Date::new(2000, 2, 29).is_some());
        assert!(Date::new(2023, 4, 31).is_none());
        assert!(Date::new(2023, 13, 1).is_none());
        assert_eq!(
            Date::new(1994, 2, 1).map(|d| d.to_string()),
            Some("1-Feb-1994".into())
        );
    }

    #[test]
    fn unix_round_trip() {
        let dt = DateTime::new(Date::new(1996, 7, 17).unwrap(), 2, 44, 25, -420).unwrap();
        assert_eq!(dt.to_string(), "17-Jul-1996 02:44:25 -0700");
        assert_eq!(dt.unix_seconds(), 837_596_665);
        let back = DateTime::from_unix(837_596_665, -420).unwrap();
        assert_eq!(back, dt);
        let utc = DateTime::from_unix(0, 0).unwrap();
        assert_eq!(utc.to_string(), " 1-Jan-1970 00:00:00 +0000");
    }

    #[test]
    fn tag_grammar() {
        assert!(Tag::new("A001").is_some());
        assert!(Tag::new("a+b").is_none());
        assert!(Tag::new("a*").is_none());
        assert!(Tag::new("").is_none());
        assert!(Tag::new("x]").is_some());
    }
}
