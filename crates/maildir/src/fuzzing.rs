//! Invariant checks shared by the cargo-fuzz targets in `fuzz/` and the
//! stable replay test `tests/fuzz_corpus.rs` (which runs them over the
//! committed corpus). Not part of the API: each function panics when the
//! invariant it checks does not hold.

use std::path::Path;

use crate::courier::parse_courier_uiddb;
use crate::filename::base_of;
use crate::uidlist::{scan_for_append, AppendScan};
use crate::{KeywordMap, MaildirName, Uidlist};

fn path() -> &'static Path {
    Path::new("fuzz")
}

/// What [`Uidlist::to_bytes`] writes reads back as: version 3, names cut to
/// their base.
fn as_written(list: &Uidlist) -> Uidlist {
    let mut want = list.clone();
    want.version = 3;
    for r in &mut want.records {
        r.file_name = r.base().to_string();
    }
    want
}

/// Checks the shape [`Uidlist::parse`] promises: UIDs nonzero, strictly
/// increasing and below `next_uid`, one record per base.
fn check_shape(list: &Uidlist) {
    let mut prev = 0;
    let mut bases = std::collections::HashSet::new();
    for r in &list.records {
        assert!(r.uid > prev, "UIDs not increasing: {} after {prev}", r.uid);
        prev = r.uid;
        assert!(
            bases.insert(r.base()),
            "two records for base {:?}",
            r.base()
        );
    }
    assert!(
        list.next_uid > prev,
        "next_uid {} <= last UID {prev}",
        list.next_uid
    );
}

/// Target `uidlist`: any bytes as `dovecot-uidlist`. A parsed list has the
/// promised shape; a list that validates is written and read back
/// unchanged; and for a whole version-3 file `scan_for_append` (a delivery's
/// shortcut) agrees with the full parse about UIDVALIDITY, the next UID and
/// the UID of each recorded base and of one that is not recorded.
pub fn uidlist(data: &[u8]) {
    let Ok(list) = Uidlist::parse(path(), data) else {
        return;
    };
    check_shape(&list);
    if list.validate(path()).is_ok() {
        let bytes = list.to_bytes();
        let back = Uidlist::parse(path(), &bytes).expect("written list does not parse");
        assert_eq!(
            back,
            as_written(&list),
            "write and read back changed the list"
        );
    }
    let mut bases: Vec<&str> = list.records.iter().map(|r| r.base()).take(20).collect();
    bases.push("fuzz-absent-base");
    for base in bases {
        let Some(scan) = scan_for_append(path(), data, base) else {
            continue;
        };
        let want = AppendScan {
            uidvalidity: list.uidvalidity,
            next_uid: list.next_uid,
            existing: list.find_base(base).map(|r| r.uid),
        };
        assert_eq!(scan, want, "scan_for_append({base:?}) disagrees with parse");
    }
}

/// Target `keywords`: any bytes as `dovecot-keywords`. Every name read is
/// found again by `letter_of` (case-insensitively, the first of equal
/// names) and `name_of`, and a map that can be written reads back the same.
pub fn keywords(data: &[u8]) {
    let map = KeywordMap::parse(path(), data);
    for (letter, name) in map.iter() {
        assert_eq!(map.name_of(letter), Some(name));
        let found = map.letter_of(name).expect("name not found");
        assert!(found <= letter);
        let other = map.name_of(found).expect("letter_of gave a free letter");
        assert!(other.eq_ignore_ascii_case(name));
    }
    if let Ok(bytes) = map.to_bytes(path()) {
        assert_eq!(
            KeywordMap::parse(path(), &bytes),
            map,
            "write and read back changed it"
        );
    }
}

/// Target `courier`: any bytes as `courierimapuiddb`. A parsed list is
/// version 1 with a nonzero UIDVALIDITY, UIDs strictly increasing below
/// `next_uid`, bases without `/` or `:`; and one that validates is written
/// as a `dovecot-uidlist` (the migration) and read back unchanged.
pub fn courier(data: &[u8]) {
    let Ok(list) = parse_courier_uiddb(path(), data) else {
        return;
    };
    assert_eq!(list.version, 1);
    assert_ne!(list.uidvalidity, 0);
    let mut prev = 0;
    for r in &list.records {
        assert!(
            r.uid > prev && r.uid != u32::MAX,
            "UID {} after {prev}",
            r.uid
        );
        prev = r.uid;
        assert!(!r.file_name.is_empty() && !r.file_name.contains(['/', ':']));
    }
    assert!(list.next_uid > prev);
    if list.validate(path()).is_ok() {
        let back = Uidlist::parse(path(), &list.to_bytes()).expect("written list does not parse");
        assert_eq!(back, as_written(&list), "migrated list reads back changed");
    }
}

/// Target `filename`: any UTF-8 as a Maildir file name. A name that parses
/// has `base_of` as its base, and formatting it (`file_name`) gives a name
/// that parses to the same value and formats the same (the round trip
/// `MaildirName` claims).
pub fn filename(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(n) = MaildirName::parse(s) else {
        return;
    };
    assert_eq!(n.base, base_of(s));
    let formatted = n.file_name();
    let again = MaildirName::parse(&formatted).expect("formatted name does not parse");
    assert_eq!(again, n, "{s:?} -> {formatted:?}");
    assert_eq!(again.file_name(), formatted);
    if !n.has_info {
        assert_eq!(formatted, s, "a name without info is kept as it is");
    }
}
