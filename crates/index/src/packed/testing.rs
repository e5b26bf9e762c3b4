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
