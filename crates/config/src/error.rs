//! The error type of this crate, and turning TOML errors into messages that name
//! the line, column and key.

use std::path::{Path, PathBuf};

/// Everything that can go wrong while loading the configuration or expanding a
/// user's paths.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read (missing, unreadable, not UTF-8).
    #[error("cannot read config file {path}: {error}")]
    Read {
        /// The config file.
        path: PathBuf,
        /// The underlying error (in the message; not a `source()`).
        error: std::io::Error,
    },

    /// TOML syntax error, unknown key or a value of the wrong shape.
    #[error("{}", toml_display(path, *line, *column, key.as_deref(), message))]
    Toml {
        /// The config file.
        path: PathBuf,
        /// 1-based line of the offending text, if known.
        line: Option<usize>,
        /// 1-based column (in characters), if known.
        column: Option<usize>,
        /// The dotted key involved (`imap.listen`), if it could be determined.
        key: Option<String>,
        /// What is wrong.
        message: String,
    },

    /// A required key is absent.
    #[error("{path}: missing required key `{key}`")]
    Missing {
        /// The config file.
        path: PathBuf,
        /// The dotted key.
        key: &'static str,
    },

    /// Values that parse but do not make sense (together).
    #[error("{path}: `{key}`: {message}")]
    Invalid {
        /// The config file.
        path: PathBuf,
        /// The dotted key.
        key: String,
        /// What is wrong.
        message: String,
    },

    /// A user name that must not be expanded into a path.
    #[error("user name {user:?} cannot be used in a mail path: {reason}")]
    BadUserName {
        /// The rejected name (possibly truncated for display by the caller).
        user: String,
        /// Which rule it breaks.
        reason: &'static str,
    },

    /// The expanded path left the template's fixed prefix. User-name validation
    /// should make this impossible; it is checked anyway.
    #[error("path {path} for user {user:?} escapes {prefix}")]
    PathEscape {
        /// The user name.
        user: String,
        /// The expanded path.
        path: PathBuf,
        /// The prefix it had to stay under.
        prefix: PathBuf,
    },
}

fn toml_display(
    path: &Path,
    line: Option<usize>,
    column: Option<usize>,
    key: Option<&str>,
    message: &str,
) -> String {
    let mut s = path.display().to_string();
    if let Some(line) = line {
        s.push_str(&format!(":{line}"));
        if let Some(column) = column {
            s.push_str(&format!(":{column}"));
        }
    }
    s.push_str(": ");
    if let Some(key) = key {
        s.push_str(&format!("`{key}`: "));
    }
    s.push_str(message.trim_end());
    s
}

/// Converts a `toml` error into [`ConfigError::Toml`], finding the line, column and
/// (best effort) the dotted key from the error's byte span in `src`.
pub(crate) fn from_toml(path: &Path, src: &str, err: &toml::de::Error) -> ConfigError {
    let message = err.message().to_owned();
    let (line, column, key) = match err.span() {
        Some(span) => {
            let (line, column) = line_col(src, span.start);
            (Some(line), Some(column), key_at(src, span.start, &message))
        }
        None => (None, None, None),
    };
    ConfigError::Toml {
        path: path.to_owned(),
        line,
        column,
        key,
        message,
    }
}

/// 1-based line and character column of byte `offset` in `src`.
fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(src.len());
    let before = &src.as_bytes()[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let column = String::from_utf8_lossy(&before[line_start..])
        .chars()
        .count()
        + 1;
    (line, column)
}

/// The table header named on a `[a.b]` / `[[a.b]]` line, without brackets.
fn header(line: &str) -> Option<String> {
    let t = line.trim();
    let t = t.split('#').next().unwrap_or(t).trim();
    let inner = t.strip_prefix('[')?.strip_suffix(']')?;
    let inner = inner
        .strip_prefix('[')
        .and_then(|i| i.strip_suffix(']'))
        .unwrap_or(inner);
    let parts: Vec<String> = inner
        .split('.')
        .map(|p| p.trim().trim_matches('"').trim_matches('\'').to_owned())
        .collect();
    Some(parts.join("."))
}

/// Best-effort dotted key for an error at byte `offset`: the enclosing table header
/// plus the key on the error's line (or the nearest `key =` line above it, for
/// multi-line arrays), or the field an "unknown field" message names.
fn key_at(src: &str, offset: usize, message: &str) -> Option<String> {
    let offset = offset.min(src.len());
    let line_start = src.as_bytes()[..offset]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let line_end = src[line_start..]
        .find('\n')
        .map_or(src.len(), |i| line_start + i);
    let this_line = src.get(line_start..line_end)?;
    if let Some(h) = header(this_line) {
        // Unknown section: the header itself names the key.
        return Some(h);
    }
    let lines_above: Vec<&str> = src.get(..line_start)?.lines().collect();
    let section = lines_above.iter().rev().find_map(|l| header(l));

    let field = if let Some(rest) = message.strip_prefix("unknown field `") {
        rest.split('`').next().map(str::to_owned)
    } else {
        let key_of = |l: &str| -> Option<String> {
            let (k, _) = l.split_once('=')?;
            let k = k.trim();
            (!k.is_empty() && !k.starts_with('#') && !k.starts_with('[')).then(|| k.to_owned())
        };
        let before = src.get(line_start..offset).unwrap_or("");
        key_of(before).or_else(|| {
            lines_above
                .iter()
                .rev()
                .take_while(|l| header(l).is_none())
                .find_map(|l| key_of(l))
        })
    };
    match (section, field) {
        (Some(s), Some(f)) => Some(format!("{s}.{f}")),
        (None, Some(f)) => Some(f),
        (Some(s), None) => Some(s),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column() {
        let src = "a = 1\nbé = 2\n";
        assert_eq!(line_col(src, 0), (1, 1));
        assert_eq!(line_col(src, 6), (2, 1));
        assert_eq!(line_col(src, src.find('=').unwrap()), (1, 3));
        // Columns count characters, not bytes.
        assert_eq!(line_col(src, src.rfind('=').unwrap()), (2, 4));
    }

    #[test]
    fn keys_from_context() {
        let src = "[imap]\nlisten = [\n  \"x\",\n]\n[storage]\nfsync = 3\n";
        assert_eq!(
            key_at(src, src.find("\"x\"").unwrap(), "bad").as_deref(),
            Some("imap.listen")
        );
        assert_eq!(
            key_at(src, src.find('3').unwrap(), "bad").as_deref(),
            Some("storage.fsync")
        );
        assert_eq!(
            key_at(
                src,
                src.find("fsync").unwrap(),
                "unknown field `fsync`, expected"
            )
            .as_deref(),
            Some("storage.fsync")
        );
        let src = "[imapp]\n";
        assert_eq!(
            key_at(src, 1, "unknown field `imapp`").as_deref(),
            Some("imapp")
        );
        assert_eq!(header("[[ a . \"b\" ]]  # c").as_deref(), Some("a.b"));
    }
}
