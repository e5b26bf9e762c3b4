//! The Date: header for SENTBEFORE/SENTON/SENTSINCE (RFC 5322 §3.3,
//! obsolete forms of §4.3), read when a message is indexed.

/// Days since 1970-01-01 of a date of the proleptic Gregorian calendar; `None` when it
/// does not exist (31 Apr, 29 Feb 2023, year 0).
fn civil_day(year: u32, month: u8, day: u32) -> Option<i64> {
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
    if day > max {
        return None;
    }
    // Howard Hinnant's days_from_civil algorithm (public domain).
    let y = i64::from(year) - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(month) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

/// Removes comments (nested, with quoted pairs; RFC 5322 §3.2.2 CFWS) and
/// turns commas into spaces, so the rest splits on white space.
fn strip_comments(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    let mut depth = 0u32;
    let mut i = 0;
    while i < v.len() {
        let b = v[i];
        match b {
            b'\\' if depth > 0 => i += 1,
            b'(' => depth += 1,
            b')' if depth > 0 => {
                depth -= 1;
                out.push(b' ');
            }
            _ if depth > 0 => {}
            b',' => out.push(b' '),
            _ => out.push(b),
        }
        i += 1;
    }
    out
}

fn number(tok: &[u8]) -> Option<u32> {
    if tok.is_empty() || tok.len() > 9 || !tok.iter().all(u8::is_ascii_digit) {
        return None;
    }
    tok.iter()
        .try_fold(0u32, |n, &d| Some(n * 10 + u32::from(d - b'0')))
}

fn month(tok: &[u8]) -> Option<u8> {
    const NAMES: [&[u8; 3]; 12] = [
        b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov",
        b"dec",
    ];
    let head = tok.get(..3)?;
    NAMES
        .iter()
        .position(|m| m.eq_ignore_ascii_case(head))
        .and_then(|i| u8::try_from(i + 1).ok())
}

/// Checks `hh:mm[:ss]`, already joined (white space around colons is
/// obsolete syntax, RFC 5322 §4.3, and was removed by the caller).
fn valid_time(tok: &[u8]) -> bool {
    let parts: Vec<&[u8]> = tok.split(|&b| b == b':').collect();
    let limits: &[u32] = match parts.len() {
        2 => &[23, 59],
        3 => &[23, 59, 60],
        _ => return false,
    };
    parts
        .iter()
        .zip(limits)
        .all(|(p, &max)| p.len() <= 2 && number(p).is_some_and(|n| n <= max))
}

/// Parses a Date: field body and returns the calendar date as written in
/// the sender's zone, in days since 1970-01-01. Accepts RFC 5322 §3.3 and the obsolete forms of §4.3:
/// optional day of week, comments, 2- and 3-digit years (§4.3: "00"-"49"
/// are 20xx, "50"-"99" and 3 digits add 1900), optional seconds, white space
/// around the colons, alphabetic or missing zones (the zone does not change
/// the written date, so it is checked for shape only, the time for range).
/// `None` when no date can be read.
pub fn sent_day(raw: &[u8]) -> Option<i64> {
    let cleaned = strip_comments(raw);
    // Join "10 : 20" into "10:20".
    let mut joined = Vec::with_capacity(cleaned.len());
    let mut i = 0;
    while i < cleaned.len() {
        let b = cleaned[i];
        if b.is_ascii_whitespace() {
            let mut j = i;
            while j < cleaned.len() && cleaned[j].is_ascii_whitespace() {
                j += 1;
            }
            let next_colon = cleaned.get(j) == Some(&b':');
            let prev_colon = joined.last() == Some(&b':');
            if !next_colon && !prev_colon {
                joined.push(b' ');
            }
            i = j;
            continue;
        }
        joined.push(b);
        i += 1;
    }
    let mut toks = joined
        .split(|&b| b == b' ')
        .filter(|t| !t.is_empty())
        .peekable();
    // Optional day of week (any alphabetic token before the day).
    if toks
        .peek()
        .is_some_and(|t| t.iter().all(u8::is_ascii_alphabetic))
    {
        toks.next();
    }
    let day = number(toks.next()?)?;
    let month = month(toks.next()?)?;
    let year_tok = toks.next()?;
    let year = number(year_tok)?;
    let year = match year_tok.len() {
        1 | 2 if year < 50 => year + 2000,
        1..=3 => year + 1900,
        _ => year,
    };
    // The time must be there (RFC 5322 §3.3) and sane; Dovecot's parser
    // refuses a date without one as well.
    if !valid_time(toks.next()?) {
        return None;
    }
    if let Some(zone) = toks.next() {
        let ok = match zone.first() {
            Some(b'+' | b'-') => zone.len() == 5 && zone[1..].iter().all(u8::is_ascii_digit),
            _ => zone.iter().all(u8::is_ascii_alphabetic),
        };
        if !ok {
            return None;
        }
    }
    civil_day(year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(y: u32, m: u8, day: u32) -> Option<i64> {
        civil_day(y, m, day)
    }

    #[test]
    fn civil_days() {
        assert_eq!(d(1970, 1, 1), Some(0));
        assert_eq!(d(2000, 3, 1), Some(11_017));
        assert_eq!(d(1969, 12, 31), Some(-1));
        assert_eq!(d(2024, 2, 29), Some(19_782));
        assert_eq!(d(2023, 2, 29), None);
    }

    #[test]
    fn modern_and_obsolete_forms() {
        assert_eq!(
            sent_day(b"Fri, 21 Nov 1997 09:55:06 -0600"),
            d(1997, 11, 21)
        );
        assert_eq!(sent_day(b"21 Nov 97 09:55:06 GMT"), d(1997, 11, 21));
        assert_eq!(sent_day(b"Thu, 1 Jan 04 00:00 +0000"), d(2004, 1, 1));
        assert_eq!(sent_day(b"1 jan 104 00:00:00 EST"), d(2004, 1, 1));
        assert_eq!(
            sent_day(b"Tue (day), 1 Jul 2003 10 : 52 : 37 +0200 (CEST)"),
            d(2003, 7, 1)
        );
        assert_eq!(sent_day(b"Mon,\n 3 Jan 2022 23:59:59 -1200"), d(2022, 1, 3));
        assert_eq!(sent_day(b"3 January 2022 10:00"), d(2022, 1, 3));
    }

    #[test]
    fn garbage_is_none() {
        for s in [
            &b""[..],
            b"yesterday",
            b"32 Jan 2022 10:00:00 +0000",
            b"29 Feb 2023 10:00:00 +0000",
            b"1 Foo 2022 10:00:00 +0000",
            b"1 Jan 2022 25:00:00 +0000",
            b"1 Jan 2022",
            b"1 Jan 2022 10:00:00 +00",
        ] {
            assert_eq!(sent_day(s), None, "{}", String::from_utf8_lossy(s));
        }
    }
}
