//! Differential tests against imap-codec (the oracle) on the grammar both
//! support.
//!
//! A generator builds a command as our typed value (the model), renders it
//! to bytes, and checks: (1) we parse it back to the model; (2) imap-codec
//! accepts it; (3) imap-codec's own re-encoding of what it understood
//! parses (with us) to the same model. So both parsers agree on tag,
//! command, mailboxes, sequence sets, fetch items, flags and search keys.
//!
//! Deliberate differences (not generated, pinned in `known_differences`):
//! - `\Recent` and unknown `\`-flags in STORE/APPEND: we answer BAD (as
//!   Dovecot does); imap-codec accepts them. Same for `STATUS x ()`
//!   (RFC 3501 §9 needs one item).
//! - `$` (RFC 5182), LIST-EXTENDED selection options, ESEARCH `RETURN`,
//!   CREATE `USE`, MULTIAPPEND and APPEND streaming: imap-codec 2.0 alpha
//!   does not parse them.
//! - imap-codec normalizes sequence sets (`5:2` becomes `2:5`), so sets are
//!   compared after resolving `*` as the largest possible number. Its
//!   normalization takes `*` as 4294967295, which is wrong when `*` (the
//!   largest number in use, RFC 3501 §9) is below the other end:
//!   `*:1052,*:391` becomes `391:*`. We keep sets as sent and resolve them
//!   against the real largest number ([`SequenceSet::resolve`]).

use imap_codec::decode::Decoder;
use imap_codec::encode::Encoder;
use imap_codec::CommandCodec;
use maildex_imap_proto::*;
use proptest::prelude::*;

#[path = "support/render.rs"]
mod render;
use render::render;

// ----- generators -----

fn mailbox() -> impl Strategy<Value = Mailbox> {
    prop::sample::select(vec![
        &b"INBOX"[..],
        b"inbox",
        b"Sent",
        b"a b",
        b"Entw&APw-rfe",
        b"x\"y\\z",
        b"caf\xc3\xa9",
        b"Archive.2024",
        b"[Gmail]/All",
    ])
    .prop_map(Mailbox::new)
}

fn astr() -> impl Strategy<Value = Vec<u8>> {
    prop::sample::select(vec![
        &b"smith"[..],
        b"two words",
        b"q\"uote",
        b"",
        b"\xc3\xa9t\xc3\xa9",
        b"x]y",
    ])
    .prop_map(<[u8]>::to_vec)
}

fn num() -> impl Strategy<Value = SeqNum> {
    prop_oneof![4 => (1u32..5000).prop_map(SeqNum::Value), 1 => Just(SeqNum::Largest)]
}

fn seqset() -> impl Strategy<Value = SequenceSet> {
    prop::collection::vec((num(), num()), 1..5).prop_map(|v| {
        SequenceSet::Ranges(
            v.into_iter()
                .map(|(start, end)| SeqRange { start, end })
                .collect(),
        )
    })
}

fn a_date() -> impl Strategy<Value = Date> {
    (1990u16..2030, 1u8..=12, 1u8..=28).prop_map(|(y, m, d)| Date::new(y, m, d).unwrap())
}

fn search_key() -> impl Strategy<Value = SearchKey> {
    use SearchKey as K;
    let leaf = prop_oneof![
        prop::sample::select(vec![
            K::All,
            K::Answered,
            K::Deleted,
            K::Draft,
            K::Flagged,
            K::New,
            K::Old,
            K::Recent,
            K::Seen,
            K::Unanswered,
            K::Undeleted,
            K::Undraft,
            K::Unflagged,
            K::Unseen,
        ]),
        astr().prop_map(K::From),
        astr().prop_map(K::Subject),
        astr().prop_map(K::Body),
        astr().prop_map(K::Text),
        (Just(b"X-Spam".to_vec()), astr()).prop_map(|(n, v)| K::Header(n, v)),
        a_date().prop_map(K::Since),
        a_date().prop_map(K::SentBefore),
        prop::sample::select(vec!["$Junk", "foo"]).prop_map(|s| K::Keyword(s.into())),
        (0u32..100_000).prop_map(K::Larger),
        (1u32..100_000).prop_map(K::Younger),
        seqset().prop_map(K::Uid),
        seqset().prop_map(K::SequenceSet),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|k| K::Not(Box::new(k))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| K::Or(Box::new(a), Box::new(b))),
            prop::collection::vec(inner, 1..3).prop_map(K::And),
        ]
    })
}

fn a_section() -> impl Strategy<Value = Section> {
    (prop::collection::vec(1u32..9, 0..3), 0..6usize).prop_map(|(part, t)| {
        let names = vec!["From".to_string(), "Subject".to_string()];
        let text = match t {
            0 => None,
            1 => Some(SectionText::Header),
            2 => Some(SectionText::Text),
            3 if !part.is_empty() => Some(SectionText::Mime),
            4 => Some(SectionText::HeaderFields(names)),
            5 => Some(SectionText::HeaderFieldsNot(names)),
            _ => None,
        };
        Section { part, text }
    })
}

fn fetch_item() -> impl Strategy<Value = FetchItem> {
    let partial = prop::option::of(
        (0u32..10_000, 1u32..10_000).prop_map(|(origin, count)| Partial { origin, count }),
    );
    prop_oneof![
        prop::sample::select(vec![
            FetchItem::Envelope,
            FetchItem::Flags,
            FetchItem::InternalDate,
            FetchItem::Rfc822,
            FetchItem::Rfc822Header,
            FetchItem::Rfc822Size,
            FetchItem::Rfc822Text,
            FetchItem::Body,
            FetchItem::BodyStructure,
            FetchItem::Uid,
            FetchItem::ModSeq,
        ]),
        (a_section(), partial.clone(), any::<bool>()).prop_map(|(section, partial, peek)| {
            FetchItem::BodySection {
                section,
                partial,
                peek,
            }
        }),
        (prop::collection::vec(1u32..9, 0..3), partial, any::<bool>()).prop_map(
            |(part, partial, peek)| FetchItem::Binary {
                part,
                partial,
                peek
            }
        ),
        prop::collection::vec(1u32..9, 0..3).prop_map(|part| FetchItem::BinarySize { part }),
    ]
}

fn flag() -> impl Strategy<Value = Flag> {
    prop::sample::select(vec![
        Flag::Seen,
        Flag::Answered,
        Flag::Flagged,
        Flag::Deleted,
        Flag::Draft,
        Flag::Keyword("$Junk".into()),
        Flag::Keyword("work".into()),
    ])
}

fn sort_key() -> impl Strategy<Value = SortKey> {
    prop::sample::select(vec![
        SortKey::Arrival,
        SortKey::Cc,
        SortKey::Date,
        SortKey::From,
        SortKey::Size,
        SortKey::Subject,
        SortKey::To,
        SortKey::DisplayFrom,
        SortKey::DisplayTo,
    ])
}

fn command() -> impl Strategy<Value = Command> {
    let simple = prop::sample::select(vec![
        Command::Capability,
        Command::Noop,
        Command::Logout,
        Command::StartTls,
        Command::Check,
        Command::Close,
        Command::Expunge { uids: None },
        Command::Idle,
        Command::Namespace,
        Command::Unselect,
    ]);
    let statuses = prop::sample::subsequence(
        vec![
            StatusItem::Messages,
            StatusItem::Recent,
            StatusItem::UidNext,
            StatusItem::UidValidity,
            StatusItem::Unseen,
            StatusItem::Size,
            StatusItem::HighestModSeq,
            StatusItem::Deleted,
            StatusItem::DeletedStorage,
        ],
        1..9,
    );
    prop_oneof![
        simple,
        (astr(), astr()).prop_map(|(username, password)| Command::Login { username, password }),
        (
            prop::sample::select(vec!["PLAIN", "XOAUTH2"]),
            prop::option::of(prop::sample::select(vec!["", "AGpvZQBwdw=="]))
        )
            .prop_map(|(m, r)| Command::Authenticate {
                mechanism: m.into(),
                initial_response: r.map(|r| r.as_bytes().to_vec())
            }),
        (mailbox(), any::<bool>()).prop_map(|(mailbox, condstore)| Command::Select {
            mailbox,
            params: SelectParams {
                condstore,
                qresync: None
            }
        }),
        mailbox().prop_map(|mailbox| Command::Examine {
            mailbox,
            params: SelectParams::default()
        }),
        mailbox().prop_map(|mailbox| Command::Create {
            mailbox,
            special_use: vec![]
        }),
        mailbox().prop_map(|mailbox| Command::Delete { mailbox }),
        mailbox().prop_map(|mailbox| Command::Unsubscribe { mailbox }),
        (mailbox(), mailbox()).prop_map(|(from, to)| Command::Rename { from, to }),
        (
            astr(),
            prop::sample::select(vec![&b"*"[..], b"%", b"INBOX.*", b"a b%"])
        )
            .prop_map(|(r, p)| Command::List(ListArgs {
                selection: vec![],
                reference: r,
                patterns: vec![p.to_vec()],
                returns: vec![],
                extended: false,
            })),
        (mailbox(), statuses).prop_map(|(mailbox, items)| Command::Status { mailbox, items }),
        seqset().prop_map(|s| Command::Expunge { uids: Some(s) }),
        (
            any::<bool>(),
            prop::option::of(Just("UTF-8".to_string())),
            prop::collection::vec(search_key(), 1..4)
        )
            .prop_map(|(uid, charset, keys)| Command::Search {
                uid,
                args: SearchArgs {
                    charset,
                    returns: None,
                    keys
                }
            }),
        (
            any::<bool>(),
            prop::collection::vec((any::<bool>(), sort_key()), 1..4),
            prop::sample::select(vec!["UTF-8", "US-ASCII"]),
            prop::collection::vec(search_key(), 1..3)
        )
            .prop_map(|(uid, criteria, charset, keys)| Command::Sort {
                uid,
                args: SortArgs {
                    returns: None,
                    criteria: criteria
                        .into_iter()
                        .map(|(reverse, key)| SortCriterion { reverse, key })
                        .collect(),
                    charset: charset.into(),
                    keys
                }
            }),
        (
            any::<bool>(),
            prop::sample::select(vec![
                ThreadAlgorithm::OrderedSubject,
                ThreadAlgorithm::References,
                ThreadAlgorithm::Refs
            ]),
            prop::collection::vec(search_key(), 1..3)
        )
            .prop_map(|(uid, algorithm, keys)| Command::Thread {
                uid,
                args: ThreadArgs {
                    algorithm,
                    charset: "UTF-8".into(),
                    keys
                }
            }),
        (
            any::<bool>(),
            seqset(),
            prop::collection::vec(fetch_item(), 1..5),
            prop::option::of(1u64..1 << 40)
        )
            .prop_map(|(uid, set, items, changed_since)| Command::Fetch {
                uid,
                set,
                args: FetchArgs {
                    items,
                    macro_used: None,
                    changed_since,
                    vanished: false
                }
            }),
        (
            any::<bool>(),
            seqset(),
            prop::sample::select(vec![FetchMacro::All, FetchMacro::Fast, FetchMacro::Full])
        )
            .prop_map(|(uid, set, m)| Command::Fetch {
                uid,
                set,
                args: FetchArgs {
                    items: m.items(),
                    macro_used: Some(m),
                    changed_since: None,
                    vanished: false
                }
            }),
        (
            any::<bool>(),
            seqset(),
            0..3u8,
            any::<bool>(),
            prop::collection::vec(flag(), 0..4),
            prop::option::of(0u64..1 << 40)
        )
            .prop_map(
                |(uid, set, mode, silent, flags, unchanged_since)| Command::Store {
                    uid,
                    set,
                    args: StoreArgs {
                        mode: [StoreMode::Replace, StoreMode::Add, StoreMode::Remove]
                            [mode as usize],
                        silent,
                        flags,
                        unchanged_since,
                    }
                }
            ),
        (any::<bool>(), seqset(), mailbox()).prop_map(|(uid, set, mailbox)| Command::Copy {
            uid,
            set,
            mailbox
        }),
        (any::<bool>(), seqset(), mailbox()).prop_map(|(uid, set, mailbox)| Command::Move {
            uid,
            set,
            mailbox
        }),
        prop::sample::subsequence(vec!["CONDSTORE", "QRESYNC", "UTF8=ACCEPT"], 1..3).prop_map(
            |c| Command::Enable {
                capabilities: c.into_iter().map(String::from).collect()
            }
        ),
        prop::option::of(prop::collection::vec(
            (astr(), prop::option::of(astr())),
            1..3
        ))
        .prop_map(|params| Command::Id { params }),
        astr().prop_map(|root| Command::GetQuota { root }),
        mailbox().prop_map(|mailbox| Command::GetQuotaRoot { mailbox }),
        (
            astr(),
            prop::sample::subsequence(vec!["STORAGE", "MESSAGE", "MAILBOX"], 0..3),
            0u64..1 << 40
        )
            .prop_map(|(root, names, n)| Command::SetQuota {
                root,
                limits: names.into_iter().map(|r| (r.to_string(), n)).collect()
            }),
    ]
}

// ----- comparison -----

use maildex_imap_proto::fuzzing::canonical as canon;

fn ours(bytes: &[u8]) -> Result<(Tag, Command), CommandError> {
    parse_command(bytes, &Limits::default())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn both_parsers_agree(model in command(), tag in "[A-Za-z0-9.]{1,8}") {
        let wire = render(&tag, &model);
        let shown = String::from_utf8_lossy(&wire).into_owned();
        // 1. We parse our rendering back to the model.
        let (t, c) = ours(&wire).map_err(|e| TestCaseError::fail(format!("{shown:?}: {e:?}")))?;
        prop_assert_eq!(t.as_str(), tag.as_str());
        prop_assert_eq!(&c, &model, "{}", shown);
        // 2. imap-codec accepts it, whole.
        let codec = CommandCodec::default();
        let (rest, theirs) = codec.decode(&wire).map_err(|e| TestCaseError::fail(format!("imap-codec rejected {shown:?}: {e:?}")))?;
        prop_assert!(rest.is_empty());
        prop_assert_eq!(theirs.tag.inner(), tag.as_str());
        // 3. What imap-codec understood, re-encoded, means the same to us.
        let again = codec.encode(&theirs).dump();
        let again_shown = String::from_utf8_lossy(&again).into_owned();
        let (_, c2) = ours(&again).map_err(|e| TestCaseError::fail(format!("{again_shown:?}: {e:?}")))?;
        prop_assert_eq!(canon(c2), canon(model), "ours {} / imap-codec {}", shown, again_shown);
    }
}

/// Inputs both parsers must refuse.
#[test]
fn both_reject() {
    let codec = CommandCodec::default();
    for bad in [
        "a FETCH 0 FLAGS\r\n",
        "a FETCH 1 FOO\r\n",
        "a FETCH 1:2,,3 FLAGS\r\n",
        "a FETCH 1 BODY[1.MIME.TEXT]\r\n",
        "a FETCH 1 BODY[]<1.0>\r\n",
        "a SELECT\r\n",
        "a LOGIN joe\r\n",
        "a SEARCH\r\n",
        "a SEARCH FOO\r\n",
        "a SEARCH OR SEEN\r\n",
        "a SEARCH SINCE 1-Foo-2020\r\n",
        "a SORT (FOO) UTF-8 ALL\r\n",
        "a SORT () UTF-8 ALL\r\n",
        "a SORT (DATE) UTF-8\r\n",
        "a SORT DATE UTF-8 ALL\r\n",
        "a THREAD REFERENCES UTF-8\r\n",
        "a NOOP extra\r\n",
        "a FROB\r\n",
        "* NOOP\r\n",
        "a+ NOOP\r\n",
        "a UID EXPUNGE\r\n",
        "a LIST \"\"\r\n",
        "a STATUS x (FOO)\r\n",
        "a COPY 1\r\n",
        "a ENABLE\r\n",
        "a GETQUOTA\r\n",
        "a GETQUOTAROOT\r\n",
        "a SETQUOTA x STORAGE 5\r\n",
        "a SETQUOTA x (STORAGE)\r\n",
        "a STORE 1 FLAGZ (\\Seen)\r\n",
        "a LOGIN \"joe pw\r\n",
        "a LOGIN jo\0e pw\r\n",
        "a AUTHENTICATE\r\n",
        "a  NOOP\r\n",
        "a NOOP \r\n",
    ] {
        assert!(ours(bad.as_bytes()).is_err(), "we accepted {bad:?}");
        assert!(
            codec.decode(bad.as_bytes()).is_err(),
            "imap-codec accepted {bad:?}"
        );
    }
}

/// Where we differ on purpose; if imap-codec changes, this says so.
#[test]
fn known_differences() {
    let codec = CommandCodec::default();
    // We refuse what imap-codec accepts:
    // (and an empty STATUS list: RFC 3501 §9 asks for at least one item)
    for s in [
        "a STORE 1 +FLAGS (\\Recent)\r\n",
        "a STORE 1 +FLAGS (\\Foo)\r\n",
        "a STATUS x ()\r\n",
    ] {
        assert!(ours(s.as_bytes()).is_err(), "{s:?}");
        assert!(codec.decode(s.as_bytes()).is_ok(), "{s:?}");
    }
    // We accept extensions imap-codec does not parse:
    for s in [
        "a SEARCH $\r\n",
        "a SEARCH RETURN (MIN MAX) ALL\r\n",
        // ESORT (RFC 5267 §3)
        "a SORT RETURN (MIN MAX) (DATE) UTF-8 ALL\r\n",
        "a LIST (SUBSCRIBED) \"\" *\r\n",
        "a CREATE x (USE (\\Drafts))\r\n",
    ] {
        assert!(ours(s.as_bytes()).is_ok(), "{s:?}");
        assert!(codec.decode(s.as_bytes()).is_err(), "{s:?}");
    }
}
