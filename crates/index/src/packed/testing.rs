//! What the packed columns' tests share: a scratch env and a column in it.

use heed::types::Bytes;
use heed::WithoutTls;

use super::{Codec, Packed};

/// A fresh env in a folder of the test's own (dropped with the folder).
pub(crate) fn scratch() -> (tempfile::TempDir, heed::Env<WithoutTls>) {
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: a fresh folder of this test's own, opened once
    let env = unsafe {
        heed::EnvOpenOptions::new()
            .read_txn_without_tls()
            .max_dbs(1)
            .map_size(64 << 20)
            .open(dir.path())
    }
    .unwrap();
    (dir, env)
}

/// A packed column in `env`.
pub(crate) fn column<C: Codec>(env: &heed::Env<WithoutTls>) -> Packed<'_, C> {
    let db = env
        .create_databases_and_commit(env.write_txn().unwrap(), |dbo, w| {
            Ok::<_, heed::Error>(heed::CommitOrAbort::<_, ()>::Commit(
                dbo.create_database::<Bytes, Bytes>(w, Some("column"))?,
            ))
        })
        .unwrap()
        .unwrap_commit();
    Packed::new(db)
}

/// An operation of the model test.
#[derive(Debug, Clone)]
pub(crate) enum Op<I> {
    /// Stores these (UID, entry), sorted and deduplicated by UID first.
    Put(Vec<(u32, I)>),
    Remove(u32),
    Clear,
}

/// Every (uid, entry) of `mailbox`, owned.
pub(crate) fn all<C: Codec>(
    env: &heed::Env<WithoutTls>,
    col: &Packed<'_, C>,
    mailbox: u32,
) -> Vec<(u32, C::Item)> {
    let r = env.read_txn().unwrap();
    let mut out = Vec::new();
    col.for_each(&r, mailbox, 1..=u32::MAX, |u, e| {
        out.push((u, C::to_item(e)));
        Ok(std::ops::ControlFlow::Continue(()))
    })
    .unwrap();
    out
}

/// The model test of a packed column: whatever the order of puts, removals and
/// clearings in mailbox 7, the column reads back what a map given the same operations
/// holds, over the whole mailbox, over `lo..=lo + len` and one UID at a time (`probes`
/// too); its neighbours 6 and 8, holding `neighbours`, are never touched; and every
/// stored value passes `value_ok`.
pub(crate) fn reads_back_what_was_stored<C: Codec>(
    ops: Vec<Op<C::Item>>,
    (lo, len): (u32, u32),
    probes: &[u32],
    neighbours: [(u32, C::Item); 2],
    value_ok: impl Fn(&[u8]) -> bool,
) -> Result<(), proptest::test_runner::TestCaseError>
where
    C::Item: Clone + PartialEq + std::fmt::Debug,
{
    use proptest::{prop_assert, prop_assert_eq};
    let (_d, env) = scratch();
    let col: Packed<C> = column(&env);
    let mut model = std::collections::BTreeMap::new();
    let mut w = env.write_txn().unwrap();
    let [six, eight] = neighbours;
    col.put_many(&mut w, 6, [six.clone()]).unwrap();
    col.put_many(&mut w, 8, [eight.clone()]).unwrap();
    w.commit().unwrap();
    for op in ops {
        let mut w = env.write_txn().unwrap();
        match op {
            Op::Put(mut es) => {
                es.sort_by_key(|e| e.0);
                es.dedup_by_key(|e| e.0);
                col.put_many(&mut w, 7, es.clone()).unwrap();
                model.extend(es);
            }
            Op::Remove(uid) => {
                let was = col.remove(&mut w, 7, uid).unwrap();
                prop_assert_eq!(was, model.remove(&uid).is_some());
            }
            Op::Clear => {
                col.clear(&mut w, 7).unwrap();
                model.clear();
            }
        }
        w.commit().unwrap();
    }
    let want: Vec<_> = model.iter().map(|(&u, e)| (u, e.clone())).collect();
    prop_assert_eq!(all(&env, &col, 7), want);
    let hi = lo.saturating_add(len);
    let r = env.read_txn().unwrap();
    let mut got = Vec::new();
    col.for_each(&r, 7, lo..=hi, |u, e| {
        got.push((u, C::to_item(e)));
        Ok(std::ops::ControlFlow::Continue(()))
    })
    .unwrap();
    let want: Vec<_> = model.range(lo..=hi).map(|(&u, e)| (u, e.clone())).collect();
    prop_assert_eq!(got, want);
    for &uid in [lo, hi].iter().chain(probes) {
        let one = col.get(&r, 7, uid).unwrap().map(C::to_item);
        prop_assert_eq!(one.as_ref(), model.get(&uid));
    }
    prop_assert_eq!(all(&env, &col, 6), vec![six]);
    prop_assert_eq!(all(&env, &col, 8), vec![eight]);
    for item in col.db.iter(&r).unwrap() {
        let (_, v) = item.unwrap();
        prop_assert!(value_ok(v), "a value of {} bytes", v.len());
    }
    Ok(())
}
