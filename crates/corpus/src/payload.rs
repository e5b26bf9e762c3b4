//! Binary attachment payloads: a cheap PRNG stream (one `Rng` call seeds it, then
//! wyrand fills kilobytes per microsecond) behind the magic bytes of the pretended format.
//! Compressed formats (PDF streams, PNG/JPEG data, ZIP members) look random after their
//! headers, so random payloads base64-encode to the same sizes real ones do.

use rand::Rng;

/// wyrand: a 64-bit PRNG with one multiply per output word. Only for filler bytes; all
/// structural choices use the caller's `Rng`.
pub(crate) struct FastStream(u64);

impl FastStream {
    /// Seeds the stream from the caller's generator (one call).
    pub(crate) fn from_rng<R: Rng + ?Sized>(rng: &mut R) -> Self {
        FastStream(rng.gen())
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0xa076_1d64_78bd_642f);
        let t = u128::from(self.0) * u128::from(self.0 ^ 0xe703_7ed1_a0b4_28db);
        ((t >> 64) ^ t) as u64
    }

    /// Appends `n` pseudo-random bytes to `out`.
    pub(crate) fn fill(&mut self, out: &mut Vec<u8>, n: usize) {
        out.reserve(n);
        let mut left = n;
        while left >= 8 {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
            left -= 8;
        }
        if left > 0 {
            out.extend_from_slice(&self.next_u64().to_le_bytes()[..left]);
        }
    }
}

/// Kinds of binary attachment, with their MIME type and file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BinKind {
    Pdf,
    Png,
    Jpeg,
    Zip,
    Docx,
    Xlsx,
}

impl BinKind {
    pub(crate) fn mime_type(self) -> &'static str {
        match self {
            BinKind::Pdf => "application/pdf",
            BinKind::Png => "image/png",
            BinKind::Jpeg => "image/jpeg",
            BinKind::Zip => "application/zip",
            BinKind::Docx => {
                "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
            }
            BinKind::Xlsx => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        }
    }

    pub(crate) fn extension(self) -> &'static str {
        match self {
            BinKind::Pdf => "pdf",
            BinKind::Png => "png",
            BinKind::Jpeg => "jpg",
            BinKind::Zip => "zip",
            BinKind::Docx => "docx",
            BinKind::Xlsx => "xlsx",
        }
    }

    /// Picks a kind with rough real-world frequencies (PDFs and images dominate).
    pub(crate) fn pick<R: Rng + ?Sized>(rng: &mut R) -> Self {
        match rng.gen_range(0..100) {
            0..=34 => BinKind::Pdf,
            35..=54 => BinKind::Jpeg,
            55..=69 => BinKind::Png,
            70..=79 => BinKind::Docx,
            80..=89 => BinKind::Xlsx,
            _ => BinKind::Zip,
        }
    }
}

/// Builds `size` bytes of a pretend `kind` file: its magic/header bytes, then filler.
pub(crate) fn binary(kind: BinKind, size: usize, stream: &mut FastStream) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + 64);
    match kind {
        BinKind::Pdf => out.extend_from_slice(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n3 0 obj\n<< /Length 4 0 R /Filter /FlateDecode >>\nstream\n"),
        BinKind::Png => {
            out.extend_from_slice(b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR");
            out.extend_from_slice(&640u32.to_be_bytes());
            out.extend_from_slice(&480u32.to_be_bytes());
            out.extend_from_slice(b"\x08\x06\x00\x00\x00");
            stream.fill(&mut out, 4);
            out.extend_from_slice(b"\x00\x00\x20\x00IDAT\x78\x9c");
        }
        BinKind::Jpeg => out.extend_from_slice(
            b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x01\x00\x48\x00\x48\x00\x00\xff\xdb\x00\x43\x00",
        ),
        BinKind::Zip | BinKind::Docx | BinKind::Xlsx => {
            out.extend_from_slice(b"PK\x03\x04\x14\x00\x06\x00\x08\x00\x00\x00\x21\x00");
            stream.fill(&mut out, 12);
            let name: &[u8] = match kind {
                BinKind::Docx => b"word/document.xml",
                BinKind::Xlsx => b"xl/workbook.xml",
                _ => b"report/data.csv",
            };
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(b"\x00\x00");
            out.extend_from_slice(name);
        }
    }
    let have = out.len();
    if size > have {
        stream.fill(&mut out, size - have);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn stream_is_deterministic_and_sized() {
        let mut a = FastStream::from_rng(&mut rand_chacha::ChaCha8Rng::seed_from_u64(1));
        let mut b = FastStream::from_rng(&mut rand_chacha::ChaCha8Rng::seed_from_u64(1));
        let (x, y) = (
            binary(BinKind::Pdf, 1001, &mut a),
            binary(BinKind::Pdf, 1001, &mut b),
        );
        assert_eq!(x, y);
        assert_eq!(x.len(), 1001);
        assert!(x.starts_with(b"%PDF-1.7"));
        // Filler is not constant.
        let tail = &x[500..];
        assert!(tail.iter().any(|&c| c != tail[0]));
    }
}
