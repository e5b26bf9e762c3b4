//! Login checks shared by every server that takes passwords (IMAP, the postfix SASL
//! socket): failed-login penalties per client address ([`Penalties`]), the bound on password
//! checks running at once ([`KdfSlots`]), and [`LoginGate::check`], which puts them around
//! one password check so that every server applies them alike.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

/// Failed logins per IP address and the delay they earn: 0 after none, then 250 ms
/// doubling per failure up to 15 s (Dovecot's auth_failure_delay is a flat 2 s; a growing
/// delay slows a brute force from one address more while a typo costs little). Entries are
/// forgotten after 10 quiet minutes.
///
/// Failures are counted per address and, within it, per login name they were for; the
/// delay follows all failures of the address. A success clears only the failures for that
/// user at that address: an attacker who owns one account cannot wipe its guesses against
/// another by logging in to its own between them (issue 15 #31). An address keeps at most
/// [`PENALTY_NAMES`] names (a keyed hash each); failures for further names count for the
/// address and are cleared by no success.
///
/// An IPv6 client is counted by its /64 (one host usually owns a whole /64, so counting
/// single addresses would give it 2^64 fresh starts), an IPv4-mapped IPv6 address as the
/// IPv4 address. The table holds at most [`PENALTY_TABLE_MAX`] entries: when a guesser
/// spread over more addresses than that fills it with recent failures, the older half is
/// dropped, so its memory stays bounded (about 25 MB) whatever the number of addresses.
#[derive(Default)]
pub struct Penalties {
    table: Mutex<HashMap<IpAddr, AddressFailures>>,
    /// Keys the login-name hashes (random per process, so names cannot be picked to
    /// collide with a victim's).
    names: std::collections::hash_map::RandomState,
}

/// The failed logins of one address (see [`Penalties`]).
struct AddressFailures {
    /// (hash of the folded login name, failures).
    by_name: Vec<(u64, u32)>,
    /// Failures for names past [`PENALTY_NAMES`].
    unnamed: u32,
    /// The last failure.
    at: Instant,
}

impl AddressFailures {
    fn total(&self) -> u32 {
        self.by_name
            .iter()
            .fold(self.unnamed, |n, &(_, k)| n.saturating_add(k))
    }
}

const PENALTY_MAX: Duration = Duration::from_secs(15);
const PENALTY_FORGET: Duration = Duration::from_secs(600);
const PENALTY_TABLE_MAX: usize = 100_000;
const PENALTY_NAMES: usize = 16;

impl Penalties {
    /// The delay a login from `ip` waits before its password is checked.
    pub fn delay(&self, ip: IpAddr) -> Duration {
        let table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        match table.get(&penalty_key(ip)) {
            Some(e) if e.at.elapsed() < PENALTY_FORGET && e.total() > 0 => {
                let ms = 250u64.saturating_mul(1 << (e.total() - 1).min(10));
                Duration::from_millis(ms).min(PENALTY_MAX)
            }
            _ => Duration::ZERO,
        }
    }

    fn name_key(&self, login: &str) -> u64 {
        use std::hash::BuildHasher;
        self.names.hash_one(login.to_ascii_lowercase())
    }

    /// Records a failed login from `ip` for the name `login`.
    pub fn failed(&self, ip: IpAddr, login: &str) {
        let name = self.name_key(login);
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if table.len() >= PENALTY_TABLE_MAX {
            table.retain(|_, e| e.at.elapsed() < PENALTY_FORGET);
        }
        if table.len() >= PENALTY_TABLE_MAX {
            // all recent: keep the newer half (the median time splits them)
            let mut times: Vec<Instant> = table.values().map(|e| e.at).collect();
            let mid = times.len() / 2;
            let (_, &mut cut, _) = times.select_nth_unstable(mid);
            table.retain(|_, e| e.at > cut);
        }
        let e = table
            .entry(penalty_key(ip))
            .or_insert_with(|| AddressFailures {
                by_name: Vec::new(),
                unnamed: 0,
                at: Instant::now(),
            });
        if e.at.elapsed() >= PENALTY_FORGET {
            e.by_name.clear();
            e.unnamed = 0;
        }
        if let Some((_, n)) = e.by_name.iter_mut().find(|(k, _)| *k == name) {
            *n = n.saturating_add(1);
        } else if e.by_name.len() < PENALTY_NAMES {
            e.by_name.push((name, 1));
        } else {
            e.unnamed = e.unnamed.saturating_add(1);
        }
        e.at = Instant::now();
    }

    /// Records a successful login from `ip` by the names in `logins` (the name the
    /// client gave and the user it resolved to): clears the failures for those names
    /// at that address, and nothing else.
    pub fn succeeded(&self, ip: IpAddr, logins: &[&str]) {
        let names: Vec<u64> = logins.iter().map(|l| self.name_key(l)).collect();
        let key = penalty_key(ip);
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = table.get_mut(&key) {
            e.by_name.retain(|(k, _)| !names.contains(k));
            if e.total() == 0 {
                table.remove(&key);
            }
        }
    }
}

/// At most half the password-check slots for one address (one at least): many logins
/// from one address (an IPv6 /64) wait for each other, not for every login of everyone
/// (issue 15 #23: six SHA-crypt checks of long passwords from one address held both
/// slots, and a login from elsewhere waited 31.7 s).
pub struct KdfSlots {
    all: Semaphore,
    per_address: usize,
    busy: Mutex<HashMap<IpAddr, Arc<Semaphore>>>,
}

/// A password-check slot, given back on drop.
pub struct KdfPermit<'a> {
    _all: tokio::sync::SemaphorePermit<'a>,
    _address: AddressSlot<'a>,
}

/// The per-address semaphore a check holds or waits on. Its table entry goes when the
/// last holder or waiter drops (a session dropped while waiting too).
struct AddressSlot<'a> {
    slots: &'a KdfSlots,
    key: IpAddr,
    sem: Arc<Semaphore>,
    holds: bool,
}

impl Drop for AddressSlot<'_> {
    fn drop(&mut self) {
        if self.holds {
            self.sem.add_permits(1);
        }
        let mut busy = self.slots.busy.lock().unwrap_or_else(|p| p.into_inner());
        // the table's reference and ours: nobody else holds or waits
        if busy
            .get(&self.key)
            .is_some_and(|s| Arc::strong_count(s) == 2)
        {
            busy.remove(&self.key);
        }
    }
}

impl KdfSlots {
    /// `total` checks at once, at most half of them (one at least) from one address.
    pub fn new(total: usize) -> KdfSlots {
        let total = total.max(1);
        KdfSlots {
            all: Semaphore::new(total),
            per_address: (total / 2).max(1),
            busy: Mutex::default(),
        }
    }

    /// Waits for a slot of `ip`'s address, then for one of all.
    pub async fn acquire(&self, ip: IpAddr) -> Result<KdfPermit<'_>, tokio::sync::AcquireError> {
        let key = penalty_key(ip);
        let sem = {
            let mut busy = self.busy.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(
                busy.entry(key)
                    .or_insert_with(|| Arc::new(Semaphore::new(self.per_address))),
            )
        };
        let mut address = AddressSlot {
            slots: self,
            key,
            sem,
            holds: false,
        };
        address.sem.acquire().await?.forget();
        address.holds = true;
        let all = self.all.acquire().await?;
        Ok(KdfPermit {
            _all: all,
            _address: address,
        })
    }

    /// Addresses with a check running or waiting (for tests).
    pub fn addresses(&self) -> usize {
        self.busy.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// What a failed login and a connection slot are counted against, and what one client's
/// share of the password checks is: the IPv4 address, or the /64 of an IPv6 one (an
/// IPv4-mapped IPv6 address as the IPv4 address).
pub fn penalty_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// Longest password checked, in bytes (Dovecot's limit for a SASL message is 8 KiB; no
/// real password comes near 1 KiB). A longer one fails like a wrong password, unhashed.
pub const MAX_PASSWORD_LEN: usize = 1024;

/// The penalties and password-check slots of one process, shared by the IMAP server and
/// the postfix SASL socket, so that guesses over SMTP AUTH and IMAP count together.
pub struct LoginGate {
    /// Failed-login penalties per client address.
    pub penalties: Penalties,
    /// Bounds concurrent KDF work, in all and per address.
    pub kdf: KdfSlots,
}

/// What [`LoginGate::check`] found.
#[derive(Debug)]
pub enum Verdict<U, E> {
    /// The password matches: the user.
    Accepted(U),
    /// Wrong password, no such user, a password too long, a user not allowed from there:
    /// all alike, and the address earned a penalty.
    Refused,
    /// The directory could not be asked (no penalty: the client did nothing wrong).
    Unavailable(E),
    /// The check itself failed (its blocking task panicked).
    Internal(String),
}

impl LoginGate {
    /// `kdf_permits` password checks at once (see [`KdfSlots::new`]), no penalties yet.
    pub fn new(kdf_permits: usize) -> LoginGate {
        LoginGate {
            penalties: Penalties::default(),
            kdf: KdfSlots::new(kdf_permits),
        }
    }

    /// Checks `login`'s `password` from `ip`: waits the address's penalty, refuses a
    /// password over [`MAX_PASSWORD_LEN`] unhashed (SHA-crypt's cost grows with the square
    /// of the length; issue 15 #23: 65,000 bytes cost 10.7 s of CPU), runs `verify` (which
    /// blocks: a KDF, a database query) on the blocking pool holding a KDF slot, and books
    /// a failure against the address or clears the failures of the login name and of the
    /// user's `name` at that address.
    pub async fn check<U, E>(
        &self,
        ip: IpAddr,
        login: &str,
        password: Vec<u8>,
        verify: impl FnOnce(Vec<u8>) -> Result<Option<U>, E> + Send + 'static,
        name: impl Fn(&U) -> &str,
    ) -> Verdict<U, E>
    where
        U: Send + 'static,
        E: Send + 'static,
    {
        let delay = self.penalties.delay(ip);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let found = if password.len() > MAX_PASSWORD_LEN {
            Ok(None)
        } else {
            let _permit = match self.kdf.acquire(ip).await {
                Ok(p) => p,
                Err(e) => return Verdict::Internal(format!("KDF semaphore: {e}")),
            };
            match tokio::task::spawn_blocking(move || verify(password)).await {
                Ok(r) => r,
                Err(e) => return Verdict::Internal(format!("blocking task failed: {e}")),
            }
        };
        match found {
            Err(e) => Verdict::Unavailable(e),
            Ok(None) => {
                self.penalties.failed(ip, login);
                Verdict::Refused
            }
            Ok(Some(user)) => {
                self.penalties.succeeded(ip, &[login, name(&user)]);
                Verdict::Accepted(user)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn penalty_grows_per_address_and_clears_on_success() {
        let p = Penalties::default();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        assert_eq!(p.delay(a), Duration::ZERO);
        p.failed(a, "alice");
        assert_eq!(p.delay(a), Duration::from_millis(250));
        p.failed(a, "alice");
        p.failed(a, "Alice");
        assert_eq!(p.delay(a), Duration::from_millis(1000));
        for _ in 0..20 {
            p.failed(a, "alice");
        }
        assert_eq!(p.delay(a), PENALTY_MAX);
        assert_eq!(p.delay(b), Duration::ZERO);
        p.succeeded(a, &["ALICE"]);
        assert_eq!(p.delay(a), Duration::ZERO);
        assert!(p.table.lock().unwrap().is_empty());
    }

    #[test]
    fn an_ipv6_host_is_counted_by_its_64_and_a_mapped_address_as_ipv4() {
        let p = Penalties::default();
        let one: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let same64: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let other64: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        p.failed(one, "x");
        p.failed(same64, "x");
        assert_eq!(p.delay(one), Duration::from_millis(500));
        assert_eq!(p.delay(other64), Duration::ZERO);
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        p.failed(mapped, "x");
        assert_eq!(p.delay(v4), Duration::from_millis(250));
    }

    #[test]
    fn the_table_stays_bounded_under_guesses_from_more_addresses_than_it_holds() {
        let p = Penalties::default();
        let n = PENALTY_TABLE_MAX as u32 * 5 / 2;
        for i in 0..n {
            p.failed(IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i)), "x");
        }
        let len = p.table.lock().unwrap().len();
        assert!(len <= PENALTY_TABLE_MAX, "{len}");
        // the newest guesser is still slowed
        let last = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + n - 1));
        assert_eq!(p.delay(last), Duration::from_millis(250));
    }

    #[test]
    fn a_success_clears_only_that_users_failures_at_that_address() {
        let p = Penalties::default();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        // guesses against bob, the attacker's own login as alice in between
        p.failed(a, "bob");
        p.failed(a, "bob");
        p.succeeded(a, &["alice", "alice@example.org"]);
        assert_eq!(p.delay(a), Duration::from_millis(500));
        // bob's success elsewhere clears nothing here
        p.succeeded(b, &["bob"]);
        assert_eq!(p.delay(a), Duration::from_millis(500));
        // failures for another name count for the address, bob's success clears bob's
        p.failed(a, "carol");
        assert_eq!(p.delay(a), Duration::from_millis(1000));
        p.succeeded(a, &["bob"]);
        assert_eq!(p.delay(a), Duration::from_millis(250));
        // names past the per-address bound count, and no success clears them
        for i in 0..PENALTY_NAMES + 3 {
            p.failed(b, &format!("user{i}"));
        }
        for i in 0..PENALTY_NAMES + 3 {
            p.succeeded(b, &[&format!("user{i}")]);
        }
        assert_eq!(p.delay(b), Duration::from_millis(1000));
    }

    #[tokio::test]
    async fn one_address_gets_at_most_half_the_password_checks() {
        let slots = KdfSlots::new(4);
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let same64: IpAddr = "2001:db8:1:2::99".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let first = slots.acquire(a).await.unwrap();
        let second = slots.acquire(same64).await.unwrap();
        // a third from that /64 waits, though two of the four slots are free
        let third = slots.acquire(a);
        tokio::pin!(third);
        assert!(futures_poll_once(third.as_mut()).await.is_none());
        // another address is served at once
        let other = slots.acquire(b).await.unwrap();
        drop(first);
        let third = third.await.unwrap();
        drop((second, third, other));
        assert_eq!(
            slots.addresses(),
            0,
            "entries of idle addresses are dropped"
        );
        // a waiter that gives up leaves nothing behind either
        let held = [
            slots.acquire(a).await.unwrap(),
            slots.acquire(a).await.unwrap(),
        ];
        let mut waiting = Box::pin(slots.acquire(a));
        assert!(futures_poll_once(waiting.as_mut()).await.is_none());
        drop(held);
        assert_eq!(slots.addresses(), 1);
        drop(waiting);
        assert_eq!(slots.addresses(), 0);
    }

    /// Polls a future once: `Some` if it is ready.
    async fn futures_poll_once<F: std::future::Future + Unpin>(f: F) -> Option<F::Output> {
        let mut f = f;
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut f).poll(cx) {
                std::task::Poll::Ready(v) => Some(v),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }
}
