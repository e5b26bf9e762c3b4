//! Small conversions between the Maildir layer's types and the index's, and reading one
//! message file into an index record.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::SystemTime;

use maildex_index::{flag, Built, MessageState, MessageWords, PartRecord, Stamp};
use maildex_maildir::{DirStamp, Flags};

use crate::StoreError;

const FLAG_MAP: [(Flags, u8); 6] = [
    (Flags::SEEN, flag::SEEN),
    (Flags::ANSWERED, flag::ANSWERED),
    (Flags::FLAGGED, flag::FLAGGED),
    (Flags::DELETED, flag::DELETED),
    (Flags::DRAFT, flag::DRAFT),
    (Flags::PASSED, flag::PASSED),
];

/// Maildir flags to index flag bits.
pub(crate) fn flag_bits(f: Flags) -> u8 {
    FLAG_MAP
        .iter()
        .filter(|(m, _)| f.contains(*m))
        .fold(0, |acc, (_, b)| acc | b)
}

pub(crate) fn stamp(d: DirStamp) -> Stamp {
    Stamp {
        mtime_ns: d.mtime_ns,
        ino: d.ino,
        size: 0,
    }
}

/// Stamp of a plain file, or the default stamp if it does not exist.
pub(crate) fn file_stamp(path: &Path) -> Result<Stamp, StoreError> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(Stamp {
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            ino: m.ino(),
            size: m.len(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Stamp::default()),
        Err(e) => Err(StoreError::io(path, e)),
    }
}

pub(crate) fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A time as `st_mtime` holds it: whole seconds since the epoch, rounded down (also
/// before 1970).
pub(crate) fn unix_secs(t: SystemTime) -> i64 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => {
            let before = e.duration();
            let whole = before.as_secs() as i64;
            if before.subsec_nanos() > 0 {
                -whole - 1
            } else {
                -whole
            }
        }
    }
}

/// Files up to this size are read into memory; larger ones are mapped.
const READ_LIMIT: u64 = 256 * 1024;

/// A buffer that message files are read into, kept by a worker from one file to the next
/// (`parallel::map_in_parallel`'s state): a fresh buffer for each file cost a first touch
/// of every page of it, and for files over glibc's mmap threshold an mmap and an munmap
/// with its TLB shootdown, about a tenth of a rebuild's CPU (`perf record`, issue 19 #1).
/// Its length is the most it has held (those bytes are initialized), so a file is read
/// into a slice of it without zeroing it first.
#[derive(Default)]
pub(crate) struct FileBuf(Vec<u8>);

impl FileBuf {
    /// Reads `file`, of `len` bytes by its metadata, to its end: one `read` for the
    /// `len` bytes and one that finds the end (`File::read_to_end` asks the size again
    /// with `fstat` and `lseek` first: three system calls for each file of a rebuild
    /// where none is needed).
    fn read(&mut self, mut file: &std::fs::File, len: usize) -> std::io::Result<&[u8]> {
        if self.0.len() < len {
            self.0.resize(len, 0);
        }
        let mut got = 0;
        while got < len {
            match file.read(&mut self.0[got..len]) {
                Ok(0) => return Ok(&self.0[..got]), // shorter than its metadata said
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        // Maildir files are never written after their rename, but a file that grew since
        // its metadata was read is read whole
        let mut probe = [0u8; 64];
        let n = loop {
            match file.read(&mut probe) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                other => break other?,
            }
        };
        if n == 0 {
            return Ok(&self.0[..len]);
        }
        self.0.truncate(len);
        self.0.extend_from_slice(&probe[..n]);
        file.read_to_end(&mut self.0)?;
        Ok(&self.0)
    }
}

/// Opens message file `path` and calls `f` with its bytes and its mtime (whole seconds).
fn with_file<T>(
    path: &Path,
    buf: &mut FileBuf,
    f: impl FnOnce(&[u8], i64) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    // O_NOFOLLOW, regular files only: a link planted in cur/ is not indexed (issue 15 #2)
    let (file, md) =
        maildex_maildir::open_message_with_metadata(path).map_err(|e| StoreError::io(path, e))?;
    with_metadata(file, md, path, buf, f)
}

/// [`with_file`] of a file already opened (from `path`).
fn with_opened<T>(
    file: std::fs::File,
    path: &Path,
    buf: &mut FileBuf,
    f: impl FnOnce(&[u8], i64) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let md = file.metadata().map_err(|e| StoreError::io(path, e))?;
    with_metadata(file, md, path, buf, f)
}

/// [`with_opened`] with the file's metadata read already.
fn with_metadata<T>(
    file: std::fs::File,
    md: std::fs::Metadata,
    path: &Path,
    buf: &mut FileBuf,
    f: impl FnOnce(&[u8], i64) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    if md.len() <= READ_LIMIT {
        let bytes = buf
            .read(&file, md.len() as usize)
            .map_err(|e| StoreError::io(path, e))?;
        f(bytes, md.mtime())
    } else {
        // SAFETY: Maildir message files are written once in tmp/ and never modified after
        // the rename (every Maildir tool, Dovecot included, relies on this); a tool that
        // truncated one in place while we map it could fault us, as it would Dovecot.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| StoreError::io(path, e))?;
        f(&map, md.mtime())
    }
}

/// Reads a message file and builds its index record ([`build`]: no full text). INTERNALDATE
/// is the file's mtime, as Dovecot keeps it for Maildir.
pub(crate) fn index_file(path: &Path, state: MessageState) -> Result<Built, StoreError> {
    index_file_in(path, state, &mut FileBuf::default())
}

/// [`index_file`], reading the file into `buf`.
pub(crate) fn index_file_in(
    path: &Path,
    mut state: MessageState,
    buf: &mut FileBuf,
) -> Result<Built, StoreError> {
    with_file(path, buf, |bytes, mtime| {
        state.internal_date = mtime;
        build(bytes, state)
    })
}

/// The index record of a message: the MIME summary's fields (maildex-index) and what
/// SEARCH's header criteria compare (maildex-text), so every path that indexes a message
/// (delivery, APPEND, COPY of a file, sync, rebuild) stores both. Not the full text
/// (`text` and `text_sig` stay empty: no `fts-text`/`fts-sig` record is written): that is
/// written after the listing records, by [`crate::UserStore::index_pending_text`] (the
/// daemon's background indexer, SEARCH BODY/TEXT, `index rebuild`), so that extracting
/// it never slows delivery (issues 18 #3, 19 #1).
pub(crate) fn build(bytes: &[u8], state: MessageState) -> Result<Built, StoreError> {
    let summary = maildex_mime::summarize(bytes);
    let mut built = maildex_index::build(bytes, &summary, state)?;
    let root = &summary.root;
    let end = usize::try_from(root.body_start).map_or(bytes.len(), |e| e.min(bytes.len()));
    let start = usize::try_from(root.header_start).map_or(end, |s| s.min(end));
    let header = &bytes[start..end];
    // the sort and thread keys and the search fields are computed here, once (RFC 2047
    // decoding and the comparison forms are maildex-text's)
    built.record.cached.sort = maildex_text::sort_keys(header, &summary.envelope);
    built.record.cached.search = maildex_text::search_fields(header);
    Ok(built)
}

/// A message's full text as the index stores it (issue 18 #2): the encoded `fts-text`
/// record, its `fts-sig` signature and its `fts-words` words.
#[derive(Clone, Debug)]
pub(crate) struct StoredText {
    pub text: Vec<u8>,
    pub sig: Vec<u8>,
    pub words: MessageWords,
}

/// What SEARCH BODY/TEXT compare of a message (issue 18 #2), from its bytes and its part
/// tree as the index stores it: the scan's rule (text parts decoded, HTML as written),
/// normalised. Even a message without any text gets a record (an empty one, a few bytes),
/// so a message without a record is one whose text is not indexed yet, nothing else.
pub(crate) fn text(bytes: &[u8], parts: &PartRecord) -> Result<StoredText, StoreError> {
    let text = maildex_text::MessageText::extract(bytes, parts, maildex_text::Html::AsWritten);
    let mut record = maildex_text::SearchText::new(text).into_record();
    let sig = maildex_index::signature(&record);
    let words = maildex_index::message_words(&record);
    // the signature and the words cover the header text, the record does not: the header
    // blocks are in the `headers` column already, and TEXT decodes them from there (a
    // third of the stored text's bytes, docs/INDEX-FORMAT.md)
    record.headers.clear();
    Ok(StoredText {
        text: record.encode()?,
        sig,
        words,
    })
}

/// The words of a message whose stored text record (`text`, encoded) is copied to
/// another mailbox: the words [`text`] gave when the record was written. `None` without
/// a record (the copy is indexed as pending) or when it cannot be read.
pub(crate) fn words_of_stored(text: &[u8]) -> Option<MessageWords> {
    if text.is_empty() {
        return None;
    }
    let record = maildex_index::TextRecord::decode(text, &"copied fts-text").ok()?;
    Some(maildex_index::message_words(&record))
}

/// [`text`] of the message whose file `found` is opened, with its stored part tree
/// `parts`.
pub(crate) fn text_of_opened(
    found: crate::MessageFile,
    parts: &PartRecord,
    buf: &mut FileBuf,
) -> Result<StoredText, StoreError> {
    with_opened(found.file, &found.path, buf, |bytes, _| text(bytes, parts))
}

/// The whole index record of message file `path`, full text included (and its words),
/// parsed afresh (what `index check` compares the stored records with, and what it
/// repairs them to).
pub(crate) fn index_file_with_text(
    path: &Path,
    state: MessageState,
) -> Result<(Built, MessageWords), StoreError> {
    with_file(path, &mut FileBuf::default(), |bytes, mtime| {
        let mut built = build(
            bytes,
            MessageState {
                internal_date: mtime,
                ..state
            },
        )?;
        let t = text(bytes, &built.record.cached.parts)?;
        built.record.cached.text = t.text;
        built.record.cached.text_sig = t.sig;
        Ok((built, t.words))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_buffer_reads_each_file_whole_and_only_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut buf = FileBuf::default();
        // longer, shorter, empty, then longer again: no bytes of an earlier file show
        for (i, len) in [5000usize, 12, 0, 70_000].into_iter().enumerate() {
            let path = dir.path().join(format!("m{i}"));
            let body: Vec<u8> = (0..len).map(|j| (j * 7 + i) as u8).collect();
            std::fs::write(&path, &body).unwrap();
            let file = std::fs::File::open(&path).unwrap();
            assert_eq!(buf.read(&file, len).unwrap(), &body[..], "file {i}");
        }
        // metadata that says less or more than the file holds: the file as it is
        let path = dir.path().join("grown");
        std::fs::write(&path, b"0123456789").unwrap();
        let file = std::fs::File::open(&path).unwrap();
        assert_eq!(buf.read(&file, 4).unwrap(), b"0123456789");
        let file = std::fs::File::open(&path).unwrap();
        assert_eq!(buf.read(&file, 20).unwrap(), b"0123456789");
    }

    #[test]
    fn every_maildir_flag_has_its_own_index_bit() {
        let mut all = Flags::EMPTY;
        let mut bits = 0u8;
        for (f, b) in FLAG_MAP {
            assert_eq!(flag_bits(f), b);
            assert_eq!(bits & b, 0, "bit {b:#x} used twice");
            bits |= b;
            all.insert(f);
        }
        assert_eq!(flag_bits(all), bits);
        assert_eq!(flag_bits(Flags::EMPTY), 0);
    }
}
