//! `[mailboxes]`: folders every user gets, their special use (RFC 6154) and autoexpunge,
//! in the shape of Dovecot's `namespace inbox { mailbox Trash { special_use = \Trash
//! auto = subscribe autoexpunge = 30d } }`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::raw::Seconds;

/// The special-use attributes a folder may be given (RFC 6154 §2; `\All` and `\Flagged`
/// are virtual mailboxes, which maildex does not have).
pub const SPECIAL_USES: [&str; 5] = ["\\Drafts", "\\Sent", "\\Trash", "\\Junk", "\\Archive"];

/// Whether a folder is created for every user, as Dovecot's `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AutoCreate {
    /// Not created (the entry only names a role or an autoexpunge).
    No,
    /// Created the first time the user's mail is opened.
    Create,
    /// Created and subscribed (the default).
    Subscribe,
}

/// One `[mailboxes.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailboxConfig {
    /// IMAP name (UTF-8, `.` separated).
    pub name: String,
    /// One of [`SPECIAL_USES`], as written there.
    pub special_use: Option<&'static str>,
    /// Whether it is created for every user.
    pub auto: AutoCreate,
    /// Messages saved into it longer ago than this are expunged in the background.
    pub autoexpunge: Option<Duration>,
}

impl MailboxConfig {
    fn new(name: &str, special_use: &'static str) -> MailboxConfig {
        MailboxConfig {
            name: name.to_owned(),
            special_use: Some(special_use),
            auto: AutoCreate::Subscribe,
            autoexpunge: None,
        }
    }
}

/// What a config without `[mailboxes]` gets: Drafts, Sent, Trash, Junk and Archive with
/// their attributes, created and subscribed, nothing expunged.
pub fn default_mailboxes() -> Vec<MailboxConfig> {
    ["Drafts", "Sent", "Trash", "Junk", "Archive"]
        .into_iter()
        .zip(SPECIAL_USES)
        .map(|(name, role)| MailboxConfig::new(name, role))
        .collect()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMailbox {
    pub special_use: Option<String>,
    pub auto: Option<AutoCreate>,
    pub autoexpunge: Option<Seconds>,
}

/// Validates the `[mailboxes]` tables: (key, message) on error.
pub(crate) fn validate(
    raw: Option<BTreeMap<String, RawMailbox>>,
) -> Result<Vec<MailboxConfig>, (String, String)> {
    let Some(raw) = raw else {
        return Ok(default_mailboxes());
    };
    let mut out = Vec::with_capacity(raw.len());
    for (name, m) in raw {
        let key = |field: &str| format!("mailboxes.{name}.{field}");
        if name.is_empty()
            || name.eq_ignore_ascii_case("INBOX")
            || name.starts_with('.')
            || name.ends_with('.')
            || name.contains("..")
            || name.contains('/')
            || name.chars().any(char::is_control)
        {
            return Err((
                format!("mailboxes.{name}"),
                "not a folder name maildex creates (no INBOX, '/', control characters or empty levels)".into(),
            ));
        }
        let special_use = match m.special_use {
            None => None,
            Some(s) => {
                let bare = s.strip_prefix('\\').unwrap_or(&s);
                let found = SPECIAL_USES
                    .into_iter()
                    .find(|u| u[1..].eq_ignore_ascii_case(bare));
                Some(found.ok_or_else(|| {
                    (
                        key("special_use"),
                        format!("{s:?} is not one of {}", SPECIAL_USES.join(" ")),
                    )
                })?)
            }
        };
        let autoexpunge = match m.autoexpunge {
            Some(Seconds(0)) => return Err((key("autoexpunge"), "must be above zero".into())),
            Some(Seconds(s)) => Some(Duration::from_secs(s)),
            None => None,
        };
        out.push(MailboxConfig {
            name,
            special_use,
            auto: m.auto.unwrap_or(AutoCreate::Subscribe),
            autoexpunge,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<MailboxConfig>, (String, String)> {
        #[derive(Deserialize)]
        struct T {
            mailboxes: Option<BTreeMap<String, RawMailbox>>,
        }
        let t: T = toml::from_str(text).unwrap();
        validate(t.mailboxes)
    }

    #[test]
    fn defaults_are_the_five_roles_subscribed() {
        let d = parse("").unwrap();
        let names: Vec<_> = d.iter().map(|m| (m.name.as_str(), m.special_use)).collect();
        assert_eq!(
            names,
            [
                ("Drafts", Some("\\Drafts")),
                ("Sent", Some("\\Sent")),
                ("Trash", Some("\\Trash")),
                ("Junk", Some("\\Junk")),
                ("Archive", Some("\\Archive"))
            ]
        );
        assert!(d
            .iter()
            .all(|m| m.auto == AutoCreate::Subscribe && m.autoexpunge.is_none()));
    }

    #[test]
    fn tables_replace_the_defaults() {
        let d = parse(
            "[mailboxes.Papierkorb]\nspecial_use = \"trash\"\nautoexpunge = \"30d\"\n\
             [mailboxes.Old]\nauto = \"no\"\nautoexpunge = 60\n",
        )
        .unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].name, "Old");
        assert_eq!(d[0].auto, AutoCreate::No);
        assert_eq!(d[0].autoexpunge, Some(Duration::from_secs(60)));
        assert_eq!(d[1].special_use, Some("\\Trash"));
        assert_eq!(d[1].autoexpunge, Some(Duration::from_secs(30 * 86400)));
    }

    #[test]
    fn bad_tables_name_their_key() {
        let e = parse("[mailboxes.Trash]\nspecial_use = \"\\\\All\"\n").unwrap_err();
        assert_eq!(e.0, "mailboxes.Trash.special_use");
        let e = parse("[mailboxes.Trash]\nautoexpunge = 0\n").unwrap_err();
        assert_eq!(e.0, "mailboxes.Trash.autoexpunge");
        assert!(parse("[mailboxes.INBOX]\n").is_err());
        assert!(parse("[mailboxes.\"a..b\"]\n").is_err());
    }
}
