//! The per-process cache of open stores (see [`crate::Accounts::store`]).

use std::collections::HashMap;
use std::sync::Arc;

use maildex_store::UserStore;

/// How long a store nobody holds stays open after its last use.
pub(crate) const STORE_IDLE: std::time::Duration = std::time::Duration::from_secs(60);

/// Open stores by folded user name, with when each was last handed out.
#[derive(Default)]
pub(crate) struct Stores {
    pub(crate) open: HashMap<String, (Arc<UserStore>, std::time::Instant)>,
    pub(crate) swept: Option<std::time::Instant>,
}

impl Stores {
    /// Closes the stores only this cache holds that were not used for [`STORE_IDLE`]
    /// (at most every [`STORE_IDLE`] / 2). A store held by a session or a delivery stays:
    /// one store per user per process, and the count cannot grow while we hold the lock,
    /// since new holders get their clone here.
    pub(crate) fn sweep(&mut self, now: std::time::Instant) {
        if self
            .swept
            .is_some_and(|t| now.duration_since(t) < STORE_IDLE / 2)
        {
            return;
        }
        self.swept = Some(now);
        self.open.retain(|_, (store, used)| {
            Arc::strong_count(store) > 1 || now.duration_since(*used) < STORE_IDLE
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Accounts;
    use maildex_config::Config;
    use std::sync::Arc;

    fn accounts(dir: &std::path::Path) -> Arc<Accounts> {
        std::fs::write(dir.join("users"), "alice:{PLAIN}pw\n").unwrap();
        let text = format!(
            "[storage]\nmail_location = \"{d}/mail/%u\"\nindex_root = \"{d}/index/%u\"\n\
             fsync = false\n[auth]\nusers_file = \"{d}/users\"\n",
            d = dir.display()
        );
        let config = Config::from_toml_str(&text, &dir.join("maildex.toml")).unwrap();
        Accounts::load(config).unwrap()
    }

    #[test]
    fn a_store_nobody_holds_is_closed_after_a_while_unused_and_a_held_one_stays() {
        let dir = tempfile::tempdir().unwrap();
        let a = accounts(dir.path());
        let alice = a.lookup("alice").unwrap().unwrap();
        let first = a.store(&alice).unwrap();
        let weak = Arc::downgrade(&first);
        // held by a session: one store, kept however long it is unused
        assert!(Arc::ptr_eq(&first, &a.store(&alice).unwrap()));
        let later = std::time::Instant::now() + STORE_IDLE * 2;
        a.stores.lock().unwrap().sweep(later);
        assert!(Arc::ptr_eq(&first, &a.store(&alice).unwrap()));
        // nobody holds it: closed by the next sweep a while later, reopened on demand
        drop(first);
        let mut stores = a.stores.lock().unwrap();
        stores.swept = None;
        stores.sweep(later);
        assert!(stores.open.is_empty());
        drop(stores);
        assert!(
            weak.upgrade().is_none(),
            "the store (and its LMDB env) is closed"
        );
        let again = a.store(&alice).unwrap();
        assert!(again
            .index()
            .read(|r| r.schema_version())
            .unwrap()
            .is_some());
    }
}
