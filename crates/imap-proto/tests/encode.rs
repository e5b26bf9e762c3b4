//! Response encoding: exact bytes, and imap-codec parses what we write.

use imap_codec::decode::Decoder;
use imap_codec::ResponseCodec;
use maildex_imap_proto::encode::*;
use maildex_imap_proto::*;
use proptest::prelude::*;

fn with(f: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut v = Vec::new();
    f(&mut v);
    String::from_utf8_lossy(&v).into_owned()
}

fn parses_as_response(bytes: &[u8]) {
    match ResponseCodec::default().decode(bytes) {
        Ok((rest, _)) => assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(bytes)),
        Err(e) => panic!(
            "imap-codec rejects {:?}: {e:?}",
            String::from_utf8_lossy(bytes)
        ),
    }
}

#[test]
fn strings_pick_atom_quoted_or_literal() {
    assert_eq!(with(|o| astring(o, b"INBOX")), "INBOX");
    assert_eq!(with(|o| astring(o, b"a]b")), "a]b");
    assert_eq!(with(|o| astring(o, b"nil")), "\"nil\"");
    assert_eq!(with(|o| astring(o, b"")), "\"\"");
    assert_eq!(with(|o| astring(o, b"two words")), "\"two words\"");
    assert_eq!(with(|o| string(o, b"a\"b\\c")), "\"a\\\"b\\\\c\"");
    assert_eq!(with(|o| string(o, "é".as_bytes())), "{2}\r\né");
    assert_eq!(with(|o| string(o, b"a\r\nb")), "{4}\r\na\r\nb");
    assert_eq!(with(|o| nstring(o, None)), "NIL");
    assert_eq!(with(|o| literal8(o, b"\0x")), "~{2}\r\n\0x");
    assert_eq!(
        with(|o| literal_header(o, 4_000_000_000, false)),
        "{4000000000}\r\n"
    );
    assert_eq!(with(|o| mailbox(o, &Mailbox::new("inbox"))), "INBOX");
}

#[test]
fn sets_flags_dates() {
    assert_eq!(
        with(|o| compact_set(o, [7, 1, 2, 3, 5, 4, 3, 9, 10])),
        "1:5,7,9:10"
    );
    assert_eq!(
        with(|o| compact_set(o, [u32::MAX - 1, u32::MAX])),
        "4294967294:4294967295"
    );
    assert_eq!(with(|o| compact_sorted(o, &[3])), "3");
    assert_eq!(
        with(|o| flag_list(o, &[Flag::Seen, Flag::Keyword("$Junk".into())], true)),
        "(\\Seen $Junk \\Recent)"
    );
    assert_eq!(with(|o| flag_list(o, &[], false)), "()");
    let dt = DateTime::from_unix(837_596_665, -420).unwrap();
    assert_eq!(
        with(|o| date_time(o, &dt)),
        "\"17-Jul-1996 02:44:25 -0700\""
    );
}

#[test]
fn status_lines_and_codes() {
    let tag = Tag::new("a1").unwrap();
    let line = with(|o| {
        status_line(
            o,
            Some(&tag),
            Status::No,
            Some(&ResponseCode::TryCreate),
            "No such\r\nmailbox",
        )
    });
    assert_eq!(line, "a1 NO [TRYCREATE] No such  mailbox\r\n");
    assert_eq!(
        with(|o| status_line(o, None, Status::Bye, None, "")),
        "* BYE BYE\r\n"
    );
    assert_eq!(with(|o| continuation(o, "")), "+ \r\n");
    assert_eq!(with(|o| continuation(o, "OK")), "+ OK\r\n");
    let codes = [
        ResponseCode::Alert,
        ResponseCode::BadCharset(vec!["UTF-8".into(), "US-ASCII".into()]),
        ResponseCode::BadCharset(vec![]),
        ResponseCode::Capability(vec!["IMAP4rev1".into(), "IDLE".into()]),
        ResponseCode::Parse,
        ResponseCode::PermanentFlags {
            flags: vec![Flag::Seen, Flag::Deleted],
            allow_new: true,
        },
        ResponseCode::PermanentFlags {
            flags: vec![],
            allow_new: false,
        },
        ResponseCode::ReadOnly,
        ResponseCode::ReadWrite,
        ResponseCode::TryCreate,
        ResponseCode::UidNext(4392),
        ResponseCode::UidValidity(3857529045),
        ResponseCode::Unseen(12),
        ResponseCode::AppendUid {
            uidvalidity: 38505,
            uids: SequenceSet::single(3955),
        },
        ResponseCode::CopyUid {
            uidvalidity: 38505,
            source: SequenceSet::range(SeqNum::Value(304), SeqNum::Value(306)),
            dest: SequenceSet::range(SeqNum::Value(3956), SeqNum::Value(3958)),
        },
        ResponseCode::UidNotSticky,
        ResponseCode::HighestModSeq(715194045007),
        ResponseCode::NoModSeq,
        ResponseCode::Modified(SequenceSet::single(7)),
        ResponseCode::Closed,
        ResponseCode::Unavailable,
        ResponseCode::AuthenticationFailed,
        ResponseCode::AuthorizationFailed,
        ResponseCode::Expired,
        ResponseCode::PrivacyRequired,
        ResponseCode::ContactAdmin,
        ResponseCode::NoPerm,
        ResponseCode::InUse,
        ResponseCode::ExpungeIssued,
        ResponseCode::Corruption,
        ResponseCode::ServerBug,
        ResponseCode::ClientBug,
        ResponseCode::Cannot,
        ResponseCode::Limit,
        ResponseCode::OverQuota,
        ResponseCode::AlreadyExists,
        ResponseCode::NonExistent,
        ResponseCode::TooBig,
        ResponseCode::UseAttr,
        ResponseCode::UnknownCte,
    ];
    let want = [
        "ALERT",
        "BADCHARSET (UTF-8 US-ASCII)",
        "BADCHARSET",
        "CAPABILITY IMAP4rev1 IDLE",
        "PARSE",
        "PERMANENTFLAGS (\\Seen \\Deleted \\*)",
        "PERMANENTFLAGS ()",
        "READ-ONLY",
        "READ-WRITE",
        "TRYCREATE",
        "UIDNEXT 4392",
        "UIDVALIDITY 3857529045",
        "UNSEEN 12",
        "APPENDUID 38505 3955",
        "COPYUID 38505 304:306 3956:3958",
        "UIDNOTSTICKY",
        "HIGHESTMODSEQ 715194045007",
        "NOMODSEQ",
        "MODIFIED 7",
        "CLOSED",
        "UNAVAILABLE",
        "AUTHENTICATIONFAILED",
        "AUTHORIZATIONFAILED",
        "EXPIRED",
        "PRIVACYREQUIRED",
        "CONTACTADMIN",
        "NOPERM",
        "INUSE",
        "EXPUNGEISSUED",
        "CORRUPTION",
        "SERVERBUG",
        "CLIENTBUG",
        "CANNOT",
        "LIMIT",
        "OVERQUOTA",
        "ALREADYEXISTS",
        "NONEXISTENT",
        "TOOBIG",
        "USEATTR",
        "UNKNOWN-CTE",
    ];
    for (code, want) in codes.iter().zip(want) {
        assert_eq!(with(|o| response_code(o, code)), want);
        let line = with(|o| status_line(o, Some(&tag), Status::Ok, Some(code), "done"));
        parses_as_response(line.as_bytes());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any bytes written as a string parse back (through our own parser) to
    /// the same bytes, and imap-codec reads the response line.
    #[test]
    fn any_string_round_trips(s in prop::collection::vec(1u8..=255, 0..64)) {
        let mut line = b"a LOGIN ".to_vec();
        astring(&mut line, &s);
        line.extend_from_slice(b" x\r\n");
        let (_, c) = parse_command(&line, &Limits::default()).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert_eq!(c, Command::Login { username: s.clone(), password: b"x".to_vec() });
        let mut resp = b"* LIST () \"/\" ".to_vec();
        astring(&mut resp, &s);
        resp.extend_from_slice(b"\r\n");
        if !s.is_empty() {
            parses_as_response(&resp);
        }
    }

    /// compact_set covers exactly the numbers given.
    #[test]
    fn compact_set_is_exact(v in prop::collection::vec(1u32..200, 1..50)) {
        let text = with(|o| compact_set(o, v.iter().copied()));
        let (_, c) = parse_command(format!("a FETCH {text} UID\r\n").as_bytes(), &Limits::default())
            .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        let Command::Fetch { set, .. } = c else { return Err(TestCaseError::fail("not FETCH")) };
        for n in 1..200 {
            prop_assert_eq!(set.contains(n, 0), v.contains(&n));
        }
    }
}
