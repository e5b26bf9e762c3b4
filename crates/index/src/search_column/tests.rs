use std::ops::ControlFlow;

use proptest::prelude::*;

use super::*;
use crate::packed::testing::{all, column, reads_back_what_was_stored, scratch, Op};
use crate::schema::raw_msg_key;
use crate::IndexError;

/// A record of `len` bytes that names its UID.
fn rec(uid: u32, len: usize) -> Vec<u8> {
    let mut v = uid.to_be_bytes().to_vec();
    v.resize(len.max(4), (uid % 251) as u8);
    v
}

/// Whether a stored value holds a single record.
fn one_record(v: &[u8]) -> bool {
    let mut at = 0;
    let _step = crate::schema::varint(v, &mut at);
    let len = crate::schema::varint(v, &mut at).unwrap_or(0) as usize;
    at + len == v.len()
}

fn op() -> impl Strategy<Value = Op<Vec<u8>>> {
    // lengths mostly of a search record's size, some far larger than a value
    let len = prop_oneof![8 => 0usize..600, 1 => 600usize..9000];
    let entry = (1u32..2000, len).prop_map(|(u, l)| (u, rec(u, l)));
    prop_oneof![
        6 => prop::collection::vec(entry, 1..200).prop_map(Op::Put),
        3 => (1u32..2000).prop_map(Op::Remove),
        1 => Just(Op::Clear),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The model test ([`reads_back_what_was_stored`]); no value of two or more records
    /// outgrows one overflow page.
    #[test]
    fn the_column_reads_back_what_was_stored(ops in prop::collection::vec(op(), 1..30),
                                              lo in 1u32..2000, len in 0u32..2000) {
        reads_back_what_was_stored::<RecordCodec>(
            ops,
            (lo, len),
            &[1, 1999],
            [(u32::MAX, rec(1, 10)), (1, rec(2, 5000))],
            |v| v.len() <= RecordCodec::MAX_VALUE || one_record(v),
        )?;
    }
}

#[test]
fn deliveries_one_at_a_time_fill_values_to_about_a_page() {
    let (_d, env) = scratch();
    let col: SearchColumn = column(&env);
    for uid in 1..=1000u32 {
        let mut w = env.write_txn().unwrap();
        col.put_many(
            &mut w,
            1,
            [(uid, rec(uid, 200 + (uid as usize * 13) % 200))],
        )
        .unwrap();
        w.commit().unwrap();
    }
    let r = env.read_txn().unwrap();
    let sizes: Vec<usize> = col
        .db
        .iter(&r)
        .unwrap()
        .map(|i| i.unwrap().1.len())
        .collect();
    // about 300 bytes a record: 13 or so to a value, every closed value nearly full
    assert!((60..=90).contains(&sizes.len()), "{} values", sizes.len());
    let closed = &sizes[..sizes.len() - 1];
    assert!(
        closed.iter().all(|&s| (3600..=4080).contains(&s)),
        "{closed:?}"
    );
    drop(r);
    assert_eq!(all(&env, &col, 1).len(), 1000);
}

#[test]
fn a_damaged_value_is_an_error_not_a_wrong_answer() {
    let (_d, env) = scratch();
    let col: SearchColumn = column(&env);
    let mut w = env.write_txn().unwrap();
    col.put_many(&mut w, 1, [(1, rec(1, 40)), (2, rec(2, 40))])
        .unwrap();
    let key = raw_msg_key(1, 1);
    let mut v = col.db.get(&w, &key[..]).unwrap().unwrap().to_vec();
    // the second record's length now runs past the value's end
    v.truncate(v.len() - 1);
    col.db.put(&mut w, &key[..], &v).unwrap();
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    let res = col.for_each(&r, 1, 1..=2, |_, _| Ok(ControlFlow::Continue(())));
    assert!(matches!(res, Err(IndexError::Corrupt(_))), "{res:?}");
    assert!(matches!(col.get(&r, 1, 2), Err(IndexError::Corrupt(_))));
}

/// Records that all grow (a learned header field fills every record of a mailbox) are
/// written back as values filled as far as appends fill them, not as halves of about
/// 2 KiB that would each take a whole overflow page.
#[test]
fn records_that_all_grow_keep_the_pages_full() {
    let (_d, env) = scratch();
    let col: SearchColumn = column(&env);
    for uid in 1..=1000u32 {
        let mut w = env.write_txn().unwrap();
        col.put_many(&mut w, 1, [(uid, rec(uid, 250))]).unwrap();
        w.commit().unwrap();
    }
    let mut w = env.write_txn().unwrap();
    col.put_many(&mut w, 1, (1..=1000u32).map(|u| (u, rec(u, 300))))
        .unwrap();
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    let st = col.db.stat(&r).unwrap();
    let pages = st.leaf_pages + st.overflow_pages;
    let bytes: usize = col.db.iter(&r).unwrap().map(|i| i.unwrap().1.len()).sum();
    // halves would fill about 56%
    assert!(
        bytes * 100 / (pages * 4096) >= 75,
        "{bytes} bytes of values on {pages} pages"
    );
    drop(r);
    assert!(all(&env, &col, 1).iter().all(|(u, d)| *d == rec(*u, 300)));
}
