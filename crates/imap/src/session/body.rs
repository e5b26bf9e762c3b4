//! Body bytes from message files: a byte range read and converted (LF -> CRLF, and NUL ->
//! 0x80, as Dovecot does) on a blocking thread while the session writes the previous chunk
//! to the socket, cut to a partial `<origin.count>` of the converted bytes (RFC 3501
//! §6.4.5), written as a literal whose length the index knew in advance. Memory per
//! streaming session stays at a few chunks whatever the message size ([`AHEAD`] converted
//! chunks queued for a slow reader, one being read, one being written).

use std::os::unix::fs::FileExt as _;
use std::path::Path;

use maildex_imap_proto::Partial;
use maildex_store::section::Converter;
use tokio::sync::mpsc;

use super::{blocking, CmdError, Session, FLUSH_AT};

/// Bytes read from a message file at once.
const CHUNK: usize = 128 * 1024;
/// Converted chunks that may wait for the socket.
const AHEAD: usize = 1;

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

/// Reads bytes `start..end` of `file`, converts them and hands the window `skip`/`take`
/// of the converted bytes to `sink` in chunks, until it returns false (the session is
/// gone). Blocking.
fn produce(
    file: &std::fs::File,
    (start, end): (u64, u64),
    (mut skip, mut left): (u64, u64),
    sink: &mut dyn FnMut(Vec<u8>) -> bool,
) -> std::io::Result<()> {
    let mut raw = vec![0u8; CHUNK.min(usize::try_from(end - start).unwrap_or(CHUNK))];
    let mut crlf = Converter::crlf();
    let mut pos = start;
    while left > 0 && pos < end {
        let want = usize::try_from((end - pos).min(raw.len() as u64)).unwrap_or(raw.len());
        let n = match file.read_at(&mut raw[..want], pos) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        pos += n as u64;
        let mut conv = Vec::with_capacity(n + n / 8 + 2);
        crlf.feed(&raw[..n], &mut conv);
        let from = usize::try_from(skip.min(conv.len() as u64)).unwrap_or(conv.len());
        skip -= from as u64;
        let take = usize::try_from(left.min((conv.len() - from) as u64)).unwrap_or(0);
        if take == 0 {
            continue;
        }
        left -= take as u64;
        let piece = if from == 0 && take == conv.len() {
            conv
        } else {
            conv[from..from + take].to_vec()
        };
        if !sink(piece) {
            break;
        }
    }
    Ok(())
}

impl Session {
    /// Writes bytes `start..end` of `file` as a literal of the section's CRLF form,
    /// `vsize` octets long, cut to `partial`. If the file turns out shorter than the
    /// index said (changed behind our back), the literal is padded with spaces so the
    /// protocol stays in step, and the fault is logged.
    pub(super) async fn write_file_literal(
        &mut self,
        file: &std::sync::Arc<std::fs::File>,
        path: &Path,
        (start, end, vsize): (u64, u64, u64),
        partial: Option<Partial>,
    ) -> Result<(), CmdError> {
        let (skip, take) = partial_window(vsize, partial);
        maildex_imap_proto::encode::literal_header(&mut self.out, take, false);
        let mut left = take;
        let f = std::sync::Arc::clone(file);
        if left > 0 && end.saturating_sub(start) <= CHUNK as u64 {
            // a small section: read in one go and kept with the rest of the response
            let bytes = blocking(move || {
                let mut all = Vec::new();
                produce(&f, (start, end), (skip, take), &mut |piece| {
                    all.extend_from_slice(&piece);
                    true
                })
                .map(|()| all)
            })
            .await??;
            left -= bytes.len() as u64;
            self.out.extend_from_slice(&bytes);
            if self.out.len() >= FLUSH_AT {
                self.flush().await?;
            }
        } else if left > 0 {
            let (tx, mut rx) = mpsc::channel(AHEAD);
            tokio::task::spawn_blocking(move || {
                let mut send = |piece| tx.blocking_send(Ok(piece)).is_ok();
                if let Err(e) = produce(&f, (start, end), (skip, take), &mut send) {
                    let _ = tx.blocking_send(Err(e));
                }
            });
            // what the FETCH line holds so far goes out first, the chunks as they come
            self.flush().await?;
            while let Some(chunk) = rx.recv().await {
                let chunk = chunk?;
                left -= chunk.len() as u64;
                self.write(&chunk).await?;
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
