use super::*;
use proptest::prelude::*;

#[test]
fn parses_dovecot_name_with_sizes_and_flags() {
    let n = MaildirName::parse("1700000000.M1P2Q3.host,S=1234,W=1260:2,FS").unwrap();
    assert_eq!(n.base, "1700000000.M1P2Q3.host,S=1234,W=1260");
    assert_eq!(n.size, Some(1234));
    assert_eq!(n.vsize, Some(1260));
    assert_eq!(n.flags, Flags::FLAGGED | Flags::SEEN);
    assert!(n.keywords.is_empty());
    assert!(n.has_info);
    assert_eq!(n.file_name(), "1700000000.M1P2Q3.host,S=1234,W=1260:2,FS");
}

#[test]
fn new_dir_name_has_no_info() {
    let n = MaildirName::parse("1700000000.123_4.host").unwrap();
    assert!(!n.has_info);
    assert!(n.flags.is_empty());
    assert_eq!(n.size, None);
    assert_eq!(n.file_name(), "1700000000.123_4.host");
}

#[test]
fn empty_info_is_kept() {
    let n = MaildirName::parse("abc:2,").unwrap();
    assert!(n.has_info && n.flags.is_empty());
    assert_eq!(n.file_name(), "abc:2,");
}

#[test]
fn keywords_and_unknown_letters() {
    let n = MaildirName::parse("b:2,3SXab").unwrap();
    assert_eq!(n.flags, Flags::SEEN);
    assert_eq!(n.keywords.letters(), "ab");
    assert_eq!(n.unknown_flags, "3X");
    assert_eq!(n.file_name(), "b:2,3SXab");
    // Adding flags places them in ASCII order around the kept letters.
    let m = n.with_flags(Flags::DRAFT | Flags::SEEN | Flags::DELETED, Keywords(0b100));
    assert_eq!(m.file_name(), "b:2,3DSTXc");
}

#[test]
fn letters_are_written_sorted() {
    let n = MaildirName::parse("b:2,cSaRF").unwrap();
    assert_eq!(n.file_name(), "b:2,FRSac");
}

#[test]
fn second_flag_set_after_comma_is_kept_verbatim() {
    let n = MaildirName::parse("b:2,S,xyz=1").unwrap();
    assert_eq!(n.flags, Flags::SEEN);
    assert!(n.keywords.is_empty(), "letters after ',' are not keywords");
    assert_eq!(n.unknown_flags, ",xyz=1");
    let m = n.with_flags(Flags::FLAGGED, Keywords::EMPTY);
    assert_eq!(m.file_name(), "b:2,F,xyz=1");
}

#[test]
fn with_flags_moves_new_name_to_info() {
    let n = MaildirName::parse("123.M1P1Q1.h,S=5,W=6").unwrap();
    let m = n.with_flags(Flags::SEEN, Keywords::EMPTY);
    assert_eq!(m.file_name(), "123.M1P1Q1.h,S=5,W=6:2,S");
    let none = n.with_flags(Flags::EMPTY, Keywords::EMPTY);
    assert_eq!(none.file_name(), "123.M1P1Q1.h,S=5,W=6:2,");
}

#[test]
fn rejects_non_maildir_names() {
    for bad in [
        "",
        ".",
        "..",
        ".hidden",
        "a/b",
        "a\0b",
        "a\nb",
        "a\rb",
        ":2,S",
        "abc:1,foo",
        "abc:",
        "abc:2,S:2,T",
    ] {
        let e = MaildirName::parse(bad).unwrap_err();
        assert!(
            matches!(e, MaildirError::BadFileName { ref name, .. } if name == bad),
            "{bad:?}: {e}"
        );
    }
}

#[test]
fn size_fields_must_be_well_formed() {
    assert_eq!(size_field("x,S=12", b'S'), Some(12));
    assert_eq!(size_field("x,S=12,W=14", b'W'), Some(14));
    assert_eq!(size_field("x,S=", b'S'), None);
    assert_eq!(size_field("x,S=12a", b'S'), None);
    assert_eq!(size_field("x,S=99999999999999999999999", b'S'), None);
    assert_eq!(size_field("xS=12", b'S'), None);
    assert_eq!(size_field("x,W=1,S=2", b'S'), Some(2));
    assert_eq!(size_field("x,,S=3", b'S'), Some(3));
}

#[test]
fn base_of_stops_at_first_colon() {
    assert_eq!(base_of("a,S=1:2,S"), "a,S=1");
    assert_eq!(base_of("plain"), "plain");
}

#[test]
fn sort_order_follows_time_then_usecs_then_base() {
    let mut v = vec![
        "1700000001.M5P1.h",
        "1700000000.M20P1.h",
        "1700000000.M3P1.h:2,S",
        "1700000000.M3P0.h",
        "999.x",
    ];
    v.sort_by(|a, b| sort_cmp(a, b));
    assert_eq!(
        v,
        vec![
            "999.x",
            "1700000000.M3P0.h",
            "1700000000.M3P1.h:2,S",
            "1700000000.M20P1.h",
            "1700000001.M5P1.h",
        ]
    );
}

#[test]
fn unique_names_are_unique_and_parse() {
    let a = unique_base(10, 12);
    let b = unique_base(10, 12);
    assert_ne!(a, b);
    let n = MaildirName::parse(&a).unwrap();
    assert_eq!(n.size, Some(10));
    assert_eq!(n.vsize, Some(12));
    assert!(!a.contains(':') && !a.contains('/'));
    let id = unique_id();
    let parts: Vec<&str> = id.splitn(3, '.').collect();
    assert!(parts[0].bytes().all(|b| b.is_ascii_digit()));
    assert!(parts[1].starts_with('M') && parts[1].contains('P') && parts[1].contains('Q'));
}

fn base_strategy() -> impl Strategy<Value = (String, Option<u64>, Option<u64>)> {
    (
        "[0-9A-Za-z_\\-][0-9A-Za-z_.\\-]{0,20}",
        proptest::option::of(0u64..1_000_000_000),
        proptest::option::of(0u64..1_000_000_000),
    )
        .prop_map(|(id, s, w)| {
            let mut base = id;
            if let Some(s) = s {
                base.push_str(&format!(",S={s}"));
            }
            if let Some(w) = w {
                base.push_str(&format!(",W={w}"));
            }
            (base, s, w)
        })
}

fn name_strategy() -> impl Strategy<Value = MaildirName> {
    (
        base_strategy(),
        0u8..64,
        0u32..(1 << 26),
        "[0-9A-CEGHIJKLMNOQUVWXYZ#%+=]{0,4}",
        proptest::option::of("[A-Za-z0-9=,]{0,6}"),
        any::<bool>(),
    )
        .prop_map(|((base, size, vsize), f, k, unknown, tail, info)| {
            let mut unknown_flags = unknown;
            if let Some(t) = tail {
                unknown_flags.push(',');
                unknown_flags.push_str(&t);
            }
            let flags = Flags(f);
            let keywords = Keywords(k);
            let has_info =
                info || !flags.is_empty() || !keywords.is_empty() || !unknown_flags.is_empty();
            MaildirName {
                base,
                size,
                vsize,
                flags,
                keywords,
                unknown_flags,
                has_info,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn format_then_parse_round_trips(n in name_strategy()) {
        let s = n.file_name();
        let back = MaildirName::parse(&s).unwrap();
        prop_assert_eq!(&back, &n);
        prop_assert_eq!(back.file_name(), s);
    }

    #[test]
    fn parse_never_panics_and_is_stable(s in "\\PC{0,40}") {
        if let Ok(n) = MaildirName::parse(&s) {
            let again = MaildirName::parse(&n.file_name()).unwrap();
            prop_assert_eq!(again.file_name(), n.file_name());
        }
    }
}
