//! The per-process cache of open stores (see [`crate::Accounts::store`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use maildex_store::UserStore;

/// How long a store nobody holds stays open after its last use.
pub(crate) const STORE_IDLE: std::time::Duration = std::time::Duration::from_secs(60);

/// Most stores kept open that nobody holds: an eighth of the descriptors the process may
/// open (`RLIMIT_NOFILE`, 2,500 at 20,000), at least 100. Each keeps four descriptors
/// (LMDB's data file twice and its lock file, the index lock), so idle stores take at most
/// half of them; without a cap, 10,000 users delivered to within [`STORE_IDLE`] (the seed
/// benchmark, a mailing-list fan-out) ran the daemon out of descriptors and every later
/// delivery got 451. A store closed early costs its user's next delivery an env open.
pub(crate) fn max_idle_open() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the pointer, valid and sized for it
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX)
    } else {
        1_024
    };
    (soft / 8).clamp(100, 100_000)
}

/// Open stores by folded user name, with when each was last handed out.
pub(crate) struct Stores {
    pub(crate) open: HashMap<String, (Arc<UserStore>, std::time::Instant)>,
    pub(crate) swept: Option<std::time::Instant>,
    /// [`max_idle_open`] (smaller in tests).
    pub(crate) max_idle: usize,
    /// A gate per user whose store is being opened ([`open_once`]).
    pub(crate) opening: HashMap<String, Arc<Mutex<()>>>,
    /// Called with each store this cache opens ([`crate::Accounts::on_store_opened`]).
    pub(crate) on_open: Option<StoreOpened>,
}

/// What [`crate::Accounts::on_store_opened`] registers: called with each store the cache
/// opens, once per open, outside the cache's lock.
pub type StoreOpened = Arc<dyn Fn(&Arc<UserStore>) + Send + Sync>;

impl Default for Stores {
    fn default() -> Self {
        Stores {
            open: HashMap::new(),
            swept: None,
            max_idle: max_idle_open(),
            opening: HashMap::new(),
            on_open: None,
        }
    }
}

impl Stores {
    /// Closes the stores only this cache holds that were not used for [`STORE_IDLE`]
    /// (at most every [`STORE_IDLE`] / 2). A store held by a session or a delivery stays:
    /// one store per user per process, and the count cannot grow while we hold the lock,
    /// since new holders get their clone here. The stores are returned, for the caller to
    /// drop (close) once it has let go of the lock.
    #[must_use = "the closed stores are dropped by the caller, outside the lock"]
    pub(crate) fn sweep(&mut self, now: std::time::Instant) -> Vec<Arc<UserStore>> {
        let mut closed = Vec::new();
        if self.open.len() >= self.max_idle {
            closed = self.close_least_recent();
        }
        if self
            .swept
            .is_some_and(|t| now.duration_since(t) < STORE_IDLE / 2)
        {
            return closed;
        }
        self.swept = Some(now);
        let idle: Vec<String> = self
            .open
            .iter()
            .filter(|(_, (store, used))| {
                Arc::strong_count(store) == 1 && now.duration_since(*used) >= STORE_IDLE
            })
            .map(|(name, _)| name.clone())
            .collect();
        closed.extend(
            idle.iter()
                .filter_map(|n| self.open.remove(n))
                .map(|(s, _)| s),
        );
        closed
    }

    /// Closes the least recently used stores nobody holds, down to half of `max_idle`
    /// (so the sort is paid once per `max_idle / 2` first uses, not at each).
    fn close_least_recent(&mut self) -> Vec<Arc<UserStore>> {
        let mut idle: Vec<(std::time::Instant, String)> = self
            .open
            .iter()
            .filter(|(_, (store, _))| Arc::strong_count(store) == 1)
            .map(|(name, (_, used))| (*used, name.clone()))
            .collect();
        idle.sort_unstable();
        let excess = self.open.len().saturating_sub(self.max_idle / 2);
        idle.into_iter()
            .take(excess)
            .filter_map(|(_, name)| self.open.remove(&name))
            .map(|(store, _)| store)
            .collect()
    }
}

/// The open store of `key`, else the one `open` makes, kept in `stores`. `open` runs
/// outside the lock of all stores (a new user's Maildir, LMDB env and folders take a dozen
/// or more fsyncs, and first uses of other users go on meanwhile), behind a gate of its
/// own user, so that a user still gets one store per process: a second first use of the
/// same user waits at the gate and then finds the store.
pub(crate) fn open_once<E>(
    stores: &Mutex<Stores>,
    key: &str,
    open: impl FnOnce() -> Result<UserStore, E>,
) -> Result<Arc<UserStore>, E> {
    let lock = || stores.lock().unwrap_or_else(|p| p.into_inner());
    let found = |s: &mut Stores| {
        let now = std::time::Instant::now();
        s.open.get_mut(key).map(|(store, used)| {
            *used = now;
            Arc::clone(store)
        })
    };
    let (gate, closed) = {
        let mut s = lock();
        let closed = s.sweep(std::time::Instant::now());
        if let Some(store) = found(&mut s) {
            drop(s);
            drop(closed);
            return Ok(store);
        }
        (
            Arc::clone(s.opening.entry(key.to_owned()).or_default()),
            closed,
        )
    };
    // LMDB envs closed here, not under the lock every first use takes
    drop(closed);
    let _turn = gate.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(store) = found(&mut lock()) {
        return Ok(store);
    }
    let opened = open().map(Arc::new);
    let mut s = lock();
    // the gate goes when nobody else waits at it (the map's and ours are the only ones)
    if s.opening
        .get(key)
        .is_some_and(|g| Arc::strong_count(g) <= 2)
    {
        s.opening.remove(key);
    }
    let store = opened?;
    s.open.insert(
        key.to_owned(),
        (Arc::clone(&store), std::time::Instant::now()),
    );
    let on_open = s.on_open.clone();
    drop(s);
    if let Some(f) = on_open {
        f(&store);
    }
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Accounts;
    use maildex_config::Config;
    use std::sync::Arc;
    use std::time::Duration;

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

    /// Accounts on the users file already in `dir`, no default folders.
    fn accounts_reloaded(dir: &std::path::Path) -> Arc<Accounts> {
        let text = format!(
            "[storage]\nmail_location = \"{d}/mail/%u\"\nindex_root = \"{d}/index/%u\"\n\
             fsync = false\n[mailboxes]\n[auth]\nusers_file = \"{d}/users\"\n",
            d = dir.display()
        );
        let config = Config::from_toml_str(&text, &dir.join("maildex.toml")).unwrap();
        Accounts::load(config).unwrap()
    }

    #[test]
    fn stores_nobody_holds_are_capped_so_many_users_in_a_minute_do_not_exhaust_files() {
        // 10,000 users each delivered to once within a minute kept 10,000 LMDB envs (four
        // descriptors each) open until the sweep: EMFILE, and 451 for every later delivery
        let dir = tempfile::tempdir().unwrap();
        let names: Vec<String> = (0..12).map(|i| format!("u{i}")).collect();
        let users: String = names.iter().map(|n| format!("{n}:{{PLAIN}}pw\n")).collect();
        std::fs::write(dir.path().join("users"), users).unwrap();
        let a = accounts_reloaded(dir.path());
        a.stores.lock().unwrap().max_idle = 4;
        let held = a.store(&a.lookup("u0").unwrap().unwrap()).unwrap();
        for n in &names[1..] {
            a.store(&a.lookup(n).unwrap().unwrap()).unwrap();
        }
        let stores = a.stores.lock().unwrap();
        assert!(
            stores.open.len() <= 4 + 1,
            "{} stores open",
            stores.open.len()
        );
        // the held one stays, and the most recently used
        assert!(Arc::ptr_eq(&held, &stores.open["u0"].0));
        assert!(stores.open.contains_key("u11"));
    }

    #[test]
    fn a_first_use_does_not_wait_for_another_users_store_being_opened() {
        // opening a new user's store makes its Maildir, LMDB env and folders (a dozen or
        // more fsyncs); under the one lock of all stores, first deliveries to many users
        // ran one at a time
        let dir = tempfile::tempdir().unwrap();
        let stores = Mutex::new(Stores::default());
        let open = |name: &str| {
            let d = dir.path();
            UserStore::open_upgrading(
                &d.join("mail").join(name),
                &d.join("index").join(name),
                maildex_store::StoreOptions::default(),
            )
        };
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (fast_tx, fast_rx) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|s| {
            let (stores, open) = (&stores, &open);
            let slow = s.spawn(move || {
                open_once(stores, "slow", || {
                    started_tx.send(()).unwrap();
                    let fast_done = fast_rx.recv_timeout(Duration::from_secs(5)).is_ok();
                    open("slow").map(|st| (st, fast_done)).map(|(st, done)| {
                        assert!(done, "the other user's open waited for this one");
                        st
                    })
                })
            });
            started_rx.recv().unwrap();
            open_once(stores, "fast", || open("fast")).unwrap();
            let _ = fast_tx.send(());
            slow.join().unwrap().unwrap();
        });
        assert_eq!(stores.lock().unwrap().open.len(), 2);
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
        drop(a.stores.lock().unwrap().sweep(later));
        assert!(Arc::ptr_eq(&first, &a.store(&alice).unwrap()));
        // nobody holds it: closed by the next sweep a while later, reopened on demand
        drop(first);
        let mut stores = a.stores.lock().unwrap();
        stores.swept = None;
        drop(stores.sweep(later));
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
