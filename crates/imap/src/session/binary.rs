//! FETCH BINARY[part]<partial>, BINARY.PEEK and BINARY.SIZE (RFC 3516): a part's body with
//! its Content-Transfer-Encoding undone. The decoded size is not in the index, so the part
//! is decoded twice, chunk by chunk: once to learn the literal's length (and whether it
//! holds NUL, which needs `~{n}`, RFC 3516 §4.2), once to send it. Memory stays at a chunk.

use std::path::Path;

use maildex_imap_proto::{encode, Partial, ResponseCode};
use maildex_store::records::Cached;
use maildex_store::section::{locate_binary, BinaryPart};

use super::body::{partial_window, BodyFile, CHUNK};
use super::{CmdError, Session, FLUSH_AT};

/// Locates `BINARY[path]` through the store (RFC 3516 §4.2); an encoding the server cannot
/// undo is `NO [UNKNOWN-CTE]`.
pub(super) fn binary_part(
    cached: &Cached,
    headers: Option<&[u8]>,
    path: &[u32],
) -> Result<BinaryPart, CmdError> {
    match locate_binary(cached, headers.unwrap_or(&[]), path) {
        None => Err(CmdError::server("header block missing from the index")),
        Some(BinaryPart::UnknownEncoding) => Err(CmdError::no(
            ResponseCode::UnknownCte,
            "Unknown Content-Transfer-Encoding.",
        )),
        Some(part) => Ok(part),
    }
}

/// Runs the decoder over `start..end` of `file`, calling `sink` with each decoded piece.
async fn decode_range(
    file: &BodyFile,
    part: &BinaryPart,
    mut sink: impl FnMut(&[u8]),
) -> Result<(), CmdError> {
    let BinaryPart::Range { start, end, .. } = *part else {
        return Ok(());
    };
    let mut dec = part.decoder();
    let mut raw = Vec::new();
    let mut out = Vec::with_capacity(CHUNK + CHUNK / 8);
    let mut pos = start;
    while pos < end {
        let want = usize::try_from((end - pos).min(CHUNK as u64)).unwrap_or(CHUNK);
        let n = file.read_at(pos, &mut raw, want).await?;
        if n == 0 {
            break;
        }
        pos += n as u64;
        out.clear();
        dec.feed(&raw[..n], &mut out);
        sink(&out);
    }
    out.clear();
    dec.finish(&mut out);
    sink(&out);
    Ok(())
}

impl Session {
    /// Decoded size of a BINARY part (BINARY.SIZE, and the first pass of BINARY).
    pub(super) async fn binary_size(
        file: &BodyFile,
        part: &BinaryPart,
    ) -> Result<(u64, bool), CmdError> {
        let (mut size, mut nul) = (0u64, false);
        decode_range(file, part, |piece| {
            size += piece.len() as u64;
            nul |= memchr_nul(piece);
        })
        .await?;
        Ok((size, nul))
    }

    /// Writes a BINARY section's value: `~{n}` / `{n}` and the decoded bytes, or `""`.
    pub(super) async fn write_binary(
        &mut self,
        file: &BodyFile,
        path: &Path,
        part: &BinaryPart,
        partial: Option<Partial>,
    ) -> Result<(), CmdError> {
        let BinaryPart::Range { start, end, .. } = *part else {
            self.out.extend_from_slice(b"\"\"");
            return Ok(());
        };
        let (size, nul) = Self::binary_size(file, part).await?;
        let (mut skip, take) = partial_window(size, partial);
        encode::literal_header(&mut self.out, take, nul);
        let mut left = take;
        let mut pending: Vec<u8> = Vec::new();
        // decode again, sending the window; flush between chunks
        let mut dec = part.decoder();
        let mut raw = Vec::new();
        let mut pos = start;
        let mut finished = false;
        while left > 0 && !finished {
            pending.clear();
            if pos < end {
                let want = usize::try_from((end - pos).min(CHUNK as u64)).unwrap_or(CHUNK);
                let n = file.read_at(pos, &mut raw, want).await?;
                if n == 0 {
                    dec.finish(&mut pending);
                    finished = true;
                } else {
                    pos += n as u64;
                    dec.feed(&raw[..n], &mut pending);
                }
            } else {
                dec.finish(&mut pending);
                finished = true;
            }
            let mut piece = &pending[..];
            if skip > 0 {
                let s = usize::try_from(skip.min(piece.len() as u64)).unwrap_or(piece.len());
                piece = &piece[s..];
                skip -= s as u64;
            }
            let t = usize::try_from(left.min(piece.len() as u64)).unwrap_or(piece.len());
            self.out.extend_from_slice(&piece[..t]);
            left -= t as u64;
            if self.out.len() >= FLUSH_AT {
                self.flush().await?;
            }
        }
        if left > 0 {
            tracing::error!(file = %path.display(), missing = left, "message changed between the two BINARY passes; padded");
            let pad = usize::try_from(left).unwrap_or(0);
            self.out.resize(self.out.len() + pad, b' ');
        }
        Ok(())
    }
}

fn memchr_nul(b: &[u8]) -> bool {
    b.contains(&0)
}
