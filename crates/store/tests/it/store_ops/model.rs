//! Random sequences of deliver / STORE / EXPUNGE / COPY / MOVE on a model and on the
//! store: the index must equal the model after every step (UIDs, flags, keywords, which
//! message is which), modseqs must rise with every change, and `check()` must be clean
//! at the end.

use std::collections::BTreeMap;

use crate::support::{message, Scratch};
use maildex_maildir::Flags;
use maildex_store::{DeliverOptions, FlagOp, ModSeq, Uid, UserStore};
use proptest::prelude::*;

const BOXES: [&str; 2] = ["INBOX", "Other"];
const KW: &str = "$Kw";

#[derive(Clone, Debug)]
enum Op {
    Deliver(usize),
    Store(usize, Vec<usize>, u8, u8, bool),
    Expunge(usize, Option<Vec<usize>>),
    Copy(usize, usize, Vec<usize>),
    Move(usize, usize, Vec<usize>),
}

fn op() -> impl Strategy<Value = Op> {
    let picks = || proptest::collection::vec(0usize..8, 0..4);
    prop_oneof![
        3 => (0usize..2).prop_map(Op::Deliver),
        3 => (0usize..2, picks(), 0u8..3, prop::sample::select(vec![1u8, 4, 8, 9, 13]), any::<bool>())
            .prop_map(|(m, p, o, f, k)| Op::Store(m, p, o, f, k)),
        1 => (0usize..2, prop::option::of(picks())).prop_map(|(m, p)| Op::Expunge(m, p)),
        1 => (0usize..2, 0usize..2, picks()).prop_map(|(a, b, p)| Op::Copy(a, b, p)),
        1 => (0usize..2, 0usize..2, picks()).prop_map(|(a, b, p)| Op::Move(a, b, p)),
    ]
}

/// uid -> (flags, has the keyword, subject)
#[derive(Default)]
struct Box {
    msgs: BTreeMap<Uid, (u8, bool, String)>,
    next: Uid,
}

fn pick(b: &Box, picks: &[usize]) -> Vec<Uid> {
    let uids: Vec<Uid> = b.msgs.keys().copied().collect();
    if uids.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<Uid> = picks.iter().map(|i| uids[i % uids.len()]).collect();
    out.sort_unstable();
    out.dedup();
    out
}

fn highest(store: &UserStore, name: &str) -> ModSeq {
    store
        .index()
        .read(|r| {
            Ok(r.require_mailbox(r.mailbox_id(name)?.unwrap())?
                .highest_modseq)
        })
        .unwrap()
}

fn compare(store: &UserStore, model: &[Box]) {
    for (i, name) in BOXES.iter().enumerate() {
        let got = store
            .index()
            .read(|r| {
                let id = r.mailbox_id(name)?.unwrap();
                let mut out = BTreeMap::new();
                for (uid, rec) in r.messages(id)? {
                    let subject = String::from_utf8_lossy(&rec.cached.hot_headers)
                        .lines()
                        .find_map(|l| l.strip_prefix("Subject: ").map(str::to_string))
                        .unwrap_or_default();
                    out.insert(uid, (rec.state.flags, rec.state.keywords != 0, subject));
                }
                Ok(out)
            })
            .unwrap();
        assert_eq!(got, model[i].msgs, "mailbox {name}");
    }
}

fn run(ops: Vec<Op>) {
    let s = Scratch::new();
    let store = s.open();
    store.sync_all().unwrap();
    store.create_mailbox(BOXES[1]).unwrap();
    let mut model: Vec<Box> = (0..2)
        .map(|_| Box {
            next: Uid(1),
            ..Box::default()
        })
        .collect();
    let mut n = 0;
    for op in ops {
        let moving = matches!(op, Op::Move(..));
        match op {
            Op::Deliver(m) => {
                n += 1;
                let subject = format!("s{n}");
                let d = store
                    .deliver(
                        BOXES[m],
                        &mut &message(&subject)[..],
                        &DeliverOptions::default(),
                    )
                    .unwrap();
                assert_eq!(d.uid, model[m].next);
                model[m].next = model[m].next.next();
                model[m].msgs.insert(d.uid, (0, false, subject));
            }
            Op::Store(m, picks, o, bits, with_kw) => {
                let uids = pick(&model[m], &picks);
                let op = [FlagOp::Add, FlagOp::Remove, FlagOp::Replace][usize::from(o)];
                let kws: Vec<String> = if with_kw { vec![KW.into()] } else { vec![] };
                let before = highest(&store, BOXES[m]);
                let out = store
                    .set_flags(BOXES[m], &uids, op, Flags(bits), &kws, None)
                    .unwrap();
                let mut changed = 0;
                for uid in &uids {
                    let e = model[m].msgs.get_mut(uid).unwrap();
                    let new = match op {
                        FlagOp::Add => (e.0 | bits, e.1 || with_kw),
                        FlagOp::Remove => (e.0 & !bits, e.1 && !with_kw),
                        FlagOp::Replace => (bits, with_kw),
                    };
                    if new != (e.0, e.1) {
                        changed += 1;
                    }
                    (e.0, e.1) = new;
                }
                assert_eq!(out.messages.iter().filter(|m| m.changed).count(), changed);
                let after = highest(&store, BOXES[m]);
                // one modseq per changed message, none for a STORE that changed nothing;
                // modseqs are at least the clock, so a change may skip ahead
                if changed == 0 {
                    assert_eq!(after, before, "no change, no modseq");
                } else {
                    assert!(
                        after.get() >= before.get() + changed as u64,
                        "one modseq per changed message: {before} -> {after} for {changed}"
                    );
                }
            }
            Op::Expunge(m, picks) => {
                let chosen = picks.map(|p| pick(&model[m], &p));
                let before = highest(&store, BOXES[m]);
                let gone = store.expunge(BOXES[m], chosen.as_deref()).unwrap();
                let expected: Vec<Uid> = model[m]
                    .msgs
                    .iter()
                    .filter(|(u, e)| e.0 & 8 != 0 && chosen.as_ref().is_none_or(|c| c.contains(u)))
                    .map(|(u, _)| *u)
                    .collect();
                assert_eq!(gone, expected);
                for u in &gone {
                    model[m].msgs.remove(u);
                }
                assert!(gone.is_empty() || highest(&store, BOXES[m]) > before);
            }
            Op::Copy(a, b, picks) | Op::Move(a, b, picks) => {
                let uids = pick(&model[a], &picks);
                let out = if moving {
                    store.move_messages(BOXES[a], BOXES[b], &uids).unwrap()
                } else {
                    store.copy(BOXES[a], BOXES[b], &uids).unwrap()
                };
                let mut pairs = Vec::new();
                for u in &uids {
                    let e = model[a].msgs[u].clone();
                    let nu = model[b].next;
                    model[b].next = nu.next();
                    model[b].msgs.insert(nu, e);
                    pairs.push((*u, nu));
                }
                if moving {
                    for u in &uids {
                        model[a].msgs.remove(u);
                    }
                }
                assert_eq!(out.pairs, pairs);
            }
        }
        compare(&store, &model);
    }
    assert_eq!(store.check().unwrap(), vec![]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn random_operations_keep_index_equal_to_model(ops in proptest::collection::vec(op(), 1..24)) {
        run(ops);
    }
}
