//! CRLF sizes and LF -> CRLF conversion for serving message bytes.
//!
//! IMAP sizes (RFC822.SIZE, the body size in BODYSTRUCTURE) and the bytes of
//! every BODY[...] section are those of the message with each bare LF turned
//! into CRLF (RFC 3501 §2.3.4 / RFC 9051 §2.3.4: messages are CRLF text on
//! the wire). Maildir files usually hold LF line ends, so the server converts
//! while it reads.

/// Counts of line ends in a byte range.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LineCounts {
    /// Number of LF bytes.
    pub lf: u64,
    /// Number of LF bytes not preceded by CR.
    pub bare_lf: u64,
}

/// Counts LFs and bare LFs in `data[start..end]`, looking at `data[start-1]`
/// for a CR so that counts of adjacent ranges add up exactly.
pub(crate) fn count_range(data: &[u8], start: usize, end: usize) -> LineCounts {
    let mut counts = LineCounts::default();
    if start >= end {
        return counts;
    }
    for i in memchr::memchr_iter(b'\n', &data[start..end]) {
        let at = start + i;
        counts.lf += 1;
        if at == 0 || data[at - 1] != b'\r' {
            counts.bare_lf += 1;
        }
    }
    counts
}

/// Size of `bytes` after LF -> CRLF conversion: a LF not preceded by CR
/// counts 2 (RFC 3501 §6.4.5 RFC822.SIZE; Dovecot's "virtual size").
///
/// The byte before `bytes` is taken to be no CR; every part and section
/// range that maildex-mime produces starts at a line start, so this holds.
pub fn crlf_len(bytes: &[u8]) -> u64 {
    bytes.len() as u64 + count_range(bytes, 0, bytes.len()).bare_lf
}

/// Streaming LF -> CRLF converter for serving BODY[section] bytes in chunks.
///
/// It remembers whether the previous chunk ended with CR, so a CRLF split
/// across two chunks is not doubled. It also turns NUL into 0x80: an IMAP
/// literal may not hold NUL (RFC 3501 §4.3, CHAR8), and that is what Dovecot
/// sends in place of it, so the byte count stays the same. A writer made by
/// [`CrlfWriter::keeping_nul`] keeps NUL, for a literal8 (RFC 3516 §4.3).
#[derive(Debug, Clone, Default)]
pub struct CrlfWriter {
    last_was_cr: bool,
    keep_nul: bool,
}

impl CrlfWriter {
    /// A converter at the start of a section (no CR before it).
    pub fn new() -> Self {
        Self::default()
    }

    /// A converter that leaves NUL as it is (BINARY, sent as a literal8).
    pub fn keeping_nul() -> Self {
        Self {
            last_was_cr: false,
            keep_nul: true,
        }
    }

    /// Converts one chunk, appending the result to `out`.
    pub fn write(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        out.reserve(chunk.len() + chunk.len() / 32 + 2);
        let mut rest = chunk;
        while let Some(i) = memchr::memchr2(b'\n', 0, rest) {
            out.extend_from_slice(&rest[..i]);
            let prev_cr = if i == 0 {
                self.last_was_cr
            } else {
                rest[i - 1] == b'\r'
            };
            if rest[i] == b'\n' {
                if !prev_cr {
                    out.push(b'\r');
                }
                out.push(b'\n');
                self.last_was_cr = false;
            } else {
                out.push(if self.keep_nul { 0 } else { 0x80 });
                self.last_was_cr = false;
            }
            rest = &rest[i + 1..];
        }
        if let Some(&last) = rest.last() {
            self.last_was_cr = last == b'\r';
        }
        out.extend_from_slice(rest);
    }
}

/// Converts a whole byte range at once (see [`CrlfWriter`]).
pub fn to_crlf(bytes: &[u8], out: &mut Vec<u8>) {
    CrlfWriter::new().write(bytes, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crlf_len_counts_bare_lf_twice() {
        assert_eq!(crlf_len(b""), 0);
        assert_eq!(crlf_len(b"a\nb\r\nc\r"), 8);
        assert_eq!(crlf_len(b"\n\n"), 4);
    }

    #[test]
    fn writer_handles_cr_at_chunk_end() {
        let mut w = CrlfWriter::new();
        let mut out = Vec::new();
        w.write(b"ab\r", &mut out);
        w.write(b"\ncd\n", &mut out);
        w.write(b"\n", &mut out);
        assert_eq!(out, b"ab\r\ncd\r\n\r\n");
    }

    #[test]
    fn writer_replaces_nul() {
        let mut out = Vec::new();
        to_crlf(b"a\0b\n", &mut out);
        assert_eq!(out, b"a\x80b\r\n");
    }

    #[test]
    fn count_range_looks_at_previous_byte() {
        let data = b"a\r\nb";
        assert_eq!(count_range(data, 2, 4).bare_lf, 0);
        assert_eq!(count_range(b"\nb", 0, 2).bare_lf, 1);
    }
}
