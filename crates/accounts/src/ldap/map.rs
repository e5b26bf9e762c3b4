//! The parts of `[auth.ldap]` that need no server: filter and DN templates with `%u`,
//! `%n`, `%d` put in escaped (RFC 4515 §3 in a filter, RFC 4514 §2.4 in a DN), and
//! Dovecot's `ldapAttr=field[=template]` attribute mappings.

use std::collections::{BTreeSet, HashMap};

use ldap3::SearchEntry;

use super::LdapConfigError;
use crate::sql::{read_var, Var};

/// A part of a filter or DN template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Part {
    Text(String),
    Var(Var),
}

/// How a template's variables are escaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Escape {
    /// RFC 4515 §3: a value in a search filter.
    Filter,
    /// RFC 4514 §2.4: a value in a DN.
    Dn,
}

/// A filter or DN with `%u`, `%n`, `%d` in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Template {
    pub(super) parts: Vec<Part>,
    escape: Escape,
}

impl Template {
    pub(super) fn parse(
        key: &'static str,
        text: &str,
        escape: Escape,
    ) -> Result<Template, LdapConfigError> {
        let mut parts = Vec::new();
        let mut lit = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '%' {
                lit.push(c);
                continue;
            }
            match read_var(&mut chars) {
                Ok(None) => lit.push('%'),
                Ok(Some(v)) => {
                    if !lit.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut lit)));
                    }
                    parts.push(Part::Var(v));
                }
                Err(reason) => return Err(LdapConfigError::Setting { key, reason }),
            }
        }
        if !lit.is_empty() {
            parts.push(Part::Text(lit));
        }
        Ok(Template { parts, escape })
    }

    /// The template with `login`'s parts put in, escaped.
    pub(super) fn expand(&self, login: &str) -> String {
        let (local, domain) = login.split_once('@').unwrap_or((login, ""));
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Var(v) => {
                    let value = match v {
                        Var::User => login,
                        Var::Local => local,
                        Var::Domain => domain,
                    };
                    out.push_str(&match self.escape {
                        Escape::Filter => ldap3::ldap_escape(value),
                        Escape::Dn => ldap3::dn_escape(value),
                    });
                }
            }
        }
        out
    }
}

/// One `ldapAttr=field[=template]` of `pass_attrs` / `user_attrs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct AttrMap {
    /// The LDAP attribute (empty: a fixed value, Dovecot's `=field=value`).
    pub(super) attr: String,
    /// The field, lower-cased.
    pub(super) field: String,
    /// What the field becomes, `%$` standing for the attribute's value.
    template: Option<String>,
}

/// Fields this server uses; others are warned about once at start-up.
const HONOURED: &[&str] = &[
    "user",
    "password",
    "quota_rule",
    "userdb_quota_rule",
    "allow_nets",
    "uid",
    "gid",
    "userdb_uid",
    "userdb_gid",
];

pub(super) fn parse_attrs(key: &'static str, text: &str) -> Result<Vec<AttrMap>, LdapConfigError> {
    let err = |reason: String| LdapConfigError::Setting { key, reason };
    let mut maps = Vec::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (attr, rest) = item
            .split_once('=')
            .ok_or_else(|| err(format!("{item:?}: expected ldapAttr=field")))?;
        let (field, template) = match rest.split_once('=') {
            Some((f, t)) => (f, Some(t.to_owned())),
            None => (rest, None),
        };
        let field = field.trim().to_ascii_lowercase();
        if field.is_empty() {
            return Err(err(format!("{item:?}: no field name")));
        }
        if attr.trim().is_empty() && template.is_none() {
            return Err(err(format!("{item:?}: a fixed field needs =field=value")));
        }
        if let Some(t) = &template {
            let rest = t.replace("%%", "").replace("%$", "");
            if rest.contains('%') {
                return Err(err(format!(
                    "{item:?}: only %$ (the value) and %% are known in a template"
                )));
            }
        }
        maps.push(AttrMap {
            attr: attr.trim().to_owned(),
            field,
            template,
        });
    }
    Ok(maps)
}

/// The fields an entry gives through `maps`.
pub(super) fn fields(entry: &SearchEntry, maps: &[AttrMap]) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for m in maps {
        let value = if m.attr.is_empty() {
            Some(String::new())
        } else {
            attr_value(entry, &m.attr)
        };
        let Some(value) = value else { continue };
        let value = match &m.template {
            // `%%` is a `%`, `%$` the value
            Some(t) => t
                .split("%%")
                .map(|p| p.replace("%$", &value))
                .collect::<Vec<_>>()
                .join("%"),
            None => value,
        };
        out.insert(m.field.clone(), value);
    }
    out
}

/// The first value of `attr` (names compare without case, as LDAP's do).
fn attr_value(entry: &SearchEntry, attr: &str) -> Option<String> {
    let text = entry
        .attrs
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(attr))
        .and_then(|(_, v)| v.first().cloned());
    text.or_else(|| {
        entry
            .bin_attrs
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(attr))
            .and_then(|(_, v)| v.first())
            .map(|b| String::from_utf8_lossy(b).into_owned())
    })
}

/// The attributes a search asks for: those `maps` read (RFC 4511 §4.5.1.8: `1.1` for none).
pub(super) fn wanted(maps: &[AttrMap]) -> Vec<String> {
    let set: BTreeSet<String> = maps
        .iter()
        .filter(|m| !m.attr.is_empty())
        .map(|m| m.attr.clone())
        .collect();
    if set.is_empty() {
        vec!["1.1".to_owned()]
    } else {
        set.into_iter().collect()
    }
}

/// Warns once per field the mappings set that this server does not use.
pub(super) fn warn_unused(key: &str, maps: &[AttrMap]) {
    for m in maps {
        if HONOURED.contains(&m.field.as_str()) {
            continue;
        }
        let why = match m.field.trim_start_matches("userdb_") {
            "home" | "mail" => {
                "not honoured: mail and index live where [storage] mail_location and index_root say"
            }
            _ => "not supported; ignored",
        };
        tracing::warn!(field = %m.field, attribute = %m.attr, "[auth.ldap] {key}: {why}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped_in_filters_and_dns() {
        let f = Template::parse(
            "user_filter",
            "(&(objectClass=posixAccount)(uid=%n)(mail=%{user})(o=%Ld)(x=100%%))",
            Escape::Filter,
        )
        .unwrap();
        assert_eq!(
            f.expand("alice@example.org"),
            "(&(objectClass=posixAccount)(uid=alice)(mail=alice@example.org)(o=example.org)(x=100%))"
        );
        // RFC 4515 §3: the attack stays one value
        assert_eq!(
            f.expand("*)(uid=*"),
            "(&(objectClass=posixAccount)(uid=\\2a\\29\\28uid=\\2a)(mail=\\2a\\29\\28uid=\\2a)(o=)(x=100%))"
        );
        assert_eq!(
            Template::parse("f", "(uid=%u)", Escape::Filter)
                .unwrap()
                .expand("a\\b\0"),
            "(uid=a\\5cb\\00)"
        );
        // RFC 4514 §2.4
        let dn = Template::parse("auth_bind_userdn", "uid=%n,ou=people,dc=x", Escape::Dn).unwrap();
        assert_eq!(dn.expand("a,b+c=d"), "uid=a\\2cb\\2bc\\3dd,ou=people,dc=x");
        assert_eq!(dn.expand(" #x "), "uid=\\20#x\\20,ou=people,dc=x");
        assert!(Template::parse("f", "(uid=%q)", Escape::Filter).is_err());
    }

    #[test]
    fn attribute_mappings_as_dovecot_writes_them() {
        let maps = parse_attrs(
            "user_attrs",
            "uid=user, mailQuota=quota_rule=*:bytes=%$, homeDirectory=home, =allow_nets=127.0.0.1",
        )
        .unwrap();
        assert_eq!(wanted(&maps), ["homeDirectory", "mailQuota", "uid"]);
        let mut attrs = HashMap::new();
        attrs.insert("UID".to_owned(), vec!["Alice".to_owned()]);
        attrs.insert("mailquota".to_owned(), vec!["2048".to_owned()]);
        let entry = SearchEntry {
            dn: "uid=alice".into(),
            attrs,
            bin_attrs: HashMap::new(),
        };
        let f = fields(&entry, &maps);
        assert_eq!(f["user"], "Alice");
        assert_eq!(f["quota_rule"], "*:bytes=2048");
        assert_eq!(f["allow_nets"], "127.0.0.1");
        assert!(!f.contains_key("home"), "no attribute, no field");
        for bad in ["uid", "uid=", "=user", "x=quota_rule=%{ldap:y}"] {
            assert!(parse_attrs("user_attrs", bad).is_err(), "{bad}");
        }
        assert_eq!(wanted(&[]), ["1.1"]);
    }
}
