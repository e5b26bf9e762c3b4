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
use maildex_proto::encode::{astring, string};
use maildex_proto::*;
use proptest::prelude::*;

// ----- rendering our model to wire bytes -----

fn seq(out: &mut Vec<u8>, s: &SequenceSet) {
    out.extend_from_slice(s.to_string().as_bytes());
}

fn date(out: &mut Vec<u8>, d: &Date) {
    out.extend_from_slice(d.to_string().as_bytes());
}

fn key(out: &mut Vec<u8>, k: &SearchKey) {
    use SearchKey as K;
    let w = |out: &mut Vec<u8>, s: &str| out.extend_from_slice(s.as_bytes());
    match k {
        K::All => w(out, "ALL"),
        K::Answered => w(out, "ANSWERED"),
        K::Deleted => w(out, "DELETED"),
        K::Draft => w(out, "DRAFT"),
        K::Flagged => w(out, "FLAGGED"),
        K::New => w(out, "NEW"),
        K::Old => w(out, "OLD"),
        K::Recent => w(out, "RECENT"),
        K::Seen => w(out, "SEEN"),
        K::Unanswered => w(out, "UNANSWERED"),
        K::Undeleted => w(out, "UNDELETED"),
        K::Undraft => w(out, "UNDRAFT"),
        K::Unflagged => w(out, "UNFLAGGED"),
        K::Unseen => w(out, "UNSEEN"),
        K::Bcc(s) | K::Body(s) | K::Cc(s) | K::From(s) | K::Subject(s) | K::Text(s) | K::To(s) => {
            let name = match k {
                K::Bcc(_) => "BCC ",
                K::Body(_) => "BODY ",
                K::Cc(_) => "CC ",
                K::From(_) => "FROM ",
                K::Subject(_) => "SUBJECT ",
                K::Text(_) => "TEXT ",
                _ => "TO ",
            };
            w(out, name);
            astring(out, s);
        }
        K::Header(n, v) => {
            w(out, "HEADER ");
            astring(out, n);
            out.push(b' ');
            astring(out, v);
        }
        K::Before(d)
        | K::On(d)
        | K::Since(d)
        | K::SentBefore(d)
        | K::SentOn(d)
        | K::SentSince(d) => {
            let name = match k {
                K::Before(_) => "BEFORE ",
                K::On(_) => "ON ",
                K::Since(_) => "SINCE ",
                K::SentBefore(_) => "SENTBEFORE ",
                K::SentOn(_) => "SENTON ",
                _ => "SENTSINCE ",
            };
            w(out, name);
            date(out, d);
        }
        K::Keyword(s) => w(out, &format!("KEYWORD {s}")),
        K::Unkeyword(s) => w(out, &format!("UNKEYWORD {s}")),
        K::Larger(n) => w(out, &format!("LARGER {n}")),
        K::Smaller(n) => w(out, &format!("SMALLER {n}")),
        K::Older(n) => w(out, &format!("OLDER {n}")),
        K::Younger(n) => w(out, &format!("YOUNGER {n}")),
        K::ModSeq(n) => w(out, &format!("MODSEQ {n}")),
        K::Uid(s) => {
            w(out, "UID ");
            seq(out, s);
        }
        K::SequenceSet(s) => seq(out, s),
        K::Not(k) => {
            w(out, "NOT ");
            key(out, k);
        }
        K::Or(a, b) => {
            w(out, "OR ");
            key(out, a);
            out.push(b' ');
            key(out, b);
        }
        K::And(ks) => {
            out.push(b'(');
            keys(out, ks);
            out.push(b')');
        }
    }
}

fn keys(out: &mut Vec<u8>, ks: &[SearchKey]) {
    for (i, k) in ks.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        key(out, k);
    }
}

fn section(out: &mut Vec<u8>, s: &Section) {
    out.push(b'[');
    let part: Vec<String> = s.part.iter().map(u32::to_string).collect();
    out.extend_from_slice(part.join(".").as_bytes());
    if let Some(t) = &s.text {
        if !s.part.is_empty() {
            out.push(b'.');
        }
        let names = |out: &mut Vec<u8>, w: &str, ns: &[String]| {
            out.extend_from_slice(w.as_bytes());
            out.extend_from_slice(b" (");
            out.extend_from_slice(ns.join(" ").as_bytes());
            out.push(b')');
        };
        match t {
            SectionText::Header => out.extend_from_slice(b"HEADER"),
            SectionText::Text => out.extend_from_slice(b"TEXT"),
            SectionText::Mime => out.extend_from_slice(b"MIME"),
            SectionText::HeaderFields(ns) => names(out, "HEADER.FIELDS", ns),
            SectionText::HeaderFieldsNot(ns) => names(out, "HEADER.FIELDS.NOT", ns),
        }
    }
    out.push(b']');
}

fn partial(out: &mut Vec<u8>, p: &Option<Partial>) {
    if let Some(p) = p {
        out.extend_from_slice(format!("<{}.{}>", p.origin, p.count).as_bytes());
    }
}

fn item(out: &mut Vec<u8>, i: &FetchItem) {
    let w = |out: &mut Vec<u8>, s: &str| out.extend_from_slice(s.as_bytes());
    match i {
        FetchItem::Envelope => w(out, "ENVELOPE"),
        FetchItem::Flags => w(out, "FLAGS"),
        FetchItem::InternalDate => w(out, "INTERNALDATE"),
        FetchItem::Rfc822 => w(out, "RFC822"),
        FetchItem::Rfc822Header => w(out, "RFC822.HEADER"),
        FetchItem::Rfc822Size => w(out, "RFC822.SIZE"),
        FetchItem::Rfc822Text => w(out, "RFC822.TEXT"),
        FetchItem::Body => w(out, "BODY"),
        FetchItem::BodyStructure => w(out, "BODYSTRUCTURE"),
        FetchItem::Uid => w(out, "UID"),
        FetchItem::ModSeq => w(out, "MODSEQ"),
        FetchItem::BodySection {
            section: s,
            partial: p,
            peek,
        } => {
            w(out, if *peek { "BODY.PEEK" } else { "BODY" });
            section(out, s);
            partial(out, p);
        }
        FetchItem::Binary {
            part,
            partial: p,
            peek,
        } => {
            w(out, if *peek { "BINARY.PEEK[" } else { "BINARY[" });
            let part: Vec<String> = part.iter().map(u32::to_string).collect();
            w(out, &part.join("."));
            out.push(b']');
            partial(out, p);
        }
        FetchItem::BinarySize { part } => {
            let part: Vec<String> = part.iter().map(u32::to_string).collect();
            w(out, &format!("BINARY.SIZE[{}]", part.join(".")));
        }
    }
}

fn render(tag: &str, c: &Command) -> Vec<u8> {
    let mut o = format!("{tag} ").into_bytes();
    let sp = |o: &mut Vec<u8>| o.push(b' ');
    match c {
        Command::Login { username, password } => {
            o.extend_from_slice(b"LOGIN ");
            astring(&mut o, username);
            sp(&mut o);
            astring(&mut o, password);
        }
        Command::Authenticate {
            mechanism,
            initial_response,
        } => {
            o.extend_from_slice(format!("AUTHENTICATE {mechanism}").as_bytes());
            if let Some(r) = initial_response {
                sp(&mut o);
                o.extend_from_slice(if r.is_empty() { b"=" } else { r });
            }
        }
        Command::Select { mailbox, params } | Command::Examine { mailbox, params } => {
            o.extend_from_slice(c.name().as_bytes());
            sp(&mut o);
            encode::mailbox(&mut o, mailbox);
            if params.condstore {
                o.extend_from_slice(b" (CONDSTORE)");
            }
        }
        Command::Create { mailbox, .. }
        | Command::Delete { mailbox }
        | Command::Subscribe { mailbox }
        | Command::Unsubscribe { mailbox } => {
            o.extend_from_slice(c.name().as_bytes());
            sp(&mut o);
            encode::mailbox(&mut o, mailbox);
        }
        Command::Rename { from, to } => {
            o.extend_from_slice(b"RENAME ");
            encode::mailbox(&mut o, from);
            sp(&mut o);
            encode::mailbox(&mut o, to);
        }
        Command::List(l) => {
            o.extend_from_slice(b"LIST ");
            astring(&mut o, &l.reference);
            sp(&mut o);
            string(&mut o, &l.patterns[0]);
        }
        Command::Lsub { reference, pattern } => {
            o.extend_from_slice(b"LSUB ");
            astring(&mut o, reference);
            sp(&mut o);
            string(&mut o, pattern);
        }
        Command::Status { mailbox, items } => {
            o.extend_from_slice(b"STATUS ");
            encode::mailbox(&mut o, mailbox);
            let names: Vec<&str> = items.iter().map(|i| i.as_str()).collect();
            o.extend_from_slice(format!(" ({})", names.join(" ")).as_bytes());
        }
        Command::Expunge { uids: Some(s) } => {
            o.extend_from_slice(b"UID EXPUNGE ");
            seq(&mut o, s);
        }
        Command::Search { args, .. } => {
            o.extend_from_slice(c.name().as_bytes());
            if let Some(cs) = &args.charset {
                o.extend_from_slice(format!(" CHARSET {cs}").as_bytes());
            }
            sp(&mut o);
            keys(&mut o, &args.keys);
        }
        Command::Fetch { set, args, .. } => {
            o.extend_from_slice(c.name().as_bytes());
            sp(&mut o);
            seq(&mut o, set);
            sp(&mut o);
            match args.macro_used {
                Some(FetchMacro::All) => o.extend_from_slice(b"ALL"),
                Some(FetchMacro::Fast) => o.extend_from_slice(b"FAST"),
                Some(FetchMacro::Full) => o.extend_from_slice(b"FULL"),
                None => {
                    o.push(b'(');
                    for (i, it) in args.items.iter().enumerate() {
                        if i > 0 {
                            sp(&mut o);
                        }
                        item(&mut o, it);
                    }
                    o.push(b')');
                }
            }
            if let Some(n) = args.changed_since {
                o.extend_from_slice(format!(" (CHANGEDSINCE {n})").as_bytes());
            }
        }
        Command::Store { set, args, .. } => {
            o.extend_from_slice(c.name().as_bytes());
            sp(&mut o);
            seq(&mut o, set);
            if let Some(n) = args.unchanged_since {
                o.extend_from_slice(format!(" (UNCHANGEDSINCE {n})").as_bytes());
            }
            let mode = match args.mode {
                StoreMode::Add => "+",
                StoreMode::Remove => "-",
                StoreMode::Replace => "",
            };
            let silent = if args.silent { ".SILENT" } else { "" };
            o.extend_from_slice(format!(" {mode}FLAGS{silent} ").as_bytes());
            encode::flag_list(&mut o, &args.flags, false);
        }
        Command::Copy { set, mailbox, .. } | Command::Move { set, mailbox, .. } => {
            o.extend_from_slice(c.name().as_bytes());
            sp(&mut o);
            seq(&mut o, set);
            sp(&mut o);
            encode::mailbox(&mut o, mailbox);
        }
        Command::Enable { capabilities } => {
            o.extend_from_slice(format!("ENABLE {}", capabilities.join(" ")).as_bytes());
        }
        Command::Id { params } => {
            o.extend_from_slice(b"ID ");
            match params {
                None => o.extend_from_slice(b"NIL"),
                Some(ps) => {
                    o.push(b'(');
                    for (i, (k, v)) in ps.iter().enumerate() {
                        if i > 0 {
                            sp(&mut o);
                        }
                        string(&mut o, k);
                        sp(&mut o);
                        encode::nstring(&mut o, v.as_deref());
                    }
                    o.push(b')');
                }
            }
        }
        other => o.extend_from_slice(other.name().as_bytes()),
    }
    o.extend_from_slice(b"\r\n");
    o
}

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
        ],
        1..8,
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
    ]
}

// ----- comparison -----

/// Sequence sets resolved (imap-codec normalizes them).
fn canon_set(s: &mut SequenceSet) {
    if let Some(r) = s.resolve(u32::MAX) {
        let n = |v: u32| {
            if v == u32::MAX {
                SeqNum::Largest
            } else {
                SeqNum::Value(v)
            }
        };
        *s = SequenceSet::Ranges(
            r.into_iter()
                .map(|(a, b)| SeqRange {
                    start: n(a),
                    end: n(b),
                })
                .collect(),
        );
    }
}

fn canon_key(k: &mut SearchKey) {
    match k {
        SearchKey::Uid(s) | SearchKey::SequenceSet(s) => canon_set(s),
        SearchKey::Not(k) => canon_key(k),
        SearchKey::Or(a, b) => {
            canon_key(a);
            canon_key(b);
        }
        SearchKey::And(ks) => ks.iter_mut().for_each(canon_key),
        _ => {}
    }
}

fn canon(mut c: Command) -> Command {
    match &mut c {
        Command::Fetch { set, .. }
        | Command::Store { set, .. }
        | Command::Copy { set, .. }
        | Command::Move { set, .. } => canon_set(set),
        Command::Expunge { uids: Some(s) } => canon_set(s),
        Command::Search { args, .. } => args.keys.iter_mut().for_each(canon_key),
        _ => {}
    }
    c
}

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
        "a NOOP extra\r\n",
        "a FROB\r\n",
        "* NOOP\r\n",
        "a+ NOOP\r\n",
        "a UID EXPUNGE\r\n",
        "a LIST \"\"\r\n",
        "a STATUS x (FOO)\r\n",
        "a COPY 1\r\n",
        "a ENABLE\r\n",
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
        "a LIST (SUBSCRIBED) \"\" *\r\n",
        "a CREATE x (USE (\\Drafts))\r\n",
    ] {
        assert!(ours(s.as_bytes()).is_ok(), "{s:?}");
        assert!(codec.decode(s.as_bytes()).is_err(), "{s:?}");
    }
}
