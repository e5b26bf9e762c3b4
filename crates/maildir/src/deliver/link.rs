//! The one loop that makes a message file visible in `new/` or `cur/` under a fresh unique
//! name, used by delivery ([`super::TmpFile::commit`]), the store's one-file-many-mailboxes
//! delivery and COPY ([`crate::transfer::copy_file`]).

use std::fs;
use std::io;
use std::path::Path;

use maildex_faults::Point;

use super::{ops, unlink_after_failure, Delivered, NAME_ATTEMPTS};
use crate::filename::{unique_id, with_sizes, MaildirName};
use crate::flags::{Flags, Keywords};
use crate::scan::Sub;
use crate::util::fsync_dir;
use crate::MaildirError;

/// What happens to the source of a [`link_unique`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkSource {
    /// A `tmp/` file of the caller's: removed once linked, and renamed (never replacing)
    /// where the filesystem has no hard links.
    Consume,
    /// A file other deliveries link too: it stays, hard links only. Where the filesystem
    /// refuses them the error's source satisfies [`crate::transfer::link_unsupported`]
    /// and the caller copies instead.
    Keep,
}

/// Where and how [`link_unique`] puts a file.
#[derive(Clone, Debug)]
pub struct LinkInto<'a> {
    /// The mailbox folder (holding `new/`, `cur/`).
    pub mailbox: &'a Path,
    /// `new/` (no flags allowed) or `cur/` (with `:2,<flags>`).
    pub sub: Sub,
    /// System flags of the name.
    pub flags: Flags,
    /// Keyword letters of the name.
    pub keywords: Keywords,
    /// Physical and CRLF size, written into the base as `,S=` and `,W=`.
    pub sizes: (u64, u64),
    /// The unique part to try first (a delivery keeps its `tmp/` name); a fresh
    /// [`unique_id`] otherwise and after a collision.
    pub first_id: Option<String>,
    /// The fault point hit before each link.
    pub fault: Point,
    /// fsync the destination folder after the link; when that fails the new name is
    /// removed again (not durable, so not delivered: a sender's retry must not find it).
    pub fsync: bool,
    /// What happens to the source.
    pub source: LinkSource,
}

/// Links `src` into `to.mailbox/<sub>/<unique>,S=..,W=..[:2,<flags>]`, never replacing a
/// file (`link(2)` fails on an existing name, as Dovecot's delivery relies on too; then a
/// fresh name is tried). `link(2)` does not follow a symbolic link `src`: callers that
/// did not create `src` themselves check it is a regular file first. On an error the
/// source is left where it was, except after a successful link whose folder fsync failed.
pub fn link_unique(src: &Path, to: LinkInto<'_>) -> Result<Delivered, MaildirError> {
    let (flags, keywords, (size, vsize)) = (to.flags, to.keywords, to.sizes);
    if to.sub == Sub::New && !(flags.is_empty() && keywords.is_empty()) {
        return Err(MaildirError::FlagsInNew {
            path: to.mailbox.to_path_buf(),
        });
    }
    let dir = to.sub.path(to.mailbox);
    let mut first = to.first_id;
    for _ in 0..NAME_ATTEMPTS {
        let id = first.take().unwrap_or_else(unique_id);
        let name = MaildirName {
            base: with_sizes(&id, size, vsize),
            size: Some(size),
            vsize: Some(vsize),
            flags,
            keywords,
            unknown_flags: String::new(),
            has_info: to.sub == Sub::Cur,
        };
        let file_name = name.file_name();
        let dest = dir.join(&file_name);
        crate::own_writes::note(&dest);
        let linked = maildex_faults::hit(to.fault).and_then(|()| match to.source {
            LinkSource::Consume => ops::link_noreplace(src, &dest),
            LinkSource::Keep => fs::hard_link(src, &dest).map(|()| false),
        });
        match linked {
            Ok(remove_src) => {
                crate::own_writes::done(&dest, crate::own_writes::Change::Appeared);
                if remove_src {
                    if let Err(e) = fs::remove_file(src) {
                        // linked anyway; the tmp/ cleanup removes it later
                        tracing::warn!(path = %src.display(), error = %e, "could not remove temporary file after link");
                    }
                }
                if to.fsync {
                    if let Err(e) = fsync_dir(&dir) {
                        unlink_after_failure(&dest);
                        return Err(e);
                    }
                }
                return Ok(Delivered {
                    path: dest,
                    file_name,
                    name,
                    size,
                    vsize,
                });
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(MaildirError::io("link", &dest, e)),
        }
    }
    Err(MaildirError::NameCollision {
        path: dir,
        attempts: NAME_ATTEMPTS,
    })
}
