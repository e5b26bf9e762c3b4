//! Reading a Dovecot passwd-file and looking users up.
//!
//! Format (Dovecot doc "passwd-file", `passwd_file_open()` / `passwd_file_add()` in
//! src/auth/db-passwd-file.c): one user per line,
//! `user:password:uid:gid:gecos:home:shell:extra_fields`, fields split on every `:`
//! (there is no escaping). Only user and password are needed for a passdb. Empty
//! lines and lines starting with `#` are ignored. `extra_fields` is everything after
//! the shell field (re-joined with `:`), split on spaces; when the seventh field is
//! empty and more follow, the old format puts a mail location there, which Dovecot
//! reads as `userdb_mail=<rest>`.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::hash::PasswordHash;
use crate::name::validate_name;
use crate::AuthError;

/// One user of the users file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserEntry {
    /// The name as written in the file: a full address or a bare local part.
    pub name: String,
    /// The password field. A missing or empty field has empty `data` and never verifies.
    pub password: PasswordHash,
    /// Numeric uid (field 3), if set.
    pub uid: Option<u32>,
    /// Numeric gid (field 4), if set.
    pub gid: Option<u32>,
    /// Home directory (field 6), if set.
    pub home: Option<PathBuf>,
    /// Extra fields (`key=value` words after the shell field).
    pub extra: Vec<String>,
    /// 1-based line number in the file, for messages.
    pub line: usize,
}

impl UserEntry {
    /// True if the entry is a bare local part (no `@`), which matches at any domain.
    pub fn is_bare(&self) -> bool {
        !self.name.contains('@')
    }
}

/// One line of the file as read, kept so edits can write untouched lines back
/// byte for byte.
#[derive(Debug, Clone)]
pub(crate) struct RawLine {
    /// The line without its `\n` (a trailing `\r`, if any, is kept here).
    pub bytes: Vec<u8>,
    /// Whether the line was terminated by `\n` (false only for a last line without one).
    pub newline: bool,
    /// For user lines: the index into the entries vector.
    pub entry: Option<usize>,
}

/// The parsed file: raw lines plus entries.
#[derive(Debug, Clone, Default)]
pub(crate) struct Document {
    pub lines: Vec<RawLine>,
    pub entries: Vec<UserEntry>,
}

/// Lower-cases ASCII like Dovecot's `%L` modifier (`str_lcase()` is ASCII-only).
pub(crate) fn fold(name: &str) -> String {
    name.to_ascii_lowercase()
}

pub(crate) fn parse_document(path: &Path, bytes: &[u8]) -> Result<Document, AuthError> {
    let mut doc = Document::default();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut rest = bytes;
    let mut lineno = 0;
    while !rest.is_empty() {
        lineno += 1;
        let (line, newline, next) = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => (&rest[..i], true, &rest[i + 1..]),
            None => (rest, false, &rest[rest.len()..]),
        };
        rest = next;
        let content = line.strip_suffix(b"\r").unwrap_or(line);
        let trimmed = content.trim_ascii_start();
        let is_user = !(trimmed.is_empty() || trimmed.starts_with(b"#"));
        let mut raw = RawLine {
            bytes: line.to_vec(),
            newline,
            entry: None,
        };
        if is_user {
            let entry = parse_line(path, lineno, content)?;
            let key = fold(&entry.name);
            if let Some(first) = seen.insert(key, lineno) {
                return Err(AuthError::Parse {
                    path: path.to_owned(),
                    line: lineno,
                    reason: format!(
                        "user {} already defined on line {first} (names are case-insensitive)",
                        entry.name
                    ),
                });
            }
            raw.entry = Some(doc.entries.len());
            doc.entries.push(entry);
        }
        doc.lines.push(raw);
    }
    Ok(doc)
}

fn parse_line(path: &Path, line: usize, content: &[u8]) -> Result<UserEntry, AuthError> {
    let err = |reason: String| AuthError::Parse {
        path: path.to_owned(),
        line,
        reason,
    };
    let fields: Vec<&[u8]> = content.split(|&b| b == b':').collect();
    let name = std::str::from_utf8(fields[0]).map_err(|_| err("user name is not UTF-8".into()))?;
    validate_name(name).map_err(|e| err(e.to_string()))?;
    let password = match fields.get(1) {
        Some(p) => std::str::from_utf8(p).map_err(|_| err("password field is not UTF-8".into()))?,
        None => "",
    };
    let password = PasswordHash::parse(password);
    let id = |i: usize, what: &str| -> Result<Option<u32>, AuthError> {
        match fields.get(i) {
            None => Ok(None),
            Some([]) => Ok(None),
            Some(f) => match std::str::from_utf8(f)
                .ok()
                .and_then(|s| s.parse::<u32>().ok())
            {
                // Dovecot refuses uid/gid 0 for a userdb (db-passwd-file.c).
                Some(0) => Err(err(format!("{what} 0 (root) is not allowed"))),
                Some(n) => Ok(Some(n)),
                None => Err(err(format!(
                    "{what} {:?} is not a number (system user names are not supported)",
                    String::from_utf8_lossy(f)
                ))),
            },
        }
    };
    let uid = id(2, "uid")?;
    let gid = id(3, "gid")?;
    let home = fields
        .get(5)
        .filter(|f| !f.is_empty())
        .map(|f| PathBuf::from(OsStr::from_bytes(f)));
    let extra = match fields.get(7..) {
        Some(rest) if !rest.is_empty() => {
            if rest[0].is_empty() {
                // Old format: empty field, then a mail location that may contain ':'.
                let mail = rest[1..].join(&b':');
                if mail.is_empty() {
                    Vec::new()
                } else {
                    vec![format!("userdb_mail={}", String::from_utf8_lossy(&mail))]
                }
            } else {
                let joined = rest.join(&b':');
                joined
                    .split(|&b| b == b' ')
                    .filter(|w| !w.is_empty())
                    .map(|w| String::from_utf8_lossy(w).into_owned())
                    .collect()
            }
        }
        _ => Vec::new(),
    };
    Ok(UserEntry {
        name: name.to_owned(),
        password,
        uid,
        gid,
        home,
        extra,
        line,
    })
}

/// What identifies the file version we loaded, to notice edits (every edit renames a
/// new file into place, so the inode changes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
        }
    }
}

/// A loaded users file (Dovecot passwd-file format).
#[derive(Debug, Clone)]
pub struct UsersFile {
    path: PathBuf,
    entries: Vec<UserEntry>,
    /// Folded (ASCII lower-case) name -> index into `entries`.
    by_name: HashMap<String, usize>,
    stamp: Option<Stamp>,
    /// Index of the entry with the most costly hash (see [`UsersFile::timing_reference`]).
    timing_reference: Option<usize>,
}

pub(crate) fn read_file(path: &Path) -> Result<Option<(Vec<u8>, std::fs::Metadata)>, AuthError> {
    use std::io::Read;
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(AuthError::io("open", path, e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| AuthError::io("stat", path, e))?;
    let mut bytes = Vec::with_capacity(meta.len().try_into().unwrap_or(0));
    file.read_to_end(&mut bytes)
        .map_err(|e| AuthError::io("read", path, e))?;
    Ok(Some((bytes, meta)))
}

impl UsersFile {
    /// Reads and parses the users file at `path`.
    ///
    /// Any malformed user line is an error naming the file and line; so is a name
    /// defined twice (names compare case-insensitively). A missing file is
    /// [`AuthError::NotFound`].
    pub fn load(path: &Path) -> Result<UsersFile, AuthError> {
        let (bytes, meta) = read_file(path)?.ok_or_else(|| AuthError::NotFound(path.to_owned()))?;
        let mut file = UsersFile::parse(path, &bytes)?;
        file.stamp = Some(Stamp::of(&meta));
        Ok(file)
    }

    /// Parses users-file content; `path` is only used in error messages.
    ///
    /// A password scheme (or CRYPT format) that [`crate::verify`] cannot check is an
    /// error naming the line: such a user could never log in, and the admin should know
    /// at start-up, not from a user's complaint.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<UsersFile, AuthError> {
        let doc = parse_document(path, bytes)?;
        if let Some(e) = doc.entries.iter().find(|e| !e.password.is_supported()) {
            return Err(AuthError::Parse {
                path: path.to_owned(),
                line: e.line,
                reason: format!(
                    "user {}: password scheme {{{}}} is not supported{}",
                    e.name,
                    e.password.scheme,
                    if e.password.scheme == "CRYPT" {
                        " with this data (supported crypt formats: $1$, $5$, $6$, $2y$, $argon2, DES)"
                    } else {
                        ""
                    }
                ),
            });
        }
        // the most costly hash: failed logins are made to take as long as it
        let timing_reference = doc
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.password.data.is_empty())
            .max_by_key(|(i, e)| (e.password.cost_rank(), std::cmp::Reverse(*i)))
            .map(|(i, _)| i);
        let by_name = doc
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| (fold(&e.name), i))
            .collect();
        Ok(UsersFile {
            path: path.to_owned(),
            entries: doc.entries,
            by_name,
            stamp: None,
            timing_reference,
        })
    }

    /// The file this was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of users.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if the file holds no users.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Finds the entry for a login name (IMAP LOGIN/AUTHENTICATE or LMTP recipient).
    ///
    /// Product rules, matching Dovecot with `auth_username_format = %Ln` plus
    /// full-address entries:
    /// - names compare case-insensitively (ASCII, like Dovecot's `%L`);
    /// - for a login with a domain, a full-address entry equal to the login wins;
    ///   otherwise a bare entry equal to the login's local part matches, whatever the
    ///   domain;
    /// - a bare login matches a bare entry only.
    ///
    /// A login with more than one `@`, or an empty local part or domain, matches nothing.
    pub fn lookup(&self, login: &str) -> Option<&UserEntry> {
        let login = fold(login);
        match login.split_once('@') {
            None => self.get_folded(&login),
            Some((local, domain)) => {
                if local.is_empty() || domain.is_empty() || domain.contains('@') {
                    return None;
                }
                self.get_folded(&login).or_else(|| self.get_folded(local))
            }
        }
    }

    fn get_folded(&self, key: &str) -> Option<&UserEntry> {
        self.by_name.get(key).map(|&i| &self.entries[i])
    }

    /// All entries in file order.
    pub fn list(&self) -> impl Iterator<Item = &UserEntry> {
        self.entries.iter()
    }

    /// `(user, scheme)` for every entry whose scheme is weak (see
    /// [`PasswordHash::is_weak`]), e.g. PLAIN, so the server can warn at startup.
    pub fn weak_schemes(&self) -> Vec<(String, String)> {
        self.entries
            .iter()
            .filter(|e| e.password.is_weak())
            .map(|e| (e.name.clone(), e.password.scheme.clone()))
            .collect()
    }

    /// The password hash of the file's most costly scheme (the first such entry):
    /// [`crate::verify_unknown_user`] checks a failed login's password against it, so an
    /// unknown user costs what a wrong password of that scheme costs (issue 15 #29).
    pub fn timing_reference(&self) -> Option<&crate::PasswordHash> {
        self.timing_reference.map(|i| &self.entries[i].password)
    }

    /// True if the file on disk is no longer the version loaded (edited, replaced
    /// or touched). Like Dovecot's `passwd_file_sync()`, the caller reloads then.
    /// Always true for a `UsersFile` built by [`UsersFile::parse`].
    pub fn is_stale(&self) -> Result<bool, AuthError> {
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(AuthError::NotFound(self.path.clone()))
            }
            Err(e) => return Err(AuthError::io("stat", &self.path, e)),
        };
        Ok(self.stamp != Some(Stamp::of(&meta)))
    }
}
