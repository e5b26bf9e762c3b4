//! Properties of [`matches`] over random keys and generated corpus messages:
//! `NOT k` is the negation of `k`, `OR a b` is `a || b`, a key list is the
//! AND of its keys.

use std::sync::OnceLock;

use maildex_imap_proto::{Date, SearchKey as K, SeqNum, SeqRange, SequenceSet};
use maildex_index::MessageState;
use proptest::prelude::*;
use rand::SeedableRng;

use super::tests::Msg;
use super::*;

const N: usize = 16;

fn corpus() -> &'static [Vec<u8>] {
    static C: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    C.get_or_init(|| {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5182);
        (0..N)
            .map(|i| maildex_corpus::message(&mut rng, i, 0.2))
            .collect()
    })
}

/// Words that occur in the corpus (so string keys sometimes match), and
/// one that never does.
fn vocabulary() -> Vec<Vec<u8>> {
    let mut words: Vec<Vec<u8>> = corpus()
        .iter()
        .flat_map(|m| {
            m.split(|b| !b.is_ascii_alphanumeric() && *b != b'@' && *b != b'.')
                .filter(|w| w.len() >= 4)
                .take(60)
                .map(|w| w.to_ascii_uppercase())
                .collect::<Vec<_>>()
        })
        .collect();
    words.sort();
    words.dedup();
    words.truncate(300);
    words.push(b"zzqxj".to_vec());
    words.push(Vec::new());
    words
}

fn date() -> impl Strategy<Value = Date> {
    (2021u16..=2023, 1u8..=12, 1u8..=28).prop_map(|(y, m, d)| {
        Date::new(y, m, d).unwrap_or(Date {
            year: 2022,
            month: 1,
            day: 1,
        })
    })
}

fn set() -> impl Strategy<Value = SequenceSet> {
    let num = prop_oneof![4 => (1u32..=20).prop_map(SeqNum::Value), 1 => Just(SeqNum::Largest)];
    prop_oneof![
        6 => prop::collection::vec((num.clone(), num), 1..3)
            .prop_map(|v| SequenceSet::Ranges(v.into_iter().map(|(start, end)| SeqRange { start, end }).collect())),
        1 => Just(SequenceSet::Saved),
    ]
}

fn leaf(words: Vec<Vec<u8>>) -> impl Strategy<Value = SearchKey> {
    let w = prop::sample::select(words);
    let kw = prop::sample::select(vec!["$Junk", "Work", "unknown"]).prop_map(String::from);
    let header = prop::sample::select(vec![
        "Subject",
        "Received",
        "message-id",
        "X-Mailer",
        "List-Id",
    ]);
    prop_oneof![
        Just(K::All),
        Just(K::Seen),
        Just(K::Unseen),
        Just(K::Flagged),
        Just(K::Deleted),
        Just(K::New),
        Just(K::Old),
        Just(K::Recent),
        kw.clone().prop_map(K::Keyword),
        kw.prop_map(K::Unkeyword),
        (500u32..20_000).prop_map(K::Larger),
        (500u32..20_000).prop_map(K::Smaller),
        date().prop_map(K::Before),
        date().prop_map(K::On),
        date().prop_map(K::Since),
        date().prop_map(K::SentBefore),
        date().prop_map(K::SentOn),
        date().prop_map(K::SentSince),
        (0u32..100_000_000).prop_map(K::Older),
        (0u32..100_000_000).prop_map(K::Younger),
        set().prop_map(K::Uid),
        set().prop_map(K::SequenceSet),
        w.clone().prop_map(K::From),
        w.clone().prop_map(K::To),
        w.clone().prop_map(K::Subject),
        (header, w.clone()).prop_map(|(h, v)| K::Header(h.as_bytes().to_vec(), v)),
        w.clone().prop_map(K::Body),
        w.prop_map(K::Text),
    ]
}

fn key() -> impl Strategy<Value = SearchKey> {
    leaf(vocabulary()).prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|k| K::Not(Box::new(k))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| K::Or(Box::new(a), Box::new(b))),
            prop::collection::vec(inner, 0..3).prop_map(K::And),
        ]
    })
}

fn message_state() -> impl Strategy<Value = (usize, u8, u32, bool, i64)> {
    (
        0..N,
        0u8..64,
        0u32..8,
        any::<bool>(),
        1_600_000_000i64..1_700_000_000,
    )
}

fn check(keys: &[SearchKey], (i, flags, kws, recent, idate): (usize, u8, u32, bool, i64)) -> bool {
    let raw = &corpus()[i];
    let m = Msg::new(
        raw,
        MessageState {
            flags,
            keywords: kws,
            internal_date: idate,
            modseq: maildex_index::ModSeq(3),
            ..MessageState::default()
        },
    );
    let table = vec!["$Junk".to_string(), "Work".to_string(), "Home".to_string()];
    let saved = [Uid(3), Uid(9)];
    let cx = Context {
        max_seq: 12,
        max_uid: Uid(15),
        keywords: &table,
        saved: Some(&saved),
        now: 1_700_000_000,
        tz_offset_secs: 7200,
        words: None,
    };
    let c = m.full(
        u32::try_from(i).unwrap_or(0) + 1,
        u32::try_from(i).unwrap_or(0) * 2 + 1,
        recent,
    );
    matches(keys, &c, &cx, &mut || m.text())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn not_negates(k in key(), st in message_state()) {
        let yes = check(std::slice::from_ref(&k), st);
        prop_assert_eq!(check(&[K::Not(Box::new(k))], st), !yes);
    }

    #[test]
    fn or_is_either_and_list_is_both(a in key(), b in key(), st in message_state()) {
        let (ra, rb) = (check(std::slice::from_ref(&a), st), check(std::slice::from_ref(&b), st));
        prop_assert_eq!(check(&[K::Or(Box::new(a.clone()), Box::new(b.clone()))], st), ra || rb);
        prop_assert_eq!(check(&[a, b], st), ra && rb);
    }
}

#[test]
fn corpus_words_are_found_somewhere() {
    // Guards the properties above against a vocabulary that never matches.
    let hits = vocabulary()
        .iter()
        .take(40)
        .filter(|w| !w.is_empty())
        .filter(|w| (0..N).any(|i| check(&[K::Text((*w).clone())], (i, 0, 0, false, 0))))
        .count();
    assert!(hits >= 20, "only {hits} of 40 words found");
}
