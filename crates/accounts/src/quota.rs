//! Storage quotas: the limit of a user (config default or Dovecot's per-user
//! `quota_rule` extra field) and the usage the index already counts.

use maildex_store::{StoreError, UserStore};

/// Reads a per-user limit from users-file extra fields, as Dovecot's passwd-file
/// userdb carries it: `userdb_quota_rule=*:storage=100M` (or `quota_rule=...`).
///
/// Returns `Ok(None)` when the fields set no storage rule for `*` (the config default
/// applies), `Ok(Some(None))` for an explicit unlimited rule (`storage=0`, as in
/// Dovecot), `Ok(Some(Some(bytes)))` for a limit. Rules for single mailboxes and
/// `messages=` limits are not enforced (ignored). Sizes take Dovecot's units: `b`,
/// `k`, `M`, `G`, `T` (powers of 1024, any case, optional `B`/`iB`).
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
            if let Some(size) = part.trim().strip_prefix("storage=") {
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

/// The notice [`crate::Accounts::quota_warning`] leaves in INBOX: from the postmaster of
/// `host`, marked `Auto-Submitted` (RFC 3834) so that no vacation responder answers it.
pub(crate) fn warning_notice(
    user: &str,
    q: crate::StorageQuota,
    percent: u8,
    host: &str,
) -> Vec<u8> {
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
