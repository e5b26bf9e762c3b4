//! Body bytes from message files: a byte range streamed in chunks with LF -> CRLF
//! conversion (and NUL -> 0x80, as Dovecot does), cut to a partial `<origin.count>` of the
//! converted bytes (RFC 3501 §6.4.5), written as a literal whose length the index knew in
//! advance. Memory per session stays at one chunk whatever the message size.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use maildex_imap_proto::Partial;
use maildex_store::section::Converter;

use super::{blocking, CmdError, Session, FLUSH_AT};

/// Bytes read from a message file at once: each read is a trip to the blocking pool, and
/// at 64 KiB the thread switches were a seventh of the server's CPU streaming 8 MiB bodies.
pub(super) const CHUNK: usize = 256 * 1024;

/// An open message file, read off the reactor by positioned reads (`pread`) on the
/// blocking pool straight into the caller's buffer, which moves there and back: no seek,
/// and no copy through an intermediate buffer as `tokio::fs::File` makes.
pub(super) struct BodyFile(Arc<std::fs::File>);

impl BodyFile {
    pub(super) fn new(file: std::fs::File) -> BodyFile {
        BodyFile(Arc::new(file))
    }

    /// Reads up to `want` bytes at `offset` into `buf[..n]` (`buf` grows to `want` the
    /// first time and keeps its length); 0 at the end of the file.
    pub(super) async fn read_at(
        &self,
        offset: u64,
        buf: &mut Vec<u8>,
        want: usize,
    ) -> Result<usize, CmdError> {
        let file = Arc::clone(&self.0);
        let mut b = std::mem::take(buf);
        if b.len() < want {
            b.resize(want, 0);
        }
        let (b, read) = blocking(move || {
            let read = loop {
                match file.read_at(&mut b[..want], offset) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    r => break r,
                }
            };
            (b, read)
        })
        .await?;
        *buf = b;
        Ok(read?)
    }
}

/// The octets of a `vsize`-octet section that a partial selects: (skip, take).
pub(crate) fn partial_window(vsize: u64, partial: Option<Partial>) -> (u64, u64) {
    match partial {
        None => (0, vsize),
        Some(p) => {
            let origin = u64::from(p.origin);
            if origin >= vsize {
                (vsize, 0)
            } else {
                (origin, u64::from(p.count).min(vsize - origin))
            }
        }
    }
}

impl Session {
    /// Writes bytes `start..end` of `file` as a literal of the section's CRLF form,
    /// `vsize` octets long, cut to `partial`. If the file turns out shorter than the
    /// index said (changed behind our back), the literal is padded with spaces so the
    /// protocol stays in step, and the fault is logged.
    pub(super) async fn write_file_literal(
        &mut self,
        file: &BodyFile,
        path: &Path,
        (start, end, vsize): (u64, u64, u64),
        partial: Option<Partial>,
    ) -> Result<(), CmdError> {
        let (mut skip, take) = partial_window(vsize, partial);
        maildex_imap_proto::encode::literal_header(&mut self.out, take, false);
        let mut left = take;
        let mut raw = Vec::new();
        let mut crlf = Converter::crlf();
        let mut pos = start;
        while left > 0 && pos < end {
            let want = usize::try_from((end - pos).min(CHUNK as u64)).unwrap_or(CHUNK);
            let n = file.read_at(pos, &mut raw, want).await?;
            if n == 0 {
                break;
            }
            pos += n as u64;
            // converted straight into the output, then cut to the partial's window
            let at = self.out.len();
            crlf.feed(&raw[..n], &mut self.out);
            if skip > 0 {
                let made = (self.out.len() - at) as u64;
                let s = usize::try_from(skip.min(made)).unwrap_or(0);
                self.out.drain(at..at + s);
                skip -= s as u64;
            }
            let made = (self.out.len() - at) as u64;
            let t = usize::try_from(left.min(made)).unwrap_or(0);
            self.out.truncate(at + t);
            left -= t as u64;
            if self.out.len() >= FLUSH_AT {
                self.flush().await?;
            }
        }
        if left > 0 {
            tracing::error!(file = %path.display(), missing = left, "message file shorter than its index record; padded");
            let pad = usize::try_from(left).unwrap_or(0);
            self.out.resize(self.out.len() + pad, b' ');
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_windows() {
        assert_eq!(partial_window(100, None), (0, 100));
        let p = |origin, count| Some(Partial { origin, count });
        assert_eq!(partial_window(100, p(10, 20)), (10, 20));
        assert_eq!(partial_window(100, p(90, 20)), (90, 10));
        assert_eq!(partial_window(100, p(100, 20)), (100, 0));
        assert_eq!(partial_window(100, p(500, 20)), (100, 0));
    }
}
