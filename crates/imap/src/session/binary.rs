//! FETCH BINARY[part]<partial>, BINARY.PEEK and BINARY.SIZE (RFC 3516): a part's body with
//! its Content-Transfer-Encoding undone. The decoded size is not in the index, so the part
//! is decoded twice, chunk by chunk: once to learn the literal's length (and whether it
//! holds NUL, which needs `~{n}`, RFC 3516 §4.2), once to send it. Memory stays at a chunk.

use std::io::SeekFrom;
use std::path::Path;

use maildex_imap_proto::{encode, Partial, ResponseCode};
use maildex_mime::{Decoder, Encoding};
use maildex_store::records::{Cached, PartKindRecord};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use super::body::partial_window;
use super::{CmdError, Session, FLUSH_AT};
use crate::section::{find, header_block};

/// Bytes read from the file at once.
const CHUNK: usize = 64 * 1024;

/// Where a BINARY section's encoded bytes are and how to decode them.
pub(super) enum BinaryPart {
    /// Bytes `start..end` of the file, decoded with `enc`.
    Range { start: u64, end: u64, enc: Encoding },
    /// No such part: an empty string.
    Missing,
}

/// Locates `BINARY[path]` (RFC 3516 §4.2): `[]` is the whole message, a leaf part is its
/// body decoded per its Content-Transfer-Encoding (from the part's MIME header, kept in the
/// index), a multipart or message part is its body as it is.
pub(super) fn locate_binary(
    cached: &Cached,
    headers: &[u8],
    path: &[u32],
) -> Result<BinaryPart, CmdError> {
    let root = &cached.parts;
    if path.is_empty() {
        return Ok(BinaryPart::Range {
            start: 0,
            end: root.end,
            enc: Encoding::Identity,
        });
    }
    let Some((part, pos)) = find(root, path) else {
        return Ok(BinaryPart::Missing);
    };
    let enc = match part.kind {
        PartKindRecord::Single => {
            let block = header_block(root, headers, pos)
                .ok_or_else(|| CmdError::server("header block missing from the index"))?;
            let mut field = Vec::new();
            maildex_mime::header_fields(block, &[b"Content-Transfer-Encoding"], false, &mut field);
            let value = field
                .iter()
                .position(|&b| b == b':')
                .map(|i| maildex_mime::unfold(&field[i + 1..]));
            let value = value.filter(|v| !v.trim_ascii().is_empty());
            Encoding::from_header(value.as_deref()).ok_or_else(|| {
                CmdError::no(
                    ResponseCode::UnknownCte,
                    "Unknown Content-Transfer-Encoding.",
                )
            })?
        }
        _ => Encoding::Identity,
    };
    Ok(BinaryPart::Range {
        start: part.body_start,
        end: part.end,
        enc,
    })
}

/// Runs the decoder over `start..end` of `file`, calling `sink` with each decoded piece.
async fn decode_range(
    file: &mut tokio::fs::File,
    (start, end): (u64, u64),
    enc: Encoding,
    mut sink: impl FnMut(&[u8]),
) -> Result<(), CmdError> {
    file.seek(SeekFrom::Start(start)).await?;
    let mut dec = Decoder::new(enc);
    let mut raw = vec![0u8; CHUNK];
    let mut out = Vec::with_capacity(CHUNK + CHUNK / 8);
    let mut pos = start;
    while pos < end {
        let want = usize::try_from((end - pos).min(CHUNK as u64)).unwrap_or(CHUNK);
        let n = file.read(&mut raw[..want]).await?;
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
        file: &mut tokio::fs::File,
        part: &BinaryPart,
    ) -> Result<(u64, bool), CmdError> {
        let BinaryPart::Range { start, end, enc } = *part else {
            return Ok((0, false));
        };
        let (mut size, mut nul) = (0u64, false);
        decode_range(file, (start, end), enc, |piece| {
            size += piece.len() as u64;
            nul |= memchr_nul(piece);
        })
        .await?;
        Ok((size, nul))
    }

    /// Writes a BINARY section's value: `~{n}` / `{n}` and the decoded bytes, or `""`.
    pub(super) async fn write_binary(
        &mut self,
        file: &mut tokio::fs::File,
        path: &Path,
        part: &BinaryPart,
        partial: Option<Partial>,
    ) -> Result<(), CmdError> {
        let BinaryPart::Range { start, end, enc } = *part else {
            self.out.extend_from_slice(b"\"\"");
            return Ok(());
        };
        let (size, nul) = Self::binary_size(file, part).await?;
        let (mut skip, take) = partial_window(size, partial);
        encode::literal_header(&mut self.out, take, nul);
        let mut left = take;
        let mut pending: Vec<u8> = Vec::new();
        // decode again, sending the window; flush between chunks
        file.seek(SeekFrom::Start(start)).await?;
        let mut dec = Decoder::new(enc);
        let mut raw = vec![0u8; CHUNK];
        let mut pos = start;
        let mut finished = false;
        while left > 0 && !finished {
            pending.clear();
            if pos < end {
                let want = usize::try_from((end - pos).min(CHUNK as u64)).unwrap_or(CHUNK);
                let n = file.read(&mut raw[..want]).await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn built(msg: &[u8]) -> maildex_index::Built {
        maildex_store::build_record(msg, Default::default()).unwrap()
    }

    #[test]
    fn encodings_come_from_each_part_header() {
        let msg = b"Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\
Content-Transfer-Encoding: quoted-printable\n\ncaf=C3=A9\n--b\nContent-Type: application/x\n\
Content-Transfer-Encoding: BASE64\n\nAAEC\n--b\nContent-Transfer-Encoding: x-uue\n\nzz\n--b\n\
Content-Transfer-Encoding: Binary\n\n\0\n--b--\n";
        let b = built(msg);
        let c = &b.record.cached;
        let enc = |p: &[u32]| match locate_binary(c, &b.headers, p) {
            Ok(BinaryPart::Range { enc, .. }) => Some(enc),
            Ok(BinaryPart::Missing) => None,
            Err(_) => Some(Encoding::Identity).filter(|_| false),
        };
        assert_eq!(enc(&[1]), Some(Encoding::QuotedPrintable));
        assert_eq!(enc(&[2]), Some(Encoding::Base64));
        assert!(matches!(
            locate_binary(c, &b.headers, &[3]),
            Err(CmdError::No(Some(ResponseCode::UnknownCte), _))
        ));
        // RFC 2045 §6.2: binary is decoded as the octets themselves, not as 7bit text
        assert_eq!(enc(&[4]), Some(Encoding::Binary));
        assert_eq!(enc(&[5]), None);
        assert_eq!(enc(&[]), Some(Encoding::Identity));
    }
}
