//! Grammar rules one by one, through `parse_command`, with the exact BAD
//! texts of typical errors.

use maildex_imap_proto::*;

fn ok(line: &str) -> Command {
    match parse_command(line.as_bytes(), &Limits::default()) {
        Ok((_, c)) => c,
        Err(e) => panic!("{line:?}: {e:?}"),
    }
}

fn bad(line: &str) -> String {
    match parse_command(line.as_bytes(), &Limits::default()) {
        Ok((_, c)) => panic!("{line:?} parsed as {c:?}"),
        Err(e) => e.error.text().to_owned(),
    }
}

fn set(s: &str) -> SequenceSet {
    match ok(&format!("a FETCH {s} UID\r\n")) {
        Command::Fetch { set, .. } => set,
        c => panic!("{c:?}"),
    }
}

#[test]
fn tags_and_command_names() {
    let (tag, cmd) = parse_command(b"A001 noop\r\n", &Limits::default()).unwrap();
    assert_eq!(tag.as_str(), "A001");
    assert_eq!(cmd, Command::Noop);
    assert_eq!(bad("A001 FROB\r\n"), "Unknown command FROB");
    assert_eq!(bad("A001 UID FROB 1\r\n"), "Unknown command UID FROB");
    assert_eq!(bad("A001\r\n"), "Missing command");
    assert_eq!(bad("A001 \r\n"), "Missing command");
    assert_eq!(bad("A+1 NOOP\r\n"), "Invalid tag");
    assert_eq!(bad("* NOOP\r\n"), "Invalid tag");
    assert_eq!(bad("a NOOP extra\r\n"), "Unexpected extra arguments");
    assert_eq!(
        bad("a APPEND INBOX {1}\r\nx\r\n"),
        "APPEND must be streamed"
    );
    let e = parse_command(b"t1 FROB\r\n", &Limits::default()).unwrap_err();
    assert_eq!(e.tag.map(|t| t.as_str().to_owned()), Some("t1".into()));
    assert!(parse_command(b"+ NOOP\r\n", &Limits::default())
        .unwrap_err()
        .tag
        .is_none());
}

#[test]
fn login_with_quoted_and_literal_strings() {
    assert_eq!(
        ok("a LOGIN \"jo\\\"e\" {3}\r\np w\r\n"),
        Command::Login {
            username: b"jo\"e".to_vec(),
            password: b"p w".to_vec()
        }
    );
    assert_eq!(bad("a LOGIN joe\r\n"), "Missing argument");
    assert_eq!(bad("a LOGIN joe  pw\r\n"), "Double space");
    assert_eq!(bad("a LOGIN \"joe pw\r\n"), "Unterminated quoted string");
    assert_eq!(
        bad("a LOGIN \"jo\\e\" pw\r\n"),
        "Invalid escape in quoted string"
    );
    assert_eq!(bad("a LOGIN joe {2}\r\na\0\r\n"), "NUL in literal");
    assert_eq!(
        bad("a LOGIN joe ~{1}\r\na\r\n"),
        "Literal8 not allowed here"
    );
}

#[test]
fn authenticate_with_sasl_ir() {
    assert_eq!(
        ok("a AUTHENTICATE plain\r\n"),
        Command::Authenticate {
            mechanism: "PLAIN".into(),
            initial_response: None
        }
    );
    assert_eq!(
        ok("a AUTHENTICATE PLAIN =\r\n"),
        Command::Authenticate {
            mechanism: "PLAIN".into(),
            initial_response: Some(vec![])
        }
    );
    assert_eq!(
        ok("a AUTHENTICATE PLAIN AGpvZQBwdw==\r\n"),
        Command::Authenticate {
            mechanism: "PLAIN".into(),
            initial_response: Some(b"AGpvZQBwdw==".to_vec())
        }
    );
    assert_eq!(bad("a AUTHENTICATE PLAIN abc\r\n"), "Invalid base64");
}

#[test]
fn mailbox_names() {
    let Command::Select { mailbox, params } = ok("a SELECT inBox\r\n") else {
        panic!()
    };
    assert!(mailbox.is_inbox());
    assert_eq!(params, SelectParams::default());
    let Command::Select { params, .. } = ok("a SELECT x (CONDSTORE)\r\n") else {
        panic!()
    };
    assert!(params.condstore);
    let Command::Examine { mailbox, params } = ok(
        "a EXAMINE \"Entw&APw-rfe\" (QRESYNC (67890007 20050715194045000 41,43:211,214:541))\r\n",
    ) else {
        panic!()
    };
    assert_eq!(mailbox.as_bytes(), b"Entw&APw-rfe");
    let q = params.qresync.unwrap();
    assert_eq!((q.uidvalidity, q.modseq), (67890007, 20050715194045000));
    assert_eq!(q.known_uids.unwrap().to_string(), "41,43:211,214:541");
    assert_eq!(bad("a SELECT x (FOO)\r\n"), "Unknown select parameter FOO");
    assert_eq!(bad("a SELECT \"\"\r\n"), "Empty mailbox name");
    assert_eq!(
        ok("a RENAME a b\r\n"),
        Command::Rename {
            from: Mailbox::new("a"),
            to: Mailbox::new("b")
        }
    );
    assert_eq!(
        ok("a CREATE Drafts (USE (\\Drafts \\sent))\r\n"),
        Command::Create {
            mailbox: Mailbox::new("Drafts"),
            special_use: vec![SpecialUse::Drafts, SpecialUse::Sent]
        }
    );
    assert_eq!(
        bad("a CREATE x (USE (\\Foo))\r\n"),
        "Unknown special-use attribute \\Foo"
    );
}

#[test]
fn list_basic_and_extended() {
    let Command::List(l) = ok("a LIST \"\" *\r\n") else {
        panic!()
    };
    assert!(!l.extended);
    assert_eq!(l.patterns, vec![b"*".to_vec()]);
    let Command::List(l) = ok(
        "a LIST (SUBSCRIBED RECURSIVEMATCH) \"\" (INBOX* \"Other %\") RETURN (CHILDREN STATUS (MESSAGES UNSEEN SIZE))\r\n",
    ) else {
        panic!()
    };
    assert!(l.extended);
    assert_eq!(
        l.selection,
        vec![ListSelect::Subscribed, ListSelect::RecursiveMatch]
    );
    assert_eq!(l.patterns, vec![b"INBOX*".to_vec(), b"Other %".to_vec()]);
    assert_eq!(
        l.returns,
        vec![
            ListReturn::Children,
            ListReturn::Status(vec![
                StatusItem::Messages,
                StatusItem::Unseen,
                StatusItem::Size
            ])
        ]
    );
    assert_eq!(
        bad("a LIST (RECURSIVEMATCH) \"\" *\r\n"),
        "RECURSIVEMATCH needs another selection option"
    );
    assert_eq!(bad("a LIST \"\" * FOO\r\n"), "Expected RETURN");
    assert_eq!(
        bad("a LIST (BOGUS) \"\" *\r\n"),
        "Unknown LIST selection option BOGUS"
    );
    assert_eq!(
        ok("a LSUB \"\" %\r\n"),
        Command::Lsub {
            reference: vec![],
            pattern: b"%".to_vec()
        }
    );
}

#[test]
fn status_items() {
    assert_eq!(
        ok("a STATUS blurdybloop (UIDNEXT MESSAGES HIGHESTMODSEQ deleted Deleted-Storage)\r\n"),
        Command::Status {
            mailbox: Mailbox::new("blurdybloop"),
            items: vec![
                StatusItem::UidNext,
                StatusItem::Messages,
                StatusItem::HighestModSeq,
                StatusItem::Deleted,
                StatusItem::DeletedStorage
            ]
        }
    );
    assert_eq!(bad("a STATUS x (FOO)\r\n"), "Unknown STATUS item FOO");
    assert_eq!(bad("a STATUS x\r\n"), "Missing argument");
}

#[test]
fn sequence_sets() {
    let s = set("1:4,7,*,9:*");
    assert_eq!(s.to_string(), "1:4,7,*,9:*");
    assert_eq!(s.resolve(12), Some(vec![(1, 4), (7, 7), (9, 12)]));
    assert_eq!(set("$"), SequenceSet::Saved);
    assert_eq!(bad("a FETCH 0 UID\r\n"), "Invalid sequence set");
    assert_eq!(bad("a FETCH 1: UID\r\n"), "Invalid sequence set");
    assert_eq!(bad("a FETCH 1,,2 UID\r\n"), "Invalid sequence set");
    assert_eq!(bad("a FETCH 1x UID\r\n"), "Invalid sequence set");
    assert_eq!(bad("a FETCH 4294967296 UID\r\n"), "Invalid sequence set");
    assert_eq!(set("4294967295").to_string(), "4294967295");
}

#[test]
fn fetch_items() {
    let Command::Fetch { uid, args, .. } = ok("a UID FETCH 1:* FAST\r\n") else {
        panic!()
    };
    assert!(uid);
    assert_eq!(args.macro_used, Some(FetchMacro::Fast));
    assert_eq!(
        args.items,
        vec![
            FetchItem::Flags,
            FetchItem::InternalDate,
            FetchItem::Rfc822Size
        ]
    );
    let Command::Fetch { args, .. } = ok(
        "a FETCH 2 (UID body.peek[HEADER.FIELDS (From Subject)]<0.2048> BODY[1.2.MIME] BODY[] BINARY.PEEK[1]<5.10> BINARY.SIZE[2] BODY MODSEQ) (CHANGEDSINCE 12345)\r\n",
    ) else {
        panic!()
    };
    assert_eq!(args.changed_since, Some(12345));
    assert_eq!(
        args.items,
        vec![
            FetchItem::Uid,
            FetchItem::BodySection {
                section: Section {
                    part: vec![],
                    text: Some(SectionText::HeaderFields(vec![
                        "From".into(),
                        "Subject".into()
                    ]))
                },
                partial: Some(Partial {
                    origin: 0,
                    count: 2048
                }),
                peek: true
            },
            FetchItem::BodySection {
                section: Section {
                    part: vec![1, 2],
                    text: Some(SectionText::Mime)
                },
                partial: None,
                peek: false
            },
            FetchItem::BodySection {
                section: Section::full(),
                partial: None,
                peek: false
            },
            FetchItem::Binary {
                part: vec![1],
                partial: Some(Partial {
                    origin: 5,
                    count: 10
                }),
                peek: true
            },
            FetchItem::BinarySize { part: vec![2] },
            FetchItem::Body,
            FetchItem::ModSeq,
        ]
    );
    assert_eq!(
        bad("a FETCH 1 (FLAGS FOO)\r\n"),
        "Unknown FETCH attribute FOO"
    );
    assert_eq!(bad("a FETCH 1 BODY[MIME]\r\n"), "Invalid section MIME");
    assert_eq!(bad("a FETCH 1 BODY[1.]\r\n"), "Invalid section");
    assert_eq!(bad("a FETCH 1 BODY[]<1.0>\r\n"), "Invalid partial");
    assert_eq!(
        bad("a FETCH 1 (ALL)\r\n"),
        "Macro ALL not allowed in a list"
    );
    assert_eq!(
        bad("a FETCH 1 FLAGS (CHANGEDSINCE)\r\n"),
        "Missing argument"
    );
    assert_eq!(
        bad("a FETCH 1 BODY[HEADER.FIELDS (a:b)]\r\n"),
        "Invalid header field name"
    );
    assert_eq!(bad("a FETCH 1\r\n"), "Missing argument");
}

#[test]
fn store_and_flags() {
    assert_eq!(
        ok("a UID STORE 1:3 (UNCHANGEDSINCE 200) +FLAGS.SILENT (\\Seen $Junk)\r\n"),
        Command::Store {
            uid: true,
            set: SequenceSet::range(SeqNum::Value(1), SeqNum::Value(3)),
            args: StoreArgs {
                mode: StoreMode::Add,
                silent: true,
                flags: vec![Flag::Seen, Flag::Keyword("$Junk".into())],
                unchanged_since: Some(200)
            }
        }
    );
    let Command::Store { args, .. } = ok("a STORE 1 FLAGS \\deleted \\Draft\r\n") else {
        panic!()
    };
    assert_eq!((args.mode, args.flags.len()), (StoreMode::Replace, 2));
    let Command::Store { args, .. } = ok("a STORE 1 -FLAGS ()\r\n") else {
        panic!()
    };
    assert!(args.flags.is_empty());
    assert_eq!(
        bad("a STORE 1 +FLAGS (\\Recent)\r\n"),
        "Invalid system flag \\Recent"
    );
    assert_eq!(
        bad("a STORE 1 +FLAGS (\\Foo)\r\n"),
        "Invalid system flag \\Foo"
    );
    assert_eq!(
        bad("a STORE 1 FLAGZ (\\Seen)\r\n"),
        "Invalid STORE data item"
    );
    assert_eq!(
        bad("a STORE 1 (FOO 1) FLAGS ()\r\n"),
        "Unknown STORE modifier FOO"
    );
}

#[test]
fn copy_move_expunge() {
    assert_eq!(
        ok("a UID MOVE 42 Trash\r\n"),
        Command::Move {
            uid: true,
            set: SequenceSet::single(42),
            mailbox: Mailbox::new("Trash")
        }
    );
    assert_eq!(ok("a UID EXPUNGE 3:5\r\n").name(), "UID EXPUNGE");
    assert_eq!(bad("a UID EXPUNGE\r\n"), "Missing argument");
    assert_eq!(ok("a COPY 1 inbox").name(), "COPY");
}

#[test]
fn search_keys() {
    let Command::Search { uid, args } = ok(
        "a UID SEARCH RETURN (MIN COUNT SAVE) CHARSET utf-8 OR (FROM \"smith\" SINCE 1-Feb-1994) NOT $ UNKEYWORD $Junk HEADER X-Foo {3}\r\nbar OLDER 3600 MODSEQ \"/flags/\\\\draft\" all 620162338\r\n",
    ) else {
        panic!()
    };
    assert!(uid);
    assert_eq!(args.charset.as_deref(), Some("UTF-8"));
    assert_eq!(
        args.returns,
        Some(vec![
            SearchReturn::Min,
            SearchReturn::Count,
            SearchReturn::Save
        ])
    );
    use SearchKey as K;
    assert_eq!(
        args.keys,
        vec![
            K::Or(
                Box::new(K::And(vec![
                    K::From(b"smith".to_vec()),
                    K::Since(Date::new(1994, 2, 1).unwrap())
                ])),
                Box::new(K::Not(Box::new(K::SequenceSet(SequenceSet::Saved))))
            ),
            K::Unkeyword("$Junk".into()),
            K::Header(b"X-Foo".to_vec(), b"bar".to_vec()),
            K::Older(3600),
            K::ModSeq(620162338),
        ]
    );
    assert_eq!(bad("a SEARCH\r\n"), "Missing argument");
    // RFC 5182 §3: "$" stands for a whole set, it is not a set element.
    assert_eq!(bad("a SEARCH 2:4,$\r\n"), "Invalid sequence set");
    assert_eq!(bad("a SEARCH FOO\r\n"), "Unknown search key FOO");
    assert_eq!(bad("a SEARCH SINCE 30-Feb-2020\r\n"), "Invalid date");
    assert_eq!(bad("a SEARCH SINCE 1-Foo-2020\r\n"), "Invalid date");
    assert_eq!(bad("a SEARCH OR SEEN\r\n"), "Missing argument");
    assert_eq!(bad("a SEARCH (SEEN\r\n"), "Missing argument");
    assert_eq!(
        bad("a SEARCH RETURN (FOO) ALL\r\n"),
        "Unknown SEARCH return option FOO"
    );
    assert_eq!(bad("a SEARCH YOUNGER 0\r\n"), "Number must not be zero");
    assert_eq!(bad("a SEARCH LARGER x\r\n"), "Invalid number");
    let Command::Search { args, .. } = ok("a SEARCH RETURN () ALL\r\n") else {
        panic!()
    };
    assert_eq!(args.returns, Some(vec![]));
}

#[test]
fn sort_and_thread() {
    // RFC 5256 §3 example; RFC 5267 §3 RETURN; RFC 5957 DISPLAYFROM
    let Command::Sort { uid, args } =
        ok("a UID SORT RETURN (MIN COUNT) (reverse ARRIVAL DisplayFrom) us-ascii SINCE 1-Feb-1994 NOT $\r\n")
    else {
        panic!()
    };
    assert!(uid);
    assert_eq!(
        args.returns,
        Some(vec![SearchReturn::Min, SearchReturn::Count])
    );
    assert_eq!(
        args.criteria,
        vec![
            SortCriterion {
                reverse: true,
                key: SortKey::Arrival
            },
            SortCriterion {
                reverse: false,
                key: SortKey::DisplayFrom
            }
        ]
    );
    assert_eq!(args.charset, "US-ASCII");
    assert_eq!(
        args.keys,
        vec![
            SearchKey::Since(Date::new(1994, 2, 1).unwrap()),
            SearchKey::Not(Box::new(SearchKey::SequenceSet(SequenceSet::Saved)))
        ]
    );
    let Command::Sort { uid, args } = ok("a SORT (SUBJECT) UTF-8 ALL\r\n") else {
        panic!()
    };
    assert!(!uid && args.returns.is_none());
    assert_eq!(ok("a SORT (SUBJECT) \"utf-8\" ALL\r\n").name(), "SORT");
    let Command::Thread { uid, args } = ok("a UID THREAD references UTF-8 FROM x\r\n") else {
        panic!()
    };
    assert!(uid);
    assert_eq!(args.algorithm, ThreadAlgorithm::References);
    assert_eq!(args.keys, vec![SearchKey::From(b"x".to_vec())]);
    assert_eq!(ok("a THREAD ORDEREDSUBJECT utf-8 ALL\r\n").name(), "THREAD");
    let Command::Thread { args, .. } = ok("a THREAD refs UTF-8 ALL\r\n") else {
        panic!()
    };
    assert_eq!(args.algorithm, ThreadAlgorithm::Refs);
    assert_eq!(bad("a SORT (FOO) UTF-8 ALL\r\n"), "Unknown sort key FOO");
    assert_eq!(bad("a SORT (REVERSE) UTF-8 ALL\r\n"), "Missing argument");
    assert_eq!(bad("a SORT () UTF-8 ALL\r\n"), "Missing argument");
    assert_eq!(bad("a SORT (DATE) ALL\r\n"), "Missing argument");
    assert_eq!(bad("a SORT DATE UTF-8 ALL\r\n"), "Expected sort criteria");
    assert_eq!(bad("a SORT (DATE) UTF-8\r\n"), "Missing argument");
    assert_eq!(
        bad("a THREAD REFS2 UTF-8 ALL\r\n"),
        "Unknown thread algorithm REFS2"
    );
    assert_eq!(
        bad("a THREAD REFERENCES UTF-8 FOO\r\n"),
        "Unknown search key FOO"
    );
}

#[test]
fn nesting_and_item_limits() {
    let limits = Limits::default();
    let deep = format!("a SEARCH {}SEEN{}\r\n", "(".repeat(17), ")".repeat(17));
    let e = parse_command(deep.as_bytes(), &limits).unwrap_err().error;
    assert_eq!(e, ParseError::Limit("Too deeply nested".into()));
    assert_eq!(e.code(), Some(ResponseCode::Limit));
    let ok16 = format!("a SEARCH {}SEEN{}\r\n", "(".repeat(16), ")".repeat(16));
    assert!(parse_command(ok16.as_bytes(), &limits).is_ok());
    let nots = format!("a SEARCH {}SEEN\r\n", "NOT ".repeat(200));
    assert_eq!(
        parse_command(nots.as_bytes(), &limits)
            .unwrap_err()
            .error
            .text(),
        "Search key too deeply nested"
    );
    let items: Vec<String> = (1..=limits.max_items + 1)
        .map(|i| (2 * i).to_string())
        .collect();
    let many = format!("a FETCH {} UID\r\n", items.join(","));
    assert_eq!(
        parse_command(many.as_bytes(), &limits)
            .unwrap_err()
            .error
            .text(),
        "Too many items"
    );
}

#[test]
fn enable_id_namespace_unselect() {
    assert_eq!(
        ok("a ENABLE condstore qresync\r\n"),
        Command::Enable {
            capabilities: vec!["CONDSTORE".into(), "QRESYNC".into()]
        }
    );
    assert_eq!(bad("a ENABLE\r\n"), "Missing argument");
    assert_eq!(ok("a ID NIL\r\n"), Command::Id { params: None });
    assert_eq!(
        ok("a ID (\"name\" \"sodr\" \"version\" NIL)\r\n"),
        Command::Id {
            params: Some(vec![
                (b"name".to_vec(), Some(b"sodr".to_vec())),
                (b"version".to_vec(), None)
            ])
        }
    );
    assert_eq!(ok("a NAMESPACE\r\n"), Command::Namespace);
    assert_eq!(ok("a unselect\r\n"), Command::Unselect);
    assert_eq!(ok("a IDLE\r\n"), Command::Idle);
}

#[test]
fn date_time_values() {
    // Only APPEND takes a date-time; check the validator through Display.
    let dt = DateTime::new(Date::new(2024, 2, 29).unwrap(), 23, 59, 60, 13 * 60 + 45).unwrap();
    assert_eq!(dt.to_string(), "29-Feb-2024 23:59:60 +1345");
    assert!(DateTime::new(Date::new(2024, 2, 29).unwrap(), 24, 0, 0, 0).is_none());
    assert!(DateTime::new(Date::new(2024, 2, 29).unwrap(), 0, 0, 0, 24 * 60).is_none());
}

/// Issue 15 #14: `~` is an ATOM-CHAR (RFC 3501 §9); only `~{` starts a literal8 (RFC 3516).
#[test]
fn tilde_is_an_atom_char_and_only_tilde_brace_is_literal8() {
    match ok("a SELECT ~x\r\n") {
        Command::Select { mailbox, .. } => assert_eq!(mailbox.as_bytes(), b"~x"),
        c => panic!("{c:?}"),
    }
    match ok("a LIST \"\" ~foo\r\n") {
        Command::List(args) => assert_eq!(args.patterns, vec![b"~foo".to_vec()]),
        c => panic!("{c:?}"),
    }
    match ok("a SEARCH SUBJECT ~tilde\r\n") {
        Command::Search { args, .. } => {
            assert_eq!(args.keys, vec![SearchKey::Subject(b"~tilde".to_vec())])
        }
        c => panic!("{c:?}"),
    }
    match ok("a FETCH 1 BODY.PEEK[HEADER.FIELDS (~x Subject)]\r\n") {
        Command::Fetch { args, .. } => assert!(
            matches!(
                &args.items[..],
                [FetchItem::BodySection { section, .. }]
                    if section.text == Some(SectionText::HeaderFields(vec!["~x".into(), "Subject".into()]))
            ),
            "{args:?}"
        ),
        c => panic!("{c:?}"),
    }
    assert_eq!(bad("a SELECT ~{1}\r\nx\r\n"), "Literal8 not allowed here");
    // LOGIN takes astrings: a `~` password is an atom
    assert_eq!(
        ok("a LOGIN joe ~pw\r\n"),
        Command::Login {
            username: b"joe".to_vec(),
            password: b"~pw".to_vec()
        }
    );
}
