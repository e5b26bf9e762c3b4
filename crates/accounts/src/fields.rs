//! What maildex does with each field of a Dovecot passwd-file line beyond the name and
//! the password (Dovecot doc "passwd-file"; `passwd_file_add()` in
//! src/auth/db-passwd-file.c): `allow_nets`, the `*:storage=` quota rule and the owner
//! (`uid`/`gid` columns, `userdb_uid`/`userdb_gid`, see [`crate::owner`]) are honoured;
//! every other field that is set is named in one warning per field at load (with the
//! number of users and the first of them), never ignored silently, and never one line per
//! user (a site file of 100,000 users must not flood the log).

use std::collections::BTreeMap;

use maildex_auth::{LogName, UserEntry};

/// Why a field does nothing here (a warning's text).
const PER_USER_PATH: &str = "not honoured: mail and index live where [storage] \
     mail_location and index_root say";
const QUOTA_NOT_ENFORCED: &str = "only the `*:storage=` (or `*:bytes=`) quota rule is \
     enforced; this rule is ignored";
const UNKNOWN: &str = "not supported; ignored";

/// The fields of one load that do nothing, by field name.
#[derive(Debug, Default)]
pub(crate) struct Ignored {
    /// Field -> (why, users that set it, first such user, their line).
    fields: BTreeMap<String, (&'static str, usize, String, usize)>,
}

impl Ignored {
    /// Notes what `entry` sets that maildex does not honour.
    pub(crate) fn note_entry(&mut self, entry: &UserEntry) {
        // the passwd-file's own column 6 (3 and 4, uid and gid, are honoured: crate::owner)
        if entry.home.is_some() {
            self.note("home", PER_USER_PATH, entry);
        }
        for field in &entry.extra {
            let (key, value) = field.split_once('=').unwrap_or((field.as_str(), ""));
            let why = match key {
                // honoured (crate::nets, crate::quota, crate::owner)
                "allow_nets" | "userdb_uid" | "userdb_gid" => continue,
                "userdb_quota_rule" | "quota_rule"
                    if value.starts_with("*:storage=") || value.starts_with("*:bytes=") =>
                {
                    continue
                }
                "userdb_quota_rule" | "quota_rule" => QUOTA_NOT_ENFORCED,
                "userdb_home" | "userdb_mail" => PER_USER_PATH,
                _ => UNKNOWN,
            };
            self.note(&LogName::new(key).to_string(), why, entry);
        }
    }

    fn note(&mut self, field: &str, why: &'static str, entry: &UserEntry) {
        let slot = self
            .fields
            .entry(field.to_owned())
            .or_insert_with(|| (why, 0, entry.name.clone(), entry.line));
        slot.1 += 1;
    }

    /// One warning per field.
    pub(crate) fn warn(&self, file: &std::path::Path) {
        for (field, (why, users, first, line)) in &self.fields {
            tracing::warn!(
                file = %file.display(),
                field = %field,
                users,
                first_user = %first,
                line,
                "users file: {why}"
            );
        }
    }

    /// (field, why, users) of every field noted (tests).
    #[cfg(test)]
    fn summary(&self) -> Vec<(&str, &str, usize)> {
        self.fields
            .iter()
            .map(|(f, (why, n, _, _))| (f.as_str(), *why, *n))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(text: &str) -> Vec<UserEntry> {
        maildex_auth::UsersFile::parse(std::path::Path::new("users"), text.as_bytes())
            .unwrap()
            .list()
            .cloned()
            .collect()
    }

    #[test]
    fn honoured_fields_are_quiet_and_each_other_field_is_counted_once() {
        let mut ignored = Ignored::default();
        for e in entries(
            "alice:{PLAIN}pw:5000:5000::/home/alice::allow_nets=127.0.0.1 \
             userdb_quota_rule=*:storage=1M userdb_mail=maildir:~/M userdb_home=/h \
             userdb_uid=6000 userdb_gid=6000 nodelay=y\n\
             bob:{PLAIN}pw::::::quota_rule=Trash:storage=+10M nodelay=y\n\
             carol:{PLAIN}pw::::::quota_rule=*:storage=2G\n\
             dora:{PLAIN}pw::::::quota_rule=*:bytes=2048\n",
        ) {
            ignored.note_entry(&e);
        }
        assert_eq!(
            ignored.summary(),
            vec![
                ("home", PER_USER_PATH, 1),
                ("nodelay", UNKNOWN, 2),
                ("quota_rule", QUOTA_NOT_ENFORCED, 1),
                ("userdb_home", PER_USER_PATH, 1),
                ("userdb_mail", PER_USER_PATH, 1),
            ]
        );
    }
}
