//! Per-user path templates (`mail_location`, `index_root`) and their safe expansion.
//!
//! Variables follow Dovecot's (doc "Variables"): `%u` the full user name, `%n` the
//! local part (the whole name if there is no `@`), `%d` the domain (empty if none),
//! `%%` a literal `%`. Nothing else is accepted, so a typo fails at startup.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use crate::ConfigError;

/// Longest user name accepted in a path (bytes): one path component (`NAME_MAX`).
pub const MAX_USER_LEN: usize = 255;

/// Name of the index directory inside the Maildir when `index_root` is unset. It
/// does not start with `.`, so Dovecot and Courier (Maildir++ folders are `.Name`)
/// never take it for a folder.
pub const INDEX_DIR_IN_MAILDIR: &str = "maildex-index";

/// The directories of one user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserPaths {
    /// The Maildir root (holds `cur/`, `new/`, `tmp/` and the `.Folder`s).
    pub maildir: PathBuf,
    /// The user's LMDB index directory.
    pub index_dir: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Lit(Vec<u8>),
    User,
    Local,
    Domain,
}

/// A path with `%u` / `%n` / `%d` / `%%` variables, absolute once loaded.
#[derive(Clone, PartialEq, Eq)]
pub struct PathTemplate {
    raw: OsString,
    segs: Vec<Seg>,
    prefix: PathBuf,
}

impl fmt::Debug for PathTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PathTemplate({:?})", self.raw)
    }
}

impl fmt::Display for PathTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", Path::new(&self.raw).display())
    }
}

fn parse_segs(raw: &[u8]) -> Result<Vec<Seg>, String> {
    let mut segs = Vec::new();
    let mut lit = Vec::new();
    let mut it = raw.iter();
    while let Some(&b) = it.next() {
        if b != b'%' {
            lit.push(b);
            continue;
        }
        let var = match it.next() {
            Some(b'%') => {
                lit.push(b'%');
                continue;
            }
            Some(b'u') => Seg::User,
            Some(b'n') => Seg::Local,
            Some(b'd') => Seg::Domain,
            Some(&other) => {
                return Err(format!(
                    "unknown variable %{} (only %u, %n, %d and %% are supported)",
                    char::from(other).escape_default()
                ))
            }
            None => return Err("lone % at the end (write %% for a literal %)".to_owned()),
        };
        if !lit.is_empty() {
            segs.push(Seg::Lit(std::mem::take(&mut lit)));
        }
        segs.push(var);
    }
    if !lit.is_empty() {
        segs.push(Seg::Lit(lit));
    }
    Ok(segs)
}

/// Syntax rules of a template, checked before any path resolution.
pub(crate) fn check_template_syntax(s: &str) -> Result<(), String> {
    check_bytes(s.as_bytes())
}

fn check_bytes(raw: &[u8]) -> Result<(), String> {
    if raw.is_empty() {
        return Err("must not be empty".to_owned());
    }
    for driver in ["maildir:", "mbox:", "sdbox:", "mdbox:"] {
        if raw.starts_with(driver.as_bytes()) {
            return Err(format!(
                "drop the Dovecot-style {driver:?} prefix and any :OPTIONS; give the Maildir path, \
                 e.g. \"/var/mail/%d/%n/Maildir\""
            ));
        }
    }
    if raw.starts_with(b"~") {
        return Err("home-relative (~) locations are not supported; use %u, %n and %d".to_owned());
    }
    if raw.split(|&b| b == b'/').any(|c| c == b"..") {
        return Err("'..' components are not allowed".to_owned());
    }
    let segs = parse_segs(raw)?;
    if !segs.iter().any(|s| matches!(s, Seg::User | Seg::Local)) {
        return Err("must contain %u or %n, or all users would share one directory".to_owned());
    }
    Ok(())
}

impl PathTemplate {
    /// Parses `template`; a relative template is taken relative to `base` (the config
    /// file's directory, used literally: a `%` in it is not a variable). Errors are
    /// [`ConfigError::Invalid`] naming the config file and `key`.
    pub(crate) fn resolve(
        template: &OsStr,
        base: &Path,
        config: &Path,
        key: &str,
    ) -> Result<PathTemplate, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: config.to_owned(),
            key: key.to_owned(),
            message,
        };
        let bytes = template.as_bytes();
        check_bytes(bytes).map_err(invalid)?;
        let segs = parse_segs(bytes).map_err(invalid)?;
        Ok(if bytes.starts_with(b"/") {
            PathTemplate::from_segs(segs)
        } else {
            PathTemplate::under(base, segs)
        })
    }

    /// Parses a template outside a config file (tests, tools). A relative `template`
    /// is taken relative to `base`. Errors are [`ConfigError::Invalid`] with `base` as
    /// the path and `template` as the key.
    pub fn new(template: impl AsRef<OsStr>, base: &Path) -> Result<PathTemplate, ConfigError> {
        PathTemplate::resolve(template.as_ref(), base, base, "template")
    }

    /// `segs` (already validated) relative to the literal directory `base`.
    pub(crate) fn under(base: &Path, mut segs: Vec<Seg>) -> PathTemplate {
        let mut lit = base.as_os_str().as_bytes().to_vec();
        if !lit.ends_with(b"/") {
            lit.push(b'/');
        }
        if let Some(Seg::Lit(first)) = segs.first() {
            lit.extend_from_slice(first);
            segs[0] = Seg::Lit(lit);
        } else {
            segs.insert(0, Seg::Lit(lit));
        }
        PathTemplate::from_segs(segs)
    }

    fn from_segs(segs: Vec<Seg>) -> PathTemplate {
        let mut raw = Vec::new();
        for seg in &segs {
            match seg {
                Seg::Lit(b) => {
                    for &c in b {
                        if c == b'%' {
                            raw.push(b'%');
                        }
                        raw.push(c);
                    }
                }
                Seg::User => raw.extend_from_slice(b"%u"),
                Seg::Local => raw.extend_from_slice(b"%n"),
                Seg::Domain => raw.extend_from_slice(b"%d"),
            }
        }
        // The fixed prefix: literal text before the first variable, up to its last '/'.
        let mut lit = match segs.first() {
            Some(Seg::Lit(first)) => first.clone(),
            _ => Vec::new(),
        };
        let cut = lit.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
        lit.truncate(cut);
        let prefix: PathBuf = Path::new(OsStr::from_bytes(&lit)).components().collect();
        PathTemplate {
            raw: OsString::from_vec(raw),
            segs,
            prefix,
        }
    }

    /// The template text (absolute, `%` variables unexpanded).
    pub fn as_os_str(&self) -> &OsStr {
        &self.raw
    }

    /// The directory every expansion stays under (the literal text before the first
    /// variable, up to its last `/`), e.g. `/var/mail` for `/var/mail/%d/%n/Maildir`.
    pub fn fixed_prefix(&self) -> &Path {
        &self.prefix
    }

    /// Expands the template for `user`; see [`StorageConfig::paths_for`](crate::StorageConfig::paths_for).
    pub fn expand(&self, user: &str) -> Result<PathBuf, ConfigError> {
        check_user(user)?;
        // Dovecot lowercases user names by default (auth_username_format = %Lu since
        // v2.1), so "Alice" and "alice" share one Maildir.
        let user = user.to_ascii_lowercase();
        let (local, domain) = match user.split_once('@') {
            Some((l, d)) => (l, d),
            None => (user.as_str(), ""),
        };
        let mut out = Vec::new();
        for seg in &self.segs {
            match seg {
                Seg::Lit(b) => out.extend_from_slice(b),
                Seg::User => out.extend_from_slice(user.as_bytes()),
                Seg::Local => out.extend_from_slice(local.as_bytes()),
                Seg::Domain => out.extend_from_slice(domain.as_bytes()),
            }
        }
        let path: PathBuf = Path::new(OsStr::from_bytes(&out)).components().collect();
        // Defence in depth: the user-name rules already make an escape impossible.
        let escaped = match path.strip_prefix(&self.prefix) {
            Ok(rest) => {
                rest.as_os_str().is_empty()
                    || rest
                        .components()
                        .any(|c| !matches!(c, Component::Normal(_)))
            }
            Err(_) => true,
        };
        if escaped {
            return Err(ConfigError::PathEscape {
                user,
                path,
                prefix: self.prefix.clone(),
            });
        }
        Ok(path)
    }
}

/// The rules a user name must meet before it is put into a path.
fn check_user(user: &str) -> Result<(), ConfigError> {
    let bad = |reason| {
        Err(ConfigError::BadUserName {
            user: user.chars().take(80).collect(),
            reason,
        })
    };
    if user.is_empty() {
        return bad("empty");
    }
    if user.len() > MAX_USER_LEN {
        return bad("longer than 255 bytes");
    }
    if user.contains('\0') {
        return bad("contains NUL");
    }
    if user.chars().any(char::is_control) {
        return bad("contains control characters");
    }
    if user.contains('/') {
        return bad("contains '/'");
    }
    if user.contains("..") {
        return bad("contains '..'");
    }
    if user.starts_with('.') {
        return bad("starts with '.'");
    }
    if let Some((local, domain)) = user.split_once('@') {
        if local.is_empty() {
            return bad("empty local part");
        }
        if domain.contains('@') {
            return bad("more than one '@'");
        }
        if domain.starts_with('.') {
            return bad("domain starts with '.'");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> PathTemplate {
        PathTemplate::resolve(
            OsStr::new(s),
            Path::new("/etc/maildex"),
            Path::new("c.toml"),
            "k",
        )
        .unwrap()
    }

    #[test]
    fn expands_variables() {
        let tpl = t("/var/mail/%d/%n/Maildir");
        assert_eq!(tpl.fixed_prefix(), Path::new("/var/mail"));
        assert_eq!(
            tpl.expand("Alice@Example.ORG").unwrap(),
            Path::new("/var/mail/example.org/alice/Maildir")
        );
        // No domain: %d is empty and the empty component disappears.
        assert_eq!(
            tpl.expand("bob").unwrap(),
            Path::new("/var/mail/bob/Maildir")
        );
        assert_eq!(
            t("/m/%u/x%%y").expand("a@b").unwrap(),
            Path::new("/m/a@b/x%y")
        );
        assert_eq!(t("/m/u-%n").fixed_prefix(), Path::new("/m"));
        assert_eq!(t("/m/u-%n").expand("z@q").unwrap(), Path::new("/m/u-z"));
    }

    #[test]
    fn relative_templates_resolve_against_base() {
        let tpl = t("mail/%n");
        assert_eq!(tpl.as_os_str(), "/etc/maildex/mail/%n");
        assert_eq!(tpl.expand("a").unwrap(), Path::new("/etc/maildex/mail/a"));
        // A '%' in the base directory is literal, not a variable.
        let tpl = PathTemplate::resolve(
            OsStr::new("%n"),
            Path::new("/srv/100%dir"),
            Path::new("c"),
            "k",
        )
        .unwrap();
        assert_eq!(tpl.expand("a@b").unwrap(), Path::new("/srv/100%dir/a"));
        assert_eq!(tpl.fixed_prefix(), Path::new("/srv/100%dir"));
        assert_eq!(tpl.as_os_str(), "/srv/100%%dir/%n");
        // The base may contain '..' (it is the admin's own directory); templates may not.
        let tpl = PathTemplate::resolve(
            OsStr::new("m/%n"),
            Path::new("/a/../b"),
            Path::new("c"),
            "k",
        )
        .unwrap();
        assert_eq!(tpl.expand("x").unwrap(), Path::new("/a/../b/m/x"));
    }

    #[test]
    fn bad_templates() {
        for bad in [
            "",
            "/m/%x",
            "/m/%",
            "/m/%d",
            "/m/static",
            "maildir:~/Maildir",
            "~/Maildir",
            "/m/../%n",
            "../%n",
        ] {
            let r = PathTemplate::resolve(
                OsStr::new(bad),
                Path::new("/"),
                Path::new("c.toml"),
                "storage.k",
            );
            assert!(
                matches!(r, Err(ConfigError::Invalid { ref key, .. }) if key == "storage.k"),
                "{bad:?}: {r:?}"
            );
        }
    }

    #[test]
    fn hostile_user_names_are_rejected() {
        let tpl = t("/var/mail/%d/%n/Maildir");
        let long = "a".repeat(256);
        for bad in [
            "",
            "../etc",
            "a/../../b",
            "a/b",
            "..",
            ".",
            ".hidden",
            "a\0b",
            "a\nb",
            "a\u{7f}",
            "x@..",
            "x@../../etc",
            "x@.hidden",
            "@example.org",
            "a@b@c",
            long.as_str(),
        ] {
            assert!(
                matches!(tpl.expand(bad), Err(ConfigError::BadUserName { .. })),
                "{bad:?} should be rejected"
            );
        }
        assert!(tpl.expand(&"a".repeat(255)).is_ok());
    }

    #[test]
    fn escape_check_catches_what_validation_would_miss() {
        // Pretend validation let "x" through but the template produced a '..': build
        // a template whose literal after the prefix walks up.
        let tpl = PathTemplate::from_segs(parse_segs(b"/var/mail/%n/../../etc").unwrap());
        assert_eq!(tpl.fixed_prefix(), Path::new("/var/mail"));
        assert!(matches!(
            tpl.expand("x"),
            Err(ConfigError::PathEscape { .. })
        ));
    }
}
