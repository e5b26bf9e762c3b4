//! RFC 5322 §3.3 date-time formatting from Unix time, without a date library.

/// First delivery time of every generated mailbox: 2022-01-03T08:00:00Z.
pub(crate) const EPOCH_START: i64 = 1_641_196_800;

const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A time zone as senders write it: offset in minutes east of UTC plus an optional
/// obsolete-style comment such as "(CET)" that some MTAs append (RFC 5322 §3.3 allows CFWS).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Zone {
    pub offset_min: i32,
    pub comment: Option<&'static str>,
}

/// Zones seen in real mail, weighted by repetition.
pub(crate) const ZONES: &[Zone] = &[
    Zone {
        offset_min: 0,
        comment: None,
    },
    Zone {
        offset_min: 0,
        comment: Some("UTC"),
    },
    Zone {
        offset_min: 0,
        comment: Some("GMT"),
    },
    Zone {
        offset_min: 60,
        comment: Some("CET"),
    },
    Zone {
        offset_min: 60,
        comment: None,
    },
    Zone {
        offset_min: 120,
        comment: Some("CEST"),
    },
    Zone {
        offset_min: 120,
        comment: None,
    },
    Zone {
        offset_min: -300,
        comment: Some("EST"),
    },
    Zone {
        offset_min: -240,
        comment: Some("EDT"),
    },
    Zone {
        offset_min: -480,
        comment: Some("PST"),
    },
    Zone {
        offset_min: -420,
        comment: Some("PDT"),
    },
    Zone {
        offset_min: -180,
        comment: None,
    },
    Zone {
        offset_min: 330,
        comment: Some("IST"),
    },
    Zone {
        offset_min: 345,
        comment: None,
    },
    Zone {
        offset_min: 540,
        comment: Some("JST"),
    },
    Zone {
        offset_min: 480,
        comment: None,
    },
    Zone {
        offset_min: 600,
        comment: Some("AEST"),
    },
    Zone {
        offset_min: 180,
        comment: Some("MSK"),
    },
];

/// The receiving site's own zone (example.org is in Central Europe).
pub(crate) const LOCAL_ZONE: Zone = Zone {
    offset_min: 60,
    comment: Some("CET"),
};

/// Days since 1970-01-01 to (year, month 1-12, day 1-31); Howard Hinnant's
/// `civil_from_days` algorithm for the proleptic Gregorian calendar.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Formats `ts` (Unix seconds) in `zone` as an RFC 5322 §3.3 date-time, e.g.
/// `Tue, 28 Nov 2023 14:23:13 +0100 (CET)`. `with_day` controls the optional day-of-week;
/// `with_comment` the zone comment.
pub(crate) fn rfc5322(ts: i64, zone: Zone, with_day: bool, with_comment: bool) -> String {
    let local = ts + i64::from(zone.offset_min) * 60;
    let days = local.div_euclid(86_400);
    let secs = local.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let sign = if zone.offset_min < 0 { '-' } else { '+' };
    let off = zone.offset_min.unsigned_abs();
    let mut out = String::with_capacity(40);
    if with_day {
        out.push_str(DAYS[days.rem_euclid(7) as usize]);
        out.push_str(", ");
    }
    out.push_str(&format!(
        "{d} {} {y} {:02}:{:02}:{:02} {sign}{:02}{:02}",
        MONTHS[(m - 1) as usize],
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        off / 60,
        off % 60
    ));
    if with_comment {
        if let Some(c) = zone.comment {
            out.push_str(" (");
            out.push_str(c);
            out.push(')');
        }
    }
    out
}

/// `YYYYMMDDhhmmss` in UTC, as some Message-ID generators embed.
pub(crate) fn compact_utc(ts: i64) -> String {
    let (y, m, d) = civil_from_days(ts.div_euclid(86_400));
    let s = ts.rem_euclid(86_400);
    format!(
        "{y:04}{m:02}{d:02}{:02}{:02}{:02}",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        let utc = Zone {
            offset_min: 0,
            comment: None,
        };
        assert_eq!(
            rfc5322(0, utc, true, false),
            "Thu, 1 Jan 1970 00:00:00 +0000"
        );
        // 2023-11-28T13:23:13Z is a Tuesday.
        assert_eq!(
            rfc5322(1_701_177_793, LOCAL_ZONE, true, true),
            "Tue, 28 Nov 2023 14:23:13 +0100 (CET)"
        );
        let pst = Zone {
            offset_min: -480,
            comment: Some("PST"),
        };
        assert_eq!(
            rfc5322(1_701_177_793, pst, false, false),
            "28 Nov 2023 05:23:13 -0800"
        );
        // Leap day.
        assert_eq!(
            rfc5322(951_782_400, utc, true, false),
            "Tue, 29 Feb 2000 00:00:00 +0000"
        );
        assert_eq!(compact_utc(1_701_177_793), "20231128132313");
        assert_eq!(
            rfc5322(EPOCH_START, utc, true, false),
            "Mon, 3 Jan 2022 08:00:00 +0000"
        );
    }
}
