//! One test per SEARCH rule, on small real messages built into index records
//! the way delivery builds them.

use std::cell::Cell;

use maildex_imap_proto::{Date, SearchKey as K, SeqNum, SequenceSet};
use maildex_index::{flag, Built, MessageState};

use super::*;

/// A message as the index holds it.
pub(super) struct Msg {
    pub built: Built,
    /// The stored search fields, encoded as the index keeps them.
    pub search: Vec<u8>,
}

impl Msg {
    pub fn new(raw: &[u8], state: MessageState) -> Msg {
        let built = maildex_store::build_record(raw, state).expect("build");
        let search = built.record.cached.search.encode().expect("encode");
        Msg { built, search }
    }

    /// The root header block, cut from the stored blocks as the session does.
    pub fn root_header(&self) -> &[u8] {
        let p = &self.built.record.cached.parts;
        let len = usize::try_from(p.body_start - p.header_start).expect("len");
        &self.built.headers[..len]
    }

    /// The message text, as the store gives it to SEARCH: the stored bodies, the header
    /// text from the stored header blocks.
    pub fn text(&self) -> Option<SearchText<'_>> {
        let stored = &self.built.record.cached.text;
        let record = maildex_index::TextRecordRef::decode(stored, &"test").expect("text record");
        let headers = maildex_store::text::MessageText::header_texts(
            &self.built.headers,
            &self.built.record.cached.parts,
        );
        Some(SearchText::from_stored(record).with_headers(headers))
    }

    /// A candidate with everything loaded.
    pub fn full(&self, seq: u32, uid: u32, recent: bool) -> Candidate<'_> {
        Candidate {
            seq,
            uid: Uid(uid),
            state: Some(&self.built.record.state),
            search: SearchView::parse(&self.search),
            hot: Some(&self.built.record.cached.hot_headers),
            headers: Some(self.root_header()),
            recent,
        }
    }
}

pub(super) fn ctx(keywords: &[String]) -> Context<'_> {
    Context {
        max_seq: 10,
        max_uid: Uid(100),
        keywords,
        saved: None,
        now: 1_700_000_000,
        tz_offset_secs: 0,
        words: None,
    }
}

fn state(flags: u8) -> MessageState {
    MessageState {
        flags,
        internal_date: 1_641_168_000, // 2022-01-03 00:00:00 UTC
        ..MessageState::default()
    }
}

const PLAIN: &[u8] = b"Date: Mon, 3 Jan 2022 10:00:00 +0100\n\
From: Alice Example <alice@example.org>\n\
To: bob@example.net, \"Carol C.\" <carol@example.com>\n\
Cc: dave@example.org\n\
Bcc: eve@example.org\n\
Subject: Quarterly report\n\x20for Q4\n\
List-Id: <team.example.org>\n\
X-Spam-Flag: NO\n\
\n\
Hello Bob,\n\
the numbers are attached.\n";

/// Evaluates `keys` on `c` with a body closure over the text of `m`.
fn eval_on(keys: &[SearchKey], c: &Candidate, cx: &Context, m: &Msg) -> bool {
    matches(keys, c, cx, &mut || m.text())
}

fn one(key: SearchKey, m: &Msg) -> bool {
    let kw: Vec<String> = Vec::new();
    eval_on(&[key], &m.full(1, 1, false), &ctx(&kw), m)
}

fn date(y: u16, m: u8, d: u8) -> Date {
    Date::new(y, m, d).expect("date")
}

fn s(x: &str) -> Vec<u8> {
    x.as_bytes().to_vec()
}

#[test]
fn system_flags_and_their_negations() {
    let m = Msg::new(PLAIN, state(flag::SEEN | flag::FLAGGED));
    assert!(one(K::Seen, &m) && one(K::Flagged, &m));
    assert!(!one(K::Unseen, &m) && !one(K::Unflagged, &m));
    assert!(!one(K::Answered, &m) && one(K::Unanswered, &m));
    assert!(!one(K::Deleted, &m) && one(K::Undeleted, &m));
    assert!(!one(K::Draft, &m) && one(K::Undraft, &m));
    let m = Msg::new(PLAIN, state(flag::ANSWERED | flag::DELETED | flag::DRAFT));
    assert!(one(K::Answered, &m) && one(K::Deleted, &m) && one(K::Draft, &m));
}

#[test]
fn new_is_recent_and_unseen_old_is_not_recent() {
    let kw: Vec<String> = Vec::new();
    let cx = ctx(&kw);
    let unseen = Msg::new(PLAIN, state(0));
    let seen = Msg::new(PLAIN, state(flag::SEEN));
    let t = |k: SearchKey, m: &Msg, recent: bool| eval_on(&[k], &m.full(1, 1, recent), &cx, m);
    assert!(t(K::New, &unseen, true));
    assert!(!t(K::New, &seen, true));
    assert!(!t(K::New, &unseen, false));
    assert!(t(K::Recent, &seen, true) && !t(K::Recent, &seen, false));
    assert!(t(K::Old, &unseen, false) && !t(K::Old, &unseen, true));
}

#[test]
fn keywords_go_through_the_table() {
    let table = vec!["$Forwarded".to_string(), "Work".to_string()];
    let cx = ctx(&table);
    let m = Msg::new(
        PLAIN,
        MessageState {
            keywords: 0b10,
            ..state(0)
        },
    );
    let t = |k: SearchKey| eval_on(&[k], &m.full(1, 1, false), &cx, &m);
    assert!(t(K::Keyword("Work".into())));
    assert!(
        t(K::Keyword("work".into())),
        "keywords are case-insensitive"
    );
    assert!(!t(K::Keyword("$Forwarded".into())));
    assert!(t(K::Unkeyword("$Forwarded".into())));
    // A keyword the mailbox never saw: set on nothing.
    assert!(!t(K::Keyword("Unknown".into())));
    assert!(t(K::Unkeyword("Unknown".into())));
}

#[test]
fn larger_smaller_use_rfc822_size() {
    let m = Msg::new(PLAIN, state(0));
    let st = &m.built.record.state;
    assert!(st.vsize > st.size, "LF message: CRLF size is larger");
    let v = u32::try_from(st.vsize).expect("small");
    assert!(!one(K::Larger(v), &m) && one(K::Larger(v - 1), &m));
    assert!(!one(K::Smaller(v), &m) && one(K::Smaller(v + 1), &m));
    // The physical size would wrongly say "not larger".
    let phys = u32::try_from(st.size).expect("small");
    assert!(one(K::Larger(phys), &m));
}

#[test]
fn internal_date_compares_days_in_the_server_zone() {
    // 2022-01-03 23:30 UTC.
    let m = Msg::new(
        PLAIN,
        MessageState {
            internal_date: 1_641_252_600,
            ..state(0)
        },
    );
    let kw: Vec<String> = Vec::new();
    let utc = ctx(&kw);
    let east = Context {
        tz_offset_secs: 3600,
        words: None,
        ..ctx(&kw)
    };
    let t = |k: SearchKey, cx: &Context| eval_on(&[k], &m.full(1, 1, false), cx, &m);
    assert!(t(K::On(date(2022, 1, 3)), &utc));
    assert!(
        t(K::On(date(2022, 1, 4)), &east),
        "00:30 on the 4th at +0100"
    );
    assert!(t(K::Before(date(2022, 1, 4)), &utc) && !t(K::Before(date(2022, 1, 3)), &utc));
    assert!(t(K::Since(date(2022, 1, 3)), &utc) && !t(K::Since(date(2022, 1, 4)), &utc));
    assert!(t(K::Since(date(2022, 1, 4)), &east));
}

#[test]
fn sent_dates_use_the_date_header_as_written() {
    let raw = b"Date: Fri, 21 Nov 1997 23:30:00 -0600\nSubject: x\n\nbody\n";
    // INTERNALDATE far away, so a fallback to it would show.
    let m = Msg::new(raw, state(0));
    assert!(one(K::SentOn(date(1997, 11, 21)), &m), "the 22nd in UTC");
    assert!(!one(K::SentOn(date(1997, 11, 22)), &m));
    assert!(one(K::SentBefore(date(1997, 11, 22)), &m));
    assert!(!one(K::SentBefore(date(1997, 11, 21)), &m));
    assert!(one(K::SentSince(date(1997, 11, 21)), &m));
    assert!(!one(K::SentSince(date(1997, 11, 22)), &m));
    // Obsolete form: two-digit year, zone name, comment.
    let m = Msg::new(b"Date: 21 Nov 97 09:55 EST (Eastern)\n\nx\n", state(0));
    assert!(one(K::SentOn(date(1997, 11, 21)), &m));
}

#[test]
fn sent_dates_without_a_date_header_are_1970_as_in_dovecot() {
    for raw in [
        &b"Subject: no date\n\nbody\n"[..],
        b"Date: someday soon\nSubject: bad date\n\nbody\n",
    ] {
        let m = Msg::new(raw, state(0));
        assert!(one(K::SentBefore(date(2022, 1, 3)), &m));
        assert!(!one(K::SentSince(date(1971, 1, 1)), &m));
        assert!(
            !one(K::SentOn(date(2022, 1, 3)), &m),
            "not INTERNALDATE's day"
        );
        assert!(one(K::SentOn(date(1970, 1, 1)), &m));
    }
}

#[test]
fn address_and_subject_keys_are_case_insensitive_substrings() {
    let m = Msg::new(PLAIN, state(0));
    assert!(one(K::From(s("ALICE@example")), &m));
    assert!(one(K::From(s("alice example")), &m), "display name counts");
    assert!(!one(K::From(s("bob")), &m));
    assert!(one(K::To(s("carol c.")), &m) && one(K::To(s("bob@")), &m));
    assert!(one(K::Cc(s("dave")), &m) && !one(K::Cc(s("eve")), &m));
    assert!(one(K::Bcc(s("eve")), &m));
    assert!(one(K::Subject(s("report for q4")), &m), "folding removed");
    assert!(!one(K::Subject(s("report\nfor")), &m));
    assert!(one(K::Subject(s("")), &m), "empty string: the field exists");
    let no_cc = Msg::new(b"Subject: s\n\nx\n", state(0));
    assert!(!one(K::Cc(s("")), &no_cc));
}

#[test]
fn address_keys_match_the_envelope_address_not_the_raw_header() {
    // issue 15 #17: RFC 3501 §6.4.4 FROM matches the address ENVELOPE shows
    let raw = b"From: <user-from (comment)@ (comment) domain.org>\n\
To: joe@example.org (Joe Bloggs)\n\
Cc: Team: \"Doe, Jane\" <jane@example.org>;\n\
\n\
x\n";
    let m = Msg::new(raw, state(0));
    assert!(one(K::From(s("user-from@domain.org")), &m));
    assert!(one(K::From(s("<USER-FROM@domain.org>")), &m));
    assert!(!one(K::From(s("comment")), &m), "comments are not searched");
    assert!(one(K::To(s("\"joe bloggs\" <joe@")), &m), "display name");
    assert!(!one(K::To(s("(joe")), &m));
    assert!(one(K::Cc(s("team: \"doe, jane\" <jane@example.org>;")), &m));
    assert!(
        one(K::Header(s("from"), s("(comment)")), &m),
        "HEADER still reads the raw field"
    );
}

#[test]
fn subject_white_space_is_compressed_as_in_dovecot() {
    let raw = b"Subject:   leading  and\tinner\n\tfolded   \nHeader-X: a\tb\n\nx\n";
    let m = Msg::new(raw, state(0));
    assert!(one(K::Subject(s("leading and inner folded ")), &m));
    assert!(
        !one(K::Subject(s("and\tinner")), &m),
        "the key is not compressed"
    );
    assert!(one(K::Header(s("header-x"), s("a\tb")), &m));
    assert!(
        !one(K::Header(s("header-x"), s("a b")), &m),
        "HEADER is not"
    );
}

#[test]
fn encoded_word_subject_found_by_utf8_search() {
    let raw = "From: =?ISO-8859-1?Q?J=F6rg_M=FCller?= <jm@example.de>\n\
Subject: =?UTF-8?B?R3LDvMOfZSBhdXMg?=\n =?ISO-8859-1?Q?K=F6ln?= und Umgebung\n\
\n\
Hallo\n";
    let m = Msg::new(raw.as_bytes(), state(0));
    assert!(one(K::Subject("Grüße aus Köln".as_bytes().to_vec()), &m));
    assert!(one(K::Subject("GRÜ".as_bytes().to_vec()), &m));
    assert!(one(K::Subject("köln und".as_bytes().to_vec()), &m));
    assert!(
        !one(K::Subject(s("=?UTF-8?B?")), &m),
        "raw form is not searched"
    );
    assert!(one(K::From("jörg müller".as_bytes().to_vec()), &m));
}

#[test]
fn header_key_on_hot_and_cold_fields() {
    let m = Msg::new(PLAIN, state(0));
    let kw: Vec<String> = Vec::new();
    let cx = ctx(&kw);
    let hot = K::Header(s("subject"), s("QUARTERLY report"));
    let stored = K::Header(s("list-id"), s("TEAM.example"));
    let cold = K::Header(s("X-Spam-Flag"), s("no"));
    let exists = K::Header(s("x-spam-flag"), s(""));
    let missing = K::Header(s("X-Other"), s(""));
    assert_eq!(
        needs(std::slice::from_ref(&hot)),
        Needs {
            hot: true,
            ..Needs::default()
        }
    );
    assert_eq!(
        needs(std::slice::from_ref(&stored)),
        Needs {
            search: true,
            ..Needs::default()
        }
    );
    assert!(one(stored.clone(), &m));
    assert!(!one(K::Header(s("List-ID"), s("other")), &m));
    // a cold field: the search fields first (a learned field is there), then the blocks
    assert_eq!(
        needs(&[K::Not(Box::new(cold.clone()))]),
        Needs {
            search: true,
            headers: true,
            ..Needs::default()
        }
    );
    // Each HEADER key reads only its own stage's data: without it, undecided.
    let only_hot = Candidate {
        headers: None,
        ..m.full(1, 1, false)
    };
    assert!(eval_on(std::slice::from_ref(&hot), &only_hot, &cx, &m));
    assert_eq!(
        decide(std::slice::from_ref(&cold), &only_hot, &cx, None),
        None
    );
    let only_headers = Candidate {
        hot: None,
        search: None,
        ..m.full(1, 1, false)
    };
    assert_eq!(
        decide(std::slice::from_ref(&hot), &only_headers, &cx, None),
        None
    );
    for k in [&cold, &exists] {
        assert!(
            eval_on(std::slice::from_ref(k), &only_headers, &cx, &m),
            "{k:?}"
        );
    }
    assert!(!eval_on(&[missing], &only_headers, &cx, &m));
    assert!(!eval_on(
        &[K::Header(s("X-Spam-Flag"), s("yes"))],
        &only_headers,
        &cx,
        &m
    ));
}

#[test]
fn cheap_keys_decide_before_data_is_loaded() {
    let m = Msg::new(PLAIN, state(flag::SEEN));
    let kw: Vec<String> = Vec::new();
    let cx = ctx(&kw);
    let bare = Candidate {
        search: None,
        hot: None,
        headers: None,
        ..m.full(1, 1, false)
    };
    let nothing = Candidate {
        state: None,
        ..bare
    };
    assert_eq!(decide(&[K::Seen], &nothing, &cx, None), None);
    assert_eq!(decide(&[K::Larger(1)], &nothing, &cx, None), None);
    assert_eq!(decide(&[K::All, K::Old], &nothing, &cx, None), Some(true));
    assert_eq!(
        decide(&[K::Recent, K::Seen], &nothing, &cx, None),
        Some(false)
    );
    let subject = || K::Subject(s("quarterly"));
    let cold = || K::Header(s("X-Spam-Flag"), s("no"));
    // AND with a false key, OR with a true one: decided from the flags alone
    assert_eq!(
        decide(&[K::Unseen, subject()], &bare, &cx, None),
        Some(false)
    );
    assert_eq!(decide(&[cold(), K::Unseen], &bare, &cx, None), Some(false));
    let or = K::Or(Box::new(cold()), Box::new(K::Seen));
    assert_eq!(decide(&[or], &bare, &cx, None), Some(true));
    // otherwise undecided until the stage is loaded
    assert_eq!(decide(&[K::Seen, subject()], &bare, &cx, None), None);
    assert_eq!(
        decide(&[K::Not(Box::new(subject()))], &bare, &cx, None),
        None
    );
    assert_eq!(decide(&[K::Body(s("numbers"))], &bare, &cx, None), None);
    let with_search = Candidate {
        search: SearchView::parse(&m.search),
        ..bare
    };
    assert_eq!(
        decide(&[K::Seen, subject()], &with_search, &cx, None),
        Some(true)
    );
    let sent = K::SentOn(date(2022, 1, 3));
    assert_eq!(decide(std::slice::from_ref(&sent), &bare, &cx, None), None);
    assert_eq!(decide(&[sent], &with_search, &cx, None), Some(true));
}

const MIME: &[u8] = b"From: a@example.org\n\
Subject: mime\n\
MIME-Version: 1.0\n\
Content-Type: multipart/mixed; boundary=\"b1\"\n\
\n\
--b1\n\
Content-Type: text/plain; charset=utf-8\n\
Content-Transfer-Encoding: base64\n\
\n\
U2Now7ZuZSBHcsO8w59lIGZyb20gYmFzZTY0Cg==\n\
--b1\n\
Content-Type: text/plain; charset=iso-8859-1\n\
Content-Transfer-Encoding: quoted-printable\n\
\n\
Caf=E9 cr=E8me, soft=\n\
break joined\n\
--b1\n\
Content-Type: image/png; name=\"needle.png\"\n\
Content-Transfer-Encoding: base64\n\
\n\
aGlkZGVuIHRleHQgaW4gYW4gaW1hZ2U=\n\
--b1--\n";

#[test]
fn body_decodes_base64_and_qp_text_parts_only() {
    let m = Msg::new(MIME, state(0));
    assert!(one(K::Body("GRÜßE FROM".as_bytes().to_vec()), &m));
    assert!(one(K::Body("café crème".as_bytes().to_vec()), &m));
    assert!(one(K::Body(s("softbreak joined")), &m));
    assert!(
        !one(K::Body(s("hidden text")), &m),
        "image parts are not text"
    );
    assert!(
        !one(K::Body(s("U2Now")), &m),
        "encoded form is not searched"
    );
    assert!(!one(K::Body(s("mime")), &m), "BODY skips the header");
}

#[test]
fn text_matches_header_and_body() {
    let m = Msg::new(MIME, state(0));
    assert!(one(K::Text(s("subject: mime")), &m));
    assert!(
        one(K::Text(s("needle.png")), &m),
        "MIME headers of parts count"
    );
    assert!(one(K::Text(s("crème")), &m));
    let p = Msg::new(PLAIN, state(0));
    assert!(one(K::Text(s("numbers are")), &p) && one(K::Text(s("quarterly")), &p));
    assert!(!one(K::Text(s("nowhere")), &p));
}

#[test]
fn body_is_read_lazily_and_once() {
    let m = Msg::new(PLAIN, state(0));
    let kw: Vec<String> = Vec::new();
    let cx = ctx(&kw);
    let calls = Cell::new(0);
    let mut body = || {
        calls.set(calls.get() + 1);
        m.text()
    };
    let c = m.full(1, 1, false);
    assert!(!matches(
        &[K::Seen, K::Body(s("hello"))],
        &c,
        &cx,
        &mut body
    ));
    assert_eq!(calls.get(), 0, "SEEN failed first");
    let keys = [
        K::Body(s("hello")),
        K::Text(s("bob")),
        K::Not(Box::new(K::Body(s("x")))),
    ];
    assert!(matches(&keys, &c, &cx, &mut body));
    assert_eq!(calls.get(), 1);
    // A file that cannot be read matches no BODY key.
    assert!(!matches(&[K::Body(s(""))], &c, &cx, &mut || None));
    assert!(matches(&[K::Body(s(""))], &c, &cx, &mut || m.text()));
}

fn set(ranges: &[(SeqNum, SeqNum)]) -> SequenceSet {
    SequenceSet::Ranges(
        ranges
            .iter()
            .map(|&(start, end)| maildex_imap_proto::SeqRange { start, end })
            .collect(),
    )
}

#[test]
fn uid_and_sequence_sets_with_star_and_dollar() {
    use SeqNum::{Largest, Value};
    let m = Msg::new(PLAIN, state(0));
    let kw: Vec<String> = Vec::new();
    let cx = ctx(&kw); // max_seq 10, max_uid 100
    let t = |k: SearchKey, seq: u32, uid: u32, cx: &Context| {
        eval_on(&[k], &m.full(seq, uid, false), cx, &m)
    };
    assert!(t(K::SequenceSet(set(&[(Value(2), Value(4))])), 3, 50, &cx));
    assert!(!t(K::SequenceSet(set(&[(Value(2), Value(4))])), 5, 3, &cx));
    assert!(t(K::SequenceSet(set(&[(Largest, Largest)])), 10, 1, &cx));
    assert!(!t(K::SequenceSet(set(&[(Largest, Largest)])), 9, 100, &cx));
    assert!(t(K::Uid(set(&[(Largest, Largest)])), 1, 100, &cx));
    // RFC 3501 §6.4.8: "n:*" includes the largest UID even when n is larger.
    assert!(t(K::Uid(set(&[(Value(500), Largest)])), 10, 100, &cx));
    assert!(!t(K::Uid(set(&[(Value(500), Largest)])), 9, 99, &cx));
    assert!(
        t(K::Uid(set(&[(Value(7), Value(3))])), 1, 5, &cx),
        "reversed range"
    );
    // $ holds UIDs, for UID and for sequence sets alike.
    assert!(!t(K::Uid(SequenceSet::Saved), 1, 42, &cx), "nothing saved");
    let saved = [Uid(7), Uid(42)];
    let with = Context {
        saved: Some(&saved),
        ..cx
    };
    assert!(t(K::Uid(SequenceSet::Saved), 1, 42, &with));
    assert!(t(K::SequenceSet(SequenceSet::Saved), 9, 7, &with));
    assert!(!t(K::SequenceSet(SequenceSet::Saved), 7, 8, &with));
}

#[test]
fn or_not_and_nest() {
    let m = Msg::new(PLAIN, state(flag::SEEN));
    let not = |k: SearchKey| K::Not(Box::new(k));
    let or = |a: SearchKey, b: SearchKey| K::Or(Box::new(a), Box::new(b));
    assert!(one(or(K::Unseen, K::Seen), &m));
    assert!(!one(or(K::Unseen, K::Deleted), &m));
    assert!(one(not(K::Unseen), &m));
    assert!(one(
        K::And(vec![
            K::Seen,
            not(K::Deleted),
            or(K::Draft, K::From(s("alice")))
        ]),
        &m
    ));
    assert!(!one(K::And(vec![K::Seen, K::Deleted]), &m));
    assert!(one(not(not(K::Seen)), &m));
    assert!(one(K::And(vec![]), &m), "empty AND is true");
}

#[test]
fn older_younger_count_seconds_from_now() {
    let kw: Vec<String> = Vec::new();
    let cx = ctx(&kw);
    let m = Msg::new(
        PLAIN,
        MessageState {
            internal_date: cx.now - 3600,
            ..state(0)
        },
    );
    let t = |k: SearchKey| eval_on(&[k], &m.full(1, 1, false), &cx, &m);
    assert!(t(K::Older(3600)) && t(K::Older(60)) && !t(K::Older(3601)));
    assert!(t(K::Younger(3600)) && t(K::Younger(7200)) && !t(K::Younger(3599)));
}

#[test]
fn modseq_is_at_or_above() {
    let m = Msg::new(
        PLAIN,
        MessageState {
            modseq: ModSeq(7),
            ..state(0)
        },
    );
    assert!(one(K::ModSeq(7), &m) && one(K::ModSeq(1), &m) && !one(K::ModSeq(8), &m));
}

#[test]
fn needs_is_the_union_over_nested_keys() {
    assert_eq!(
        needs(&[
            K::Uid(SequenceSet::Saved),
            K::Recent,
            K::SequenceSet(SequenceSet::Saved)
        ]),
        Needs::default()
    );
    assert_eq!(
        needs(&[K::Seen, K::Uid(SequenceSet::Saved), K::Larger(3)]),
        Needs {
            state: true,
            ..Needs::default()
        }
    );
    // flags, keywords, modseq, sizes and dates: the flags column decides
    assert_eq!(
        needs(&[
            K::Unseen,
            K::Not(Box::new(K::Keyword("$Junk".into()))),
            K::ModSeq(5),
            K::Or(Box::new(K::New), Box::new(K::Deleted)),
        ]),
        Needs {
            state: true,
            ..Needs::default()
        }
    );
    for nested in [
        K::Not(Box::new(K::Before(date(2020, 1, 1)))),
        K::Or(Box::new(K::Seen), Box::new(K::Younger(60))),
        K::And(vec![K::Flagged, K::Smaller(10)]),
    ] {
        assert_eq!(
            needs(&[K::Unseen, nested]),
            Needs {
                state: true,
                ..Needs::default()
            }
        );
    }
    let n = needs(&[K::Or(
        Box::new(K::SentOn(date(2020, 1, 1))),
        Box::new(K::And(vec![K::Not(Box::new(K::Text(s("x"))))])),
    )]);
    assert_eq!(
        n,
        Needs {
            state: false,
            search: true,
            hot: false,
            headers: false,
            body: true
        }
    );
    assert!(needs(&[K::Header(s("Received"), s("x"))]).headers);
    assert!(!needs(&[K::Header(s("SUBJECT"), s("x"))]).headers);
    assert!(needs(&[K::Header(s("SUBJECT"), s("x"))]).hot);
    assert!(needs(&[K::From(s("x"))]).search);
}

#[test]
fn required_texts_are_the_body_and_text_strings_every_match_needs() {
    let keys = [
        K::Body(s("Café")),
        K::And(vec![K::Text(s("x y")), K::Seen]),
        K::Not(Box::new(K::Body(s("not")))),
        K::Or(Box::new(K::Body(s("a"))), Box::new(K::Text(s("b")))),
        K::Subject(s("subject")),
    ];
    let needle = |n: &str, headers| TextNeedle {
        needle: n.into(),
        headers,
    };
    assert_eq!(
        required_texts(&keys),
        vec![needle("café", false), needle("x y", true)]
    );
    assert!(required_texts(&[K::Not(Box::new(K::Text(s("z"))))]).is_empty());
}
