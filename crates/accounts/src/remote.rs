//! What the directories reached over the network (SQL, LDAP) share: whether the server
//! was found unreachable a moment ago, so that lookups fail at once for [`RETRY_AFTER`]
//! instead of each waiting the query timeout, and which login names are worth a query.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::userdb::Unavailable;

/// After a lookup found the server unreachable, lookups fail at once for this long instead
/// of each waiting `query_timeout` (the next one after it tries the server again).
pub(crate) const RETRY_AFTER: Duration = Duration::from_secs(1);

/// When a lookup last found the server unreachable (`None`: it answered since).
#[derive(Debug)]
pub(crate) struct Reachability {
    /// `[auth.sql]` or `[auth.ldap]`, for the log lines.
    section: &'static str,
    down_since: Mutex<Option<Instant>>,
}

impl Reachability {
    pub(crate) fn new(section: &'static str) -> Reachability {
        Reachability {
            section,
            down_since: Mutex::new(None),
        }
    }

    /// `Err` while the server was found unreachable less than [`RETRY_AFTER`] ago.
    pub(crate) fn check(&self) -> Result<(), Unavailable> {
        if let Some(t) = *self.down_since.lock().unwrap_or_else(|p| p.into_inner()) {
            if t.elapsed() < RETRY_AFTER {
                // a server that just failed is not waited for again by every lookup
                return Err(Unavailable(format!(
                    "{}: the server was unreachable {} ms ago",
                    self.section,
                    t.elapsed().as_millis()
                )));
            }
        }
        Ok(())
    }

    /// Notes a lookup's outcome: `unreachable` when the server could not be reached (not
    /// when it answered with an error); logs the changes of state.
    pub(crate) fn record<T>(&self, unreachable: bool, answer: &Result<T, Unavailable>) {
        let mut down = self.down_since.lock().unwrap_or_else(|p| p.into_inner());
        match (unreachable, down.is_some()) {
            (true, false) => {
                let error = answer.as_ref().err().map_or("", |e| e.0.as_str());
                tracing::error!(
                    error,
                    "{}: server unreachable; lookups fail until it is back",
                    self.section
                );
            }
            (false, true) => tracing::info!("{}: server reachable again", self.section),
            _ => {}
        }
        *down = unreachable.then(Instant::now);
    }
}

/// A name that could be a user's: not empty, not over the longest name, no control
/// characters (PostgreSQL refuses a NUL in text; such a login names nobody).
pub(crate) fn acceptable_name(login: &str) -> bool {
    !login.is_empty()
        && login.len() <= maildex_auth::MAX_NAME_LEN
        && !login.chars().any(char::is_control)
}
