//! The aliases file: `source: target1, target2` lines, as postfix's aliases(5) writes
//! them (without postfix's `|command`, `/file` and `:include:` targets, which an LMTP
//! server cannot honour).
//!
//! - A source is a full address (`info@example.org`) or a bare local part (`info`),
//!   compared case-insensitively (ASCII). As in the users file, a full-address source
//!   wins over a bare one, and a bare source matches that local part at any domain.
//! - Targets are users-file names (or addresses that the users-file rules resolve),
//!   separated by commas and/or spaces. Aliases do not nest: a target is never looked
//!   up in the aliases again, so a loop cannot exist.
//! - Blank lines and lines starting with `#` are ignored; a line starting with
//!   whitespace continues the previous one (aliases(5)).
//! - A source defined twice, an empty target list, or a line without `:` is an error
//!   naming the file and line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::AccountsError;

/// A loaded aliases file.
#[derive(Debug, Clone, Default)]
pub struct Aliases {
    /// Folded source -> targets (as written).
    map: HashMap<String, Vec<String>>,
}

impl Aliases {
    /// Reads and parses the aliases file at `path`.
    pub fn load(path: &Path) -> Result<Aliases, AccountsError> {
        let text = std::fs::read(path).map_err(|error| AccountsError::Io {
            path: path.to_owned(),
            error,
        })?;
        Aliases::parse(path, &text)
    }

    /// Parses aliases-file content; `path` is only used in error messages.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Aliases, AccountsError> {
        let err = |line: usize, reason: String| AccountsError::Aliases {
            path: PathBuf::from(path),
            line,
            reason,
        };
        let text = std::str::from_utf8(bytes).map_err(|e| {
            let line = bytes[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1;
            err(line, "not UTF-8".into())
        })?;
        // Join continuation lines first, keeping the number of each logical line's start.
        let mut logical: Vec<(usize, String)> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let lineno = i + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            if raw.starts_with([' ', '\t']) {
                match logical.last_mut() {
                    Some((_, l)) => {
                        l.push(' ');
                        l.push_str(trimmed);
                        continue;
                    }
                    None => return Err(err(lineno, "continuation line before any alias".into())),
                }
            }
            logical.push((lineno, trimmed.to_owned()));
        }
        let mut map: HashMap<String, Vec<String>> = HashMap::new();
        let mut first_line: HashMap<String, usize> = HashMap::new();
        for (lineno, line) in logical {
            let Some((source, targets)) = line.split_once(':') else {
                return Err(err(lineno, "expected \"source: user1, user2\"".into()));
            };
            let source = source.trim();
            check_source(source).map_err(|r| err(lineno, r))?;
            let targets: Vec<String> = targets
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect();
            if targets.is_empty() {
                return Err(err(lineno, format!("alias {source} has no target")));
            }
            for t in &targets {
                if t.starts_with(['|', '/']) || t.starts_with(":include:") {
                    return Err(err(
                        lineno,
                        format!("target {t:?}: commands, files and :include: are not supported"),
                    ));
                }
                if t.contains(':') || t.chars().any(char::is_control) {
                    return Err(err(lineno, format!("target {t:?} is not a user name")));
                }
            }
            let key = source.to_ascii_lowercase();
            if let Some(first) = first_line.insert(key.clone(), lineno) {
                return Err(err(
                    lineno,
                    format!("alias {source} already defined on line {first} (sources are case-insensitive)"),
                ));
            }
            map.insert(key, targets);
        }
        Ok(Aliases { map })
    }

    /// The targets of `address` (a full address or a bare local part), by the rules in
    /// the module docs; `None` when no alias applies.
    pub fn lookup(&self, address: &str) -> Option<&[String]> {
        let folded = address.to_ascii_lowercase();
        if let Some(t) = self.map.get(&folded) {
            return Some(t);
        }
        let (local, domain) = folded.split_once('@')?;
        if local.is_empty() || domain.is_empty() {
            return None;
        }
        self.map.get(local).map(Vec::as_slice)
    }

    /// Number of aliases.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when there is no alias.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every target named anywhere, for checks at load time.
    pub(crate) fn all_targets(&self) -> impl Iterator<Item = (&str, &str)> {
        self.map
            .iter()
            .flat_map(|(s, ts)| ts.iter().map(move |t| (s.as_str(), t.as_str())))
    }
}

fn check_source(source: &str) -> Result<(), String> {
    if source.is_empty() {
        return Err("empty alias source".into());
    }
    if source.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("alias source {source:?} contains whitespace"));
    }
    match source.split_once('@') {
        Some((l, d)) if l.is_empty() || d.is_empty() || d.contains('@') => Err(format!(
            "alias source {source:?} is not an address or a local part"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Aliases, AccountsError> {
        Aliases::parse(Path::new("/etc/maildex/aliases"), text.as_bytes())
    }

    #[test]
    fn sources_targets_comments_and_continuations() {
        let a = parse(
            "# team\n\
             info@Example.org: alice, bob\n\
             \n\
             postmaster: alice\n\
             sales: carol\n  dave,erin\n",
        )
        .unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!(a.lookup("INFO@example.ORG").unwrap(), ["alice", "bob"]);
        // a bare source matches at any domain
        assert_eq!(a.lookup("Postmaster@other.example").unwrap(), ["alice"]);
        assert_eq!(a.lookup("postmaster").unwrap(), ["alice"]);
        assert_eq!(a.lookup("sales@x").unwrap(), ["carol", "dave", "erin"]);
        // a full-address source is only that address
        assert!(a.lookup("info@other.example").is_none());
        assert!(a.lookup("info").is_none());
        assert!(a.lookup("nobody@example.org").is_none());
    }

    #[test]
    fn full_address_wins_over_bare() {
        let a = parse("info: alice\ninfo@example.org: bob\n").unwrap();
        assert_eq!(a.lookup("info@example.org").unwrap(), ["bob"]);
        assert_eq!(a.lookup("info@example.net").unwrap(), ["alice"]);
    }

    #[test]
    fn bad_lines_name_their_line() {
        for (text, line, needle) in [
            ("a: b\nno colon here\n", 2, "expected"),
            ("a: b\n\nc:\n", 3, "no target"),
            ("a: b\nA: c\n", 2, "already defined on line 1"),
            ("  x\n", 1, "continuation"),
            ("a: |/bin/sh\n", 1, "not supported"),
            ("a b: c\n", 1, "whitespace"),
            ("@x: c\n", 1, "not an address"),
            ("a: b\nc: \u{ff}\n", 2, "x"),
        ] {
            let text = text.replace('\u{ff}', "\u{1}");
            match parse(&text) {
                Err(AccountsError::Aliases {
                    line: l, reason, ..
                }) => {
                    assert_eq!(l, line, "{text:?}: {reason}");
                    if needle != "x" {
                        assert!(reason.contains(needle), "{text:?}: {reason}");
                    }
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
        let e = Aliases::parse(Path::new("/a"), b"a: b\nc: \xff\n").unwrap_err();
        assert!(e.to_string().contains("/a line 2"), "{e}");
    }
}
