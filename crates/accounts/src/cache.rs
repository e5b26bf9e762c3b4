//! A bounded cache of directory lookups with TTLs, as Dovecot's auth cache
//! (`auth_cache_size`, `auth_cache_ttl`, `auth_cache_negative_ttl`): a client that logs in
//! every minute costs neither a password hash nor a database round trip.
//!
//! A successful login is kept under the login name *and* a keyed SHA-256 of the password
//! (the key is random per process, so the cache holds nothing a stolen memory dump could
//! test guesses against offline without it), so only the same password hits; a wrong
//! password misses and is checked against the directory again, and is never cached. A
//! directory answer of "no such user" is kept for the negative TTL. A lookup that failed
//! (database down) is not kept.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::nets::AllowNets;
use crate::User;

/// What a key is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    /// A login that succeeded with the password whose digest is in the key.
    Login,
    /// A password lookup that found no user.
    NoPassUser,
    /// A user lookup (LMTP, deliver).
    User,
    /// An alias lookup in the directory (LMTP).
    Alias,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    kind: Kind,
    /// The login, ASCII-lower-cased (the directories compare names so).
    login: String,
    /// Keyed digest of the password (logins only).
    secret: Option<[u8; 32]>,
}

/// A successful login as kept.
#[derive(Debug, Clone)]
pub(crate) struct CachedLogin {
    pub(crate) user: User,
    pub(crate) allow_nets: Option<AllowNets>,
}

#[derive(Debug, Clone)]
enum Value {
    Login(CachedLogin),
    Absent,
    User(User),
    Targets(Vec<String>),
}

#[derive(Debug)]
struct Entry {
    value: Value,
    expires: Instant,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Cache {
    size: usize,
    ttl: Duration,
    negative_ttl: Duration,
    pepper: [u8; 32],
    map: Mutex<HashMap<Key, Entry>>,
}

/// A cache lookup's answer.
#[derive(Debug)]
pub(crate) enum Hit<T> {
    /// Found and fresh.
    Found(T),
    /// The directory said there is no such user.
    Absent,
    /// Not cached (or expired): ask the directory.
    Miss,
}

impl Cache {
    pub(crate) fn new(size: usize, ttl: Duration, negative_ttl: Duration) -> Cache {
        let mut pepper = [0u8; 32];
        rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut pepper);
        Cache {
            size,
            ttl,
            negative_ttl,
            pepper,
            map: Mutex::default(),
        }
    }

    fn secret(&self, login: &str, password: &[u8]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.pepper);
        h.update((login.len() as u64).to_le_bytes());
        h.update(login.as_bytes());
        h.update(password);
        h.finalize().into()
    }

    fn key(&self, kind: Kind, login: &str, password: Option<&[u8]>) -> Key {
        let login = login.to_ascii_lowercase();
        let secret = password.map(|p| self.secret(&login, p));
        Key {
            kind,
            login,
            secret,
        }
    }

    fn get(&self, key: &Key) -> Option<Value> {
        if self.size == 0 {
            return None;
        }
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let entry = map.get(key)?;
        if entry.expires <= Instant::now() {
            map.remove(key);
            return None;
        }
        Some(entry.value.clone())
    }

    fn put(&self, key: Key, value: Value) {
        if self.size == 0 {
            return;
        }
        let ttl = match value {
            Value::Absent => self.negative_ttl,
            _ => self.ttl,
        };
        if ttl.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= self.size && !map.contains_key(&key) {
            map.retain(|_, e| e.expires > now);
            if map.len() >= self.size {
                // still full: drop the tenth that expires first (the oldest)
                let mut by_expiry: Vec<(Instant, Key)> =
                    map.iter().map(|(k, e)| (e.expires, k.clone())).collect();
                by_expiry.sort_by_key(|(t, _)| *t);
                let drop = (self.size / 10).max(1);
                for (_, k) in by_expiry.into_iter().take(drop) {
                    map.remove(&k);
                }
            }
        }
        map.insert(
            key,
            Entry {
                value,
                expires: now + ttl,
            },
        );
    }

    /// A login with this password that succeeded, or a login name known not to exist.
    pub(crate) fn login(&self, login: &str, password: &[u8]) -> Hit<CachedLogin> {
        if let Some(Value::Login(l)) = self.get(&self.key(Kind::Login, login, Some(password))) {
            return Hit::Found(l);
        }
        if let Some(Value::Absent) = self.get(&self.key(Kind::NoPassUser, login, None)) {
            return Hit::Absent;
        }
        Hit::Miss
    }

    pub(crate) fn put_login(&self, login: &str, password: &[u8], ok: CachedLogin) {
        self.put(
            self.key(Kind::Login, login, Some(password)),
            Value::Login(ok),
        );
    }

    pub(crate) fn put_no_pass_user(&self, login: &str) {
        self.put(self.key(Kind::NoPassUser, login, None), Value::Absent);
    }

    /// A user lookup's cached answer.
    pub(crate) fn user(&self, login: &str) -> Hit<User> {
        match self.get(&self.key(Kind::User, login, None)) {
            Some(Value::User(u)) => Hit::Found(u),
            Some(Value::Absent) => Hit::Absent,
            _ => Hit::Miss,
        }
    }

    pub(crate) fn put_user(&self, login: &str, user: Option<User>) {
        let value = user.map_or(Value::Absent, Value::User);
        self.put(self.key(Kind::User, login, None), value);
    }

    /// An alias lookup's cached answer (`Absent`: not an alias).
    pub(crate) fn alias(&self, address: &str) -> Hit<Vec<String>> {
        match self.get(&self.key(Kind::Alias, address, None)) {
            Some(Value::Targets(t)) => Hit::Found(t),
            Some(Value::Absent) => Hit::Absent,
            _ => Hit::Miss,
        }
    }

    pub(crate) fn put_alias(&self, address: &str, targets: Option<Vec<String>>) {
        let value = targets.map_or(Value::Absent, Value::Targets);
        self.put(self.key(Kind::Alias, address, None), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str) -> User {
        User {
            name: name.into(),
            quota: None,
            owner: None,
        }
    }

    fn login(u: &str) -> CachedLogin {
        CachedLogin {
            user: user(u),
            allow_nets: None,
        }
    }

    #[test]
    fn a_login_hits_only_with_the_same_password_and_any_case_of_the_name() {
        let c = Cache::new(10, Duration::from_secs(60), Duration::from_secs(60));
        c.put_login("Alice", b"right", login("alice"));
        assert!(matches!(c.login("alice", b"right"), Hit::Found(l) if l.user.name == "alice"));
        assert!(matches!(c.login("ALICE", b"right"), Hit::Found(_)));
        assert!(matches!(c.login("alice", b"wrong"), Hit::Miss));
        assert!(matches!(c.login("alice", b"Right"), Hit::Miss));
        c.put_no_pass_user("nobody");
        assert!(matches!(c.login("nobody", b"x"), Hit::Absent));
    }

    #[test]
    fn entries_expire_and_the_size_is_bounded() {
        let c = Cache::new(10, Duration::ZERO, Duration::from_secs(60));
        c.put_user("a", Some(user("a")));
        assert!(matches!(c.user("a"), Hit::Miss), "a TTL of 0 keeps nothing");
        c.put_user("gone", None);
        assert!(matches!(c.user("gone"), Hit::Absent));

        let c = Cache::new(10, Duration::from_secs(60), Duration::from_secs(60));
        for i in 0..100 {
            c.put_user(&format!("u{i}"), Some(user(&format!("u{i}"))));
            assert!(c.map.lock().unwrap().len() <= 10);
        }
        assert!(matches!(c.user("u99"), Hit::Found(_)), "the newest stays");
        assert!(matches!(c.user("u0"), Hit::Miss), "the oldest went");

        let off = Cache::new(0, Duration::from_secs(60), Duration::from_secs(60));
        off.put_user("a", Some(user("a")));
        assert!(matches!(off.user("a"), Hit::Miss));
    }
}
