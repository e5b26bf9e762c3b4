//! Maildir++ `maildirsize`: the quota file Courier, maildrop, Exim and Dovecot's `quota =
//! maildir` read and write (Courier's README.maildirquota, "Contents of maildirsize";
//! Dovecot 2.3 doc "Quota Backend: maildir", src/plugins/quota/quota-maildir.c).
//!
//! In the Maildir root: a first line with the quota definition, comma-separated
//! `<n>S` (bytes) and `<n>C` (messages), then lines of two integers, `<bytes> <count>`,
//! each a change (negative for removals); the use is the sum of those lines. A writer appends
//! its change in one `write` to a file opened `O_APPEND`; when the file reaches
//! [`RECALC_AT`] bytes it is recalculated: written anew, with the definition and one line of
//! totals, to a temporary name and renamed over the old one. The sizes are the messages'
//! file sizes (the `S=` of their names), as a recalculation by any Maildir++ tool counts
//! them. There is no lock, by the specification's design: two writers racing with a
//! recalculation may leave the file off by a message until the next one.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::MaildirError;

/// The file's name in the Maildir root.
pub const FILE_NAME: &str = "maildirsize";

/// A file this long is recalculated (README.maildirquota: "If the maildirsize file is
/// larger than 5120 bytes ... recalculate"; Dovecot reads at most 5120 bytes and
/// recalculates a file it could not read whole).
pub const RECALC_AT: u64 = 5120;

/// What a `maildirsize` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaildirSize {
    /// The first line: the quota definition (`1048576S` or `1048576S,100C`).
    pub definition: String,
    /// The sum of the byte column.
    pub bytes: i64,
    /// The sum of the count column.
    pub count: i64,
    /// Lines after the definition.
    pub lines: usize,
    /// The file's length.
    pub len: u64,
}

/// The definition line for a storage limit of `bytes` (and no message limit): `<bytes>S`,
/// as Dovecot writes it (`0S` for none).
pub fn definition(bytes: u64) -> String {
    format!("{bytes}S")
}

fn path_of(root: &Path) -> PathBuf {
    root.join(FILE_NAME)
}

/// Reads `root`'s `maildirsize`: `Ok(None)` when there is none or it does not parse (a
/// broken file is recalculated, as Dovecot does). Not followed through a link.
pub fn read(root: &Path) -> Result<Option<MaildirSize>, MaildirError> {
    let path = path_of(root);
    let mut text = String::new();
    match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
    {
        Ok(f) => {
            if !f
                .metadata()
                .map_err(|e| MaildirError::io("stat", &path, e))?
                .is_file()
            {
                return Ok(None);
            }
            // a longer file is recalculated anyway: read no more than that
            f.take(RECALC_AT * 4)
                .read_to_string(&mut text)
                .map_err(|e| MaildirError::io("read", &path, e))?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(None),
        Err(e) => return Err(MaildirError::io("open", &path, e)),
    }
    Ok(parse(&text))
}

/// Parses the text of a `maildirsize`; `None` when it is not one.
pub fn parse(text: &str) -> Option<MaildirSize> {
    let mut lines = text.split_terminator('\n');
    let definition = lines.next()?.to_owned();
    let (mut bytes, mut count, mut n) = (0i64, 0i64, 0);
    for line in lines {
        let mut f = line.split_whitespace();
        let b: i64 = f.next()?.parse().ok()?;
        let c: i64 = f.next()?.parse().ok()?;
        bytes = bytes.checked_add(b)?;
        count = count.checked_add(c)?;
        n += 1;
    }
    Some(MaildirSize {
        definition,
        bytes,
        count,
        lines: n,
        len: text.len() as u64,
    })
}

/// Appends the change `bytes count` to `root`'s `maildirsize` in one write. Returns the
/// file's length after it, or `None` when there is no file (a recalculation writes one).
pub fn append(root: &Path, bytes: i64, count: i64) -> Result<Option<u64>, MaildirError> {
    let path = path_of(root);
    let mut f = match OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(MaildirError::io("open", &path, e)),
    };
    if !f
        .metadata()
        .map_err(|e| MaildirError::io("stat", &path, e))?
        .is_file()
    {
        return Ok(None);
    }
    f.write_all(format!("{bytes} {count}\n").as_bytes())
        .map_err(|e| MaildirError::io("write", &path, e))?;
    let len = f
        .metadata()
        .map_err(|e| MaildirError::io("stat", &path, e))?
        .len();
    Ok(Some(len))
}

/// Writes `root`'s `maildirsize` anew: `definition`, then one line of totals; through a
/// temporary file (mode 0600, `maildirsize.<pid>.<n>` as Dovecot's `maildirsize.<host>.<pid>`)
/// renamed over the old one, so a reader sees the old file or the new one.
pub fn write(root: &Path, definition: &str, bytes: u64, count: u64) -> Result<(), MaildirError> {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = root.join(format!("{FILE_NAME}.{}.{n}", std::process::id()));
    let text = format!("{definition}\n{bytes} {count}\n");
    let _ = fs::remove_file(&tmp);
    crate::util::write_replace(&tmp, &path_of(root), text.as_bytes(), 0o600, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_add_up_and_a_rewrite_keeps_one_line_of_totals() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(read(root).unwrap(), None);
        assert_eq!(
            append(root, 10, 1).unwrap(),
            None,
            "no file: nothing appended"
        );
        write(root, &definition(1_048_576), 300, 2).unwrap();
        assert_eq!(append(root, 100, 1).unwrap(), Some(21));
        append(root, -300, -2).unwrap();
        let s = read(root).unwrap().unwrap();
        assert_eq!(
            (s.definition.as_str(), s.bytes, s.count, s.lines),
            ("1048576S", 100, 1, 3)
        );
        assert_eq!(
            fs::read_to_string(root.join(FILE_NAME)).unwrap(),
            "1048576S\n300 2\n100 1\n-300 -2\n"
        );
        write(root, "1048576S", 100, 1).unwrap();
        assert_eq!(
            fs::read_to_string(root.join(FILE_NAME)).unwrap(),
            "1048576S\n100 1\n"
        );
        let names: Vec<_> = fs::read_dir(root).unwrap().map(|e| e.unwrap()).collect();
        assert_eq!(names.len(), 1, "no temporary file left");
    }

    #[test]
    fn what_is_not_a_maildirsize_is_none() {
        assert_eq!(parse(""), None);
        assert_eq!(parse("100S\n12 x\n"), None);
        assert_eq!(parse("100S\n12\n"), None);
        assert_eq!(parse("100S\n").unwrap().lines, 0);
        // Courier pads lines with spaces
        let s = parse("100S,5C\n   12    1\n").unwrap();
        assert_eq!(
            (s.bytes, s.count, s.definition.as_str()),
            (12, 1, "100S,5C")
        );
    }
}
