//! Segments against a model: any mix of batched inserts (in any UID order, filling gaps,
//! replacing), removals and lookups gives exactly what a plain map would, in every mailbox,
//! for whole records and for any choice of cached columns over any UID range.

use std::collections::BTreeMap;

use std::ops::ControlFlow;

use maildex_index::{
    Cached, CachedFields, Index, MailboxId, MessageRecord, MessageState, OpenOptions, PartRecord,
    SearchFields, SortKeys, TextRecord, Uid,
};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Insert { mailbox: u32, uids: Vec<u32> },
    Remove { mailbox: u32, uid: u32 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1..3u32, proptest::collection::vec(1..200u32, 1..40)).prop_map(|(mailbox, uids)| Op::Insert { mailbox, uids }),
        1 => (1..3u32, 1..200u32).prop_map(|(mailbox, uid)| Op::Remove { mailbox, uid }),
    ]
}

/// uid -> (cached record, header blocks)
type Mailbox = BTreeMap<u32, (Cached, Vec<u8>)>;

/// `c` with only `fields` kept.
fn project(c: &Cached, fields: CachedFields) -> Cached {
    let keep = |on: bool, v: &Vec<u8>| if on { v.clone() } else { Vec::new() };
    Cached {
        hot_headers: keep(fields.hot_headers, &c.hot_headers),
        envelope: keep(fields.envelope, &c.envelope),
        body: keep(fields.body, &c.body),
        body_structure: keep(fields.body_structure, &c.body_structure),
        parts: if fields.parts {
            c.parts.clone()
        } else {
            PartRecord::default()
        },
        sort: if fields.sort {
            c.sort.clone()
        } else {
            SortKeys::default()
        },
        search: if fields.search {
            c.search.clone()
        } else {
            SearchFields::default()
        },
        text: keep(fields.text, &c.text),
        text_sig: keep(fields.text, &c.text_sig),
    }
}

fn field_sets() -> Vec<CachedFields> {
    let none = CachedFields::default();
    vec![
        CachedFields::ALL,
        CachedFields {
            hot_headers: true,
            ..none
        },
        CachedFields {
            envelope: true,
            ..none
        },
        CachedFields {
            body_structure: true,
            ..none
        },
        CachedFields {
            search: true,
            ..none
        },
        CachedFields {
            envelope: true,
            parts: true,
            ..none
        },
        CachedFields { sort: true, ..none },
        CachedFields { text: true, ..none },
        CachedFields {
            text: true,
            search: true,
            ..none
        },
    ]
}

fn record(uid: u32, gen: usize) -> (MessageRecord, Vec<u8>) {
    let rec = MessageRecord {
        state: MessageState {
            file_name: format!("{uid}.M{gen}P1.host:2,"),
            ..Default::default()
        },
        cached: Cached {
            hot_headers: format!("Subject: {uid}/{gen}\r\n")
                .repeat(1 + (uid as usize % 7))
                .into_bytes(),
            envelope: format!("(\"{uid}\" {gen})")
                .repeat(1 + uid as usize % 5)
                .into_bytes(),
            body: format!("(body {uid})").into_bytes(),
            body_structure: format!("(bs {uid} {gen})").into_bytes(),
            parts: PartRecord {
                body_vsize: u64::from(uid) * 1000 + gen as u64,
                ..Default::default()
            },
            sort: SortKeys {
                sent_date: (uid % 3 != 0).then_some(i64::from(uid) * 60),
                subject: format!("S{}", uid % 11),
                references: vec![format!("{gen}@x"); uid as usize % 3],
                ..Default::default()
            },
            search: SearchFields {
                sent_day: i64::from(uid) - 5,
                subject: vec![format!("{uid}/{gen}")],
                from: vec![String::new(); uid as usize % 3],
                ..Default::default()
            },
            text_sig: vec![8, uid as u8, gen as u8],
            text: TextRecord {
                headers: vec![format!("subject: {uid}/{gen}\n")],
                bodies: vec![format!("body {uid} gen {gen}\n").repeat(1 + uid as usize % 9)],
            }
            .encode()
            .unwrap(),
        },
    };
    let headers = format!("Received: from h{uid} by mx gen {gen}\n")
        .repeat(1 + (uid as usize % 40))
        .into_bytes();
    (rec, headers)
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(
        dir.path(),
        &OpenOptions {
            map_size: 8 << 20,
            durable: false,
            sync_delay: None,
        },
    )
    .unwrap();
    index
        .write(|w| {
            w.create_mailbox("INBOX", 1)?;
            w.create_mailbox("Other", 2)?;
            Ok(())
        })
        .unwrap();
    let mut model: BTreeMap<u32, Mailbox> = BTreeMap::new();
    for (gen, op) in ops.into_iter().enumerate() {
        match op {
            Op::Insert { mailbox, uids } => {
                let mut batch = Vec::new();
                let mut seen = std::collections::HashSet::new();
                for uid in uids {
                    if seen.insert(uid) {
                        let (rec, headers) = record(uid, gen);
                        model
                            .entry(mailbox)
                            .or_default()
                            .insert(uid, (rec.cached.clone(), headers.clone()));
                        batch.push((Uid(uid), rec, headers));
                    }
                }
                index
                    .write(move |w| w.insert_messages(MailboxId(mailbox), batch).map(drop))
                    .unwrap();
            }
            Op::Remove { mailbox, uid } => {
                let was = model.entry(mailbox).or_default().remove(&uid).is_some();
                let removed = index
                    .write(move |w| Ok(w.remove_message(MailboxId(mailbox), Uid(uid))?.is_some()))
                    .unwrap();
                prop_assert_eq!(was, removed);
            }
        }
    }
    for mailbox in 1..3u32 {
        let want = model.remove(&mailbox).unwrap_or_default();
        let mailbox = MailboxId(mailbox);
        let (all, singles) = index
            .read(|r| {
                let all = r.messages(mailbox)?;
                let mut singles = Vec::new();
                for (uid, _) in &all {
                    singles.push((
                        r.message(mailbox, *uid)?.map(|m| m.cached),
                        r.headers(mailbox, *uid)?,
                    ));
                }
                Ok((all, singles))
            })
            .unwrap();
        let got: Vec<(u32, Cached)> = all
            .iter()
            .map(|(u, m)| (u.get(), m.cached.clone()))
            .collect();
        let expected: Vec<(u32, Cached)> = want.iter().map(|(u, (c, _))| (*u, c.clone())).collect();
        prop_assert_eq!(got, expected);
        for ((_, (cached, headers)), (one, one_headers)) in want.iter().zip(singles) {
            prop_assert_eq!(Some(cached.clone()), one);
            prop_assert_eq!(Some(headers.clone()), one_headers);
        }
        for fields in field_sets() {
            for range in [1..=u32::MAX, 50..=150, 17..=17] {
                let got = index
                    .read(|r| {
                        let mut got = Vec::new();
                        let uids = Uid(*range.start())..=Uid(*range.end());
                        r.for_each_cached(mailbox, uids, fields, |uid, c| {
                            got.push((uid.get(), *c));
                            Ok(ControlFlow::Continue(()))
                        })?;
                        Ok(got)
                    })
                    .unwrap();
                let expected: Vec<(u32, Cached)> = want
                    .range(range.clone())
                    .map(|(u, (c, _))| (*u, project(c, fields)))
                    .collect();
                prop_assert_eq!(&got, &expected, "{:?} {:?}", fields, range);
                for (uid, c) in &expected {
                    let one = index
                        .read(|r| r.cached_fields(mailbox, Uid(*uid), fields))
                        .unwrap();
                    prop_assert_eq!(one.as_ref(), Some(c));
                }
            }
        }
        let counts = index
            .read(|r| Ok(r.require_mailbox(mailbox)?.counts.messages))
            .unwrap();
        prop_assert_eq!(counts as usize, want.len());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn segments_behave_like_a_map(ops in proptest::collection::vec(op(), 1..30)) {
        run(ops)?;
    }
}

/// A new index of 8 MiB in a temporary folder (kept alive by the first element), and the
/// id of its empty INBOX.
fn small_index() -> (tempfile::TempDir, std::sync::Arc<Index>, MailboxId) {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(
        dir.path(),
        &OpenOptions {
            map_size: 8 << 20,
            durable: false,
            sync_delay: None,
        },
    )
    .unwrap();
    let id = index.write(|w| w.create_mailbox("INBOX", 1)).unwrap();
    (dir, index, id)
}

#[test]
fn a_full_segment_is_stored_compact() {
    // 160 messages with 4 kB of similar headers each: compressed segments of sixteen or
    // more (the next sixteen join a segment while its page has room: here three
    // segments, of 64, 64 and 32), far smaller than the raw data, even though they were
    // written one message at a time
    let (_dir, index, id) = small_index();
    let mut raw = 0;
    for uid in 1..=160u32 {
        let (rec, _) = record(uid, 0);
        let headers = format!("Received: from h{uid}.example.net by mx.example.org\n")
            .repeat(100)
            .into_bytes()[..4000]
            .to_vec();
        raw += headers.len();
        index
            .write(move |w| w.insert_message(id, Uid(uid), rec, headers).map(drop))
            .unwrap();
    }
    let stats = index.read(|r| r.page_stats()).unwrap();
    let h = stats.into_iter().find(|s| s.name == "headers").unwrap();
    assert_eq!(h.entries, 3);
    let stored = (h.leaf_pages + h.overflow_pages) * 4096;
    assert!(
        stored * 4 < raw,
        "{stored} bytes of pages for {raw} bytes of headers"
    );
}

/// Keys in each segment database after `batches` of inserts into one mailbox.
fn segment_keys(batches: &[Vec<u32>]) -> Vec<(&'static str, usize)> {
    let (_dir, index, id) = small_index();
    for uids in batches {
        let batch: Vec<_> = uids
            .iter()
            .map(|&u| {
                let (rec, headers) = record(u, 0);
                (Uid(u), rec, headers)
            })
            .collect();
        index
            .write(move |w| w.insert_messages(id, batch).map(drop))
            .unwrap();
    }
    let mut keys: Vec<_> = index
        .read(|r| r.page_stats())
        .unwrap()
        .into_iter()
        // cache-search is a packed column, not segments
        .filter(|s| {
            (s.name.starts_with("cache-") || s.name == "headers") && s.name != "cache-search"
        })
        .map(|s| (s.name, s.entries))
        .collect();
    keys.sort();
    keys
}

#[test]
fn messages_above_the_last_uid_get_a_segment_each_until_sixteen_are_merged() {
    let each = |n: usize| {
        vec![
            ("cache-envelope", n),
            ("cache-hot", n),
            ("cache-sort", n),
            ("cache-structure", n),
            ("headers", n),
        ]
    };
    // one at a time: 15 raw segments of one message, then the 16th merges them into one
    let one_by_one: Vec<Vec<u32>> = (1..=15).map(|u| vec![u]).collect();
    assert_eq!(segment_keys(&one_by_one), each(15));
    let sixteen: Vec<Vec<u32>> = (1..=16).map(|u| vec![u]).collect();
    assert_eq!(segment_keys(&sixteen), each(1));
    // 20: one compressed segment and four raw ones
    let twenty: Vec<Vec<u32>> = (1..=20).map(|u| vec![u]).collect();
    assert_eq!(segment_keys(&twenty), each(5));
    // a batch of 40 (a first sync): one compressed segment, since all of them fit in
    // its page
    assert_eq!(segment_keys(&[(1..=40).collect()]), each(1));
    // 40 one at a time: the second sixteen join the first segment, 8 raw ones
    let forty: Vec<Vec<u32>> = (1..=40).map(|u| vec![u]).collect();
    assert_eq!(segment_keys(&forty), each(9));
}

#[test]
fn a_raw_segment_of_many_messages_at_the_end_is_merged_too() {
    // UID 12, then 1-10 below it in one batch: one raw segment of ten (the writes below
    // the last UID rewrite the segment they go into, as indexes written before the
    // append path also have at their end), then 13-17 make sixteen: one segment
    let batches = vec![vec![12], (1..=10).collect(), vec![13], vec![14, 15, 16, 17]];
    assert_eq!(segment_keys(&batches[..2]).last(), Some(&("headers", 2)));
    assert_eq!(segment_keys(&batches[..3]).last(), Some(&("headers", 3)));
    assert_eq!(segment_keys(&batches).last(), Some(&("headers", 1)));
}
