//! Storage quotas: the limit of a user (config default or Dovecot's per-user
//! `quota_rule` extra field) and the usage the index already counts.

use maildex_store::{StoreError, UserStore};

use crate::{Accounts, AccountsError, User};

/// Reads a per-user limit from users-file extra fields, as Dovecot's passwd-file
/// userdb carries it: `userdb_quota_rule=*:storage=100M` (or `quota_rule=...`).
///
/// Returns `Ok(None)` when the fields set no storage rule for `*` (the config default
/// applies), `Ok(Some(None))` for an explicit unlimited rule (`storage=0`, as in
/// Dovecot), `Ok(Some(Some(bytes)))` for a limit. Rules for single mailboxes and
/// `messages=` limits are not enforced (ignored). Sizes take Dovecot's units: `b`,
/// `k`, `M`, `G`, `T` (powers of 1024, any case, optional `B`/`iB`); `bytes=` is taken as
/// `storage=`.
pub(crate) fn rule_from_extra(extra: &[String]) -> Result<Option<Option<u64>>, String> {
    let mut found = None;
    for field in extra {
        let Some(value) = field
            .strip_prefix("userdb_quota_rule=")
            .or_else(|| field.strip_prefix("quota_rule="))
        else {
            continue;
        };
        let Some(rest) = value.strip_prefix("*:") else {
            continue; // a per-mailbox rule
        };
        for part in rest.split(':') {
            // `bytes=` is Dovecot's other name for the storage limit (LDAP schemas carry
            // a byte count: `mailQuota=quota_rule=*:bytes=%$`)
            let part = part.trim();
            if let Some(size) = part
                .strip_prefix("storage=")
                .or_else(|| part.strip_prefix("bytes="))
            {
                let bytes = parse_quota_size(size)
                    .ok_or_else(|| format!("quota rule {value:?}: invalid storage size"))?;
                found = Some((bytes > 0).then_some(bytes));
            }
        }
    }
    Ok(found)
}

fn parse_quota_size(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.starts_with(['+', '-']) || s.ends_with('%') {
        return None; // relative rules need a base this server does not have
    }
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return None,
    };
    n.checked_mul(1 << shift)
}

/// Bytes a user's mail takes: the sum of the index's per-mailbox RFC822 sizes (kept
/// exact on every change, so this reads one record per mailbox and walks no folder).
pub fn usage(store: &UserStore) -> Result<u64, StoreError> {
    let total = store.index().read(|r| {
        Ok(r.mailboxes()?
            .iter()
            .map(|(_, m)| m.counts.vsize)
            .sum::<u64>())
    })?;
    Ok(total)
}

/// The notice [`Accounts::quota_warning`] leaves in INBOX: from the postmaster of
/// `host`, marked `Auto-Submitted` (RFC 3834) so that no vacation responder answers it.
pub(crate) fn warning_notice(user: &str, q: StorageQuota, percent: u8, host: &str) -> Vec<u8> {
    let now = time::OffsetDateTime::now_utc();
    let date = now
        .format(&time::format_description::well_known::Rfc2822)
        .unwrap_or_default();
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    let name: String = user.chars().filter(|c| !c.is_control()).collect();
    format!(
        "From: Mail System <postmaster@{host}>\n\
         To: <{name}>\n\
         Subject: Your mailbox is {percent}% full\n\
         Date: {date}\n\
         Message-ID: <quota-warning.{}.{}@{host}>\n\
         Auto-Submitted: auto-generated\n\
         MIME-Version: 1.0\n\
         Content-Type: text/plain; charset=utf-8\n\
         \n\
         Your mailbox now holds {:.1} MiB of its {:.1} MiB ({}%).\n\
         \n\
         When it is full, new mail to you is refused and returned to its senders.\n\
         Delete messages you no longer need (and empty the Trash) to make room.\n",
        now.unix_timestamp(),
        now.nanosecond(),
        mib(q.used),
        mib(q.limit),
        (u128::from(q.used) * 100 / u128::from(q.limit.max(1))),
    )
    .into_bytes()
}

/// A storage quota and its use, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageQuota {
    /// Bytes the user's mail takes (every mailbox).
    pub used: u64,
    /// The limit.
    pub limit: u64,
}

impl StorageQuota {
    /// Whether `incoming` more bytes would go over the limit (with `0`, size not known
    /// yet: whether the use is at or over it).
    pub fn exceeded_by(&self, incoming: u64) -> bool {
        self.used.saturating_add(incoming.max(1)) > self.limit
    }

    /// Whether `added` bytes take the use from below `percent` of the limit to it or above.
    pub fn crosses(&self, percent: u8, added: u64) -> bool {
        let threshold = u128::from(self.limit) * u128::from(percent) / 100;
        let before = u128::from(self.used);
        before < threshold && before + u128::from(added) >= threshold
    }
}

impl Accounts {
    /// Whether `incoming` more bytes would take `user` over quota (always false without
    /// a quota). With `incoming == 0` (size not known yet), true once the user is at or
    /// over the limit. Reads the index counts: BLOCKING on first use of the store.
    pub fn over_quota(&self, user: &User, incoming: u64) -> Result<bool, AccountsError> {
        Ok(self
            .storage_quota(user)?
            .is_some_and(|q| q.exceeded_by(incoming)))
    }

    /// After `added` bytes were delivered to `user`, whose use was `before`: when that took
    /// the use across `[storage] quota_warning` percent of the limit, delivers a notice to
    /// the user's INBOX. Once per crossing, as Dovecot's `quota_warning`: a delivery that
    /// starts at or above the threshold sends none. A notice that cannot be delivered is
    /// logged; the delivery it follows stands.
    pub fn quota_warning(&self, user: &User, before: Option<StorageQuota>, added: u64) {
        let (Some(percent), Some(q)) = (self.config.storage.quota_warning, before) else {
            return;
        };
        if !q.crosses(percent, added) {
            return;
        }
        let after = StorageQuota {
            used: q.used.saturating_add(added),
            ..q
        };
        let host = self.config.lmtp.host_name();
        let notice = warning_notice(&user.name, after, percent, &host);
        let delivered = self.store(user).and_then(|store| {
            let opts = maildex_store::DeliverOptions::default();
            store
                .deliver("INBOX", &mut notice.as_slice(), &opts)
                .map_err(|error| AccountsError::Store {
                    user: user.name.clone(),
                    error: Box::new(error),
                })
        });
        match delivered {
            Ok(d) => {
                tracing::info!(user = %user.name, percent, uid = d.uid.get(), "quota warning delivered")
            }
            Err(e) => tracing::error!(user = %user.name, error = %e, "quota warning not delivered"),
        }
    }

    /// A user's storage limit and what the mail takes now (`None` without a limit): what
    /// LMTP, APPEND and IMAP's GETQUOTA (RFC 9208) all count against. BLOCKING on first
    /// use of the store.
    pub fn storage_quota(&self, user: &User) -> Result<Option<StorageQuota>, AccountsError> {
        let Some(limit) = user.quota else {
            return Ok(None);
        };
        let store = self.store(user)?;
        let used = usage(&store).map_err(|error| AccountsError::Store {
            user: user.name.clone(),
            error: Box::new(error),
        })?;
        Ok(Some(StorageQuota { used, limit }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(fields: &[&str]) -> Result<Option<Option<u64>>, String> {
        rule_from_extra(&fields.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn dovecot_quota_rules() {
        assert_eq!(rule(&[]), Ok(None));
        assert_eq!(rule(&["userdb_mail=maildir:~/M"]), Ok(None));
        assert_eq!(
            rule(&["userdb_quota_rule=*:storage=100M"]),
            Ok(Some(Some(100 << 20)))
        );
        assert_eq!(rule(&["quota_rule=*:storage=2G"]), Ok(Some(Some(2 << 30))));
        assert_eq!(
            rule(&["quota_rule=*:storage=512k"]),
            Ok(Some(Some(512 << 10)))
        );
        assert_eq!(rule(&["quota_rule=*:storage=1000"]), Ok(Some(Some(1000))));
        assert_eq!(rule(&["userdb_quota_rule=*:storage=0"]), Ok(Some(None)));
        assert_eq!(rule(&["quota_rule=*:bytes=2048"]), Ok(Some(Some(2048))));
        // per-mailbox and message-count rules are not enforced
        assert_eq!(rule(&["quota_rule=Trash:storage=+10M"]), Ok(None));
        assert_eq!(rule(&["quota_rule=*:messages=100"]), Ok(None));
        for bad in [
            "quota_rule=*:storage=lots",
            "quota_rule=*:storage=10%",
            "quota_rule=*:storage=+1G",
            "quota_rule=*:storage=1P",
        ] {
            assert!(rule(&[bad]).is_err(), "{bad}");
        }
    }
}
