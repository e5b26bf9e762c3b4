use std::ops::ControlFlow;

use proptest::prelude::*;

use heed::WithoutTls;

use super::*;
use crate::packed::testing::{reads_back_what_was_stored, scratch, Op};
use crate::packed::Codec;
use crate::schema::raw_msg_key;
use crate::IndexError;

fn column(env: &heed::Env<WithoutTls>) -> FlagColumn<'_> {
    crate::packed::testing::column(env)
}

/// A state whose size and date follow from its modseq: of any size, dates before and
/// after 1970, out of UID order.
fn st(flags: u8, keywords: u32, modseq: u64) -> FlagState {
    FlagState {
        flags,
        keywords,
        modseq: ModSeq(modseq),
        vsize: modseq % 3_000_000,
        internal_date: (modseq % 4_000_000_000) as i64 - 1_000_000_000,
    }
}

fn op() -> impl Strategy<Value = Op<FlagState>> {
    // UIDs from a small range so that puts land in, between and after segments
    let entry = (1u32..3000, any::<u8>(), any::<u32>(), 1u64..1 << 60)
        .prop_map(|(u, f, k, m)| (u, st(f, k, m)));
    prop_oneof![
        6 => prop::collection::vec(entry, 1..400).prop_map(Op::Put),
        3 => (1u32..3000).prop_map(Op::Remove),
        1 => Just(Op::Clear),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The model test ([`reads_back_what_was_stored`]); no value outgrows a leaf page's
    /// half.
    #[test]
    fn the_column_reads_back_what_was_stored(ops in prop::collection::vec(op(), 1..40),
                                              lo in 1u32..3000, len in 0u32..3000) {
        reads_back_what_was_stored::<FlagCodec>(
            ops,
            (lo, len),
            &[1, 2999],
            [(u32::MAX, st(1, 1, 1)), (1, st(2, 2, 2))],
            |v| v.len() <= 2 * FlagCodec::SEG_BYTES + 64,
        )?;
    }
}

#[test]
fn deliveries_one_at_a_time_fill_segments_and_start_new_ones() {
    let (_d, env) = scratch();
    let col = column(&env);
    for uid in 1..=1000u32 {
        let mut w = env.write_txn().unwrap();
        let modseq = 1_764_000_000_000_000 + u64::from(uid);
        col.put_many(&mut w, 1, [(uid, st(0, 0, modseq))]).unwrap();
        w.commit().unwrap();
    }
    let r = env.read_txn().unwrap();
    let segments = col.db.len(&r).unwrap();
    // 128 entries a segment (8 bytes each at most here)
    assert_eq!(segments, 8, "1,000 UIDs in {segments} segments");
    let mut total = 0;
    for item in col.db.iter(&r).unwrap() {
        total += item.unwrap().1.len();
    }
    // a modseq's and a date's distance from the segment's lowest, not the modseq (8
    // bytes) and the date (5) themselves
    assert!(total < 1000 * 9, "{total} bytes for 1,000 entries");
    drop(r);
    // a flag change is found where it was put, and stops a walk that breaks there
    let mut w = env.write_txn().unwrap();
    col.put_many(
        &mut w,
        1,
        [(500, st(flag_seen(), 3, 9_000_000_000_000_000))],
    )
    .unwrap();
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    assert_eq!(
        col.get(&r, 1, 500).unwrap(),
        Some(st(flag_seen(), 3, 9_000_000_000_000_000))
    );
    let mut seen = None;
    col.for_each(&r, 1, 1..=u32::MAX, |u, s| {
        if s.flags != 0 {
            seen = Some(u);
            return Ok(ControlFlow::Break(()));
        }
        Ok(ControlFlow::Continue(()))
    })
    .unwrap();
    assert_eq!(seen, Some(500));
}

fn flag_seen() -> u8 {
    crate::flag::SEEN
}

#[test]
fn a_damaged_value_is_an_error_not_a_wrong_answer() {
    let (_d, env) = scratch();
    let col = column(&env);
    let mut w = env.write_txn().unwrap();
    col.put_many(&mut w, 1, [(1, st(1, 0, 5)), (2, st(0, 0, 6))])
        .unwrap();
    let key = raw_msg_key(1, 1);
    let good = col.db.get(&w, &key[..]).unwrap().unwrap().to_vec();
    // cut inside the second entry; then a second entry at distance 0 (not ascending):
    // its step, flags, keywords, modseq, size and date take a byte each here
    let mut repeated = good.clone();
    repeated[good.len() - 6] = 0;
    for bad in [good[..good.len() - 1].to_vec(), repeated] {
        col.db.put(&mut w, &key[..], &bad).unwrap();
        w.commit().unwrap();
        let r = env.read_txn().unwrap();
        let res = col.for_each(&r, 1, 1..=10, |_, _| Ok(ControlFlow::Continue(())));
        assert!(matches!(res, Err(IndexError::Corrupt(_))), "{res:?}");
        drop(r);
        w = env.write_txn().unwrap();
    }
}
