//! A message being received (LMTP DATA, `maildex deliver`'s standard input): a file in a
//! mailbox's `tmp/` that the store owns and the caller fills through [`std::io::Write`],
//! then prepares once for delivery into any number of mailboxes
//! ([`crate::UserStore::deliver_file`]). The Maildir type behind it stays in the store.

use std::io::{self, Write};
use std::path::Path;
use std::time::SystemTime;

use maildex_index::MessageState;
use maildex_maildir::TmpFile;

use crate::deliver::PreparedMessage;
use crate::{convert, StoreError, UserStore};

/// A message file being written in some mailbox's `tmp/`. Dropping it removes the file
/// (deliveries made from it are links or copies, and stay).
#[derive(Debug)]
pub struct IncomingMessage {
    tmp: TmpFile,
}

impl IncomingMessage {
    /// The file's path (for error messages).
    pub fn path(&self) -> &Path {
        self.tmp.path()
    }

    /// Flushes and fsyncs the file (setting its mtime, the messages' INTERNALDATE, to
    /// `internal_date` or now) and builds its index record once. A caller that still
    /// holds everything it wrote passes it as `whole`: the record is built from those
    /// bytes instead of reading the file back (`whole` must be exactly the file's content,
    /// checked by its size). Keep this alive until the last delivery of the result.
    pub fn prepare(
        &mut self,
        internal_date: Option<SystemTime>,
        whole: Option<&[u8]>,
    ) -> Result<PreparedMessage, StoreError> {
        let tmp = &mut self.tmp;
        let mtime = internal_date.unwrap_or_else(SystemTime::now);
        tmp.set_mtime(mtime);
        tmp.sync()?;
        let built = match whole {
            Some(bytes) if bytes.len() as u64 == tmp.size() => {
                let state = MessageState {
                    internal_date: convert::unix_secs(mtime),
                    ..MessageState::default()
                };
                convert::build(bytes, state)?
            }
            _ => convert::index_file(tmp.path(), MessageState::default())?,
        };
        Ok(PreparedMessage {
            path: tmp.path().to_path_buf(),
            built,
            size: tmp.size(),
            vsize: tmp.vsize(),
            mtime,
        })
    }
}

impl Write for IncomingMessage {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tmp.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.tmp.flush()
    }
}

impl UserStore {
    /// Starts a message in `tmp/` of `mailbox`, to be written by the caller, then
    /// [`IncomingMessage::prepare`]d and handed to [`UserStore::deliver_file`] for one or
    /// more mailboxes (LMTP streams DATA into it). fsync follows the store's options.
    pub fn incoming(&self, mailbox: &str) -> Result<IncomingMessage, StoreError> {
        let (_, path) = self.delivery_target(mailbox)?;
        Ok(IncomingMessage {
            tmp: self.tmp_in(&path)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::IncomingMessage;
    use maildex_maildir::TmpFile;
    use std::io::Write;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    const MSG: &[u8] = b"From: a@example.org\nSubject: hi\nMessage-ID:\n <x@y>\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nhello\n--b--\n";

    fn prepared(dir: &std::path::Path, when: SystemTime, whole: Option<&[u8]>) -> String {
        let mut tmp = TmpFile::create(dir).unwrap();
        tmp.set_durable(false);
        let mut m = IncomingMessage { tmp };
        m.write_all(MSG).unwrap();
        let p = m.prepare(Some(when), whole).unwrap();
        assert_eq!(p.message_id().as_deref(), Some("<x@y>"));
        format!("{:?} {} {}", p.built, p.size, p.vsize)
    }

    #[test]
    fn a_record_built_from_memory_is_the_one_read_back_from_the_file() {
        let d = tempfile::tempdir().unwrap();
        for sub in ["tmp", "new", "cur"] {
            std::fs::create_dir(d.path().join(sub)).unwrap();
        }
        let after = UNIX_EPOCH + Duration::from_millis(1_700_000_000_500);
        let before = UNIX_EPOCH - Duration::from_millis(1_500);
        for when in [after, before] {
            let from_file = prepared(d.path(), when, None);
            assert_eq!(prepared(d.path(), when, Some(MSG)), from_file);
            // bytes that are not the file's are not trusted: the file is read
            assert_eq!(prepared(d.path(), when, Some(b"other")), from_file);
        }
        assert!(prepared(d.path(), before, None).contains("internal_date: -2"));
    }
}
