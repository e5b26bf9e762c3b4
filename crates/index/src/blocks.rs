//! Compressed segments read in part: one zstd frame whose blocks end where the
//! segment's entries end, and a reader that decodes no further than the entry it needs.
//!
//! Why: a phrase SEARCH compares the stored text of a few hundred messages scattered over
//! the folder, one in each of as many segments, and decompressing those whole segments of
//! sixteen texts was half its time (`perf record`, docs/BENCHMARKS.md). zstd decodes a
//! frame block by block, and a compressor that flushes (`ZSTD_e_flush`) ends a block
//! there while later blocks still match against the earlier ones, so the frame stays
//! one frame, readable by any zstd decoder, and about as small. A reader with a bounded
//! output then decodes the blocks up to the entry it needs and stops: on average about
//! half of a segment for one message in it. zstd offers no such reader of its own (its
//! seekable format splits frames, which loses the matches across entries), hence this
//! file.

use std::cell::RefCell;
use std::io;

use zstd::zstd_safe::{self, zstd_sys::ZSTD_EndDirective, InBuffer, OutBuffer, ResetDirective};

fn zstd_error(code: usize) -> io::Error {
    io::Error::other(zstd_safe::get_error_name(code))
}

/// Appends one zstd frame (at `level`) of `plain` to `out`, a block ending at each offset
/// of `ends` (ascending, inside `plain`): the boundaries of the entries.
pub(crate) fn compress_in_blocks(
    cctx: &mut zstd_safe::CCtx<'static>,
    plain: &[u8],
    ends: &[usize],
    level: i32,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    cctx.reset(ResetDirective::SessionOnly)
        .map_err(zstd_error)?;
    cctx.set_parameter(zstd_safe::CParameter::CompressionLevel(level))
        .map_err(zstd_error)?;
    cctx.set_pledged_src_size(Some(plain.len() as u64))
        .map_err(zstd_error)?;
    let mut start = 0;
    let cuts = ends
        .iter()
        .copied()
        .filter(|&e| e < plain.len())
        .chain(std::iter::once(plain.len()));
    for end in cuts {
        let Some(chunk) = plain.get(start..end) else {
            continue;
        };
        let last = end == plain.len();
        let op = if last {
            ZSTD_EndDirective::ZSTD_e_end
        } else {
            ZSTD_EndDirective::ZSTD_e_flush
        };
        let mut input = InBuffer::around(chunk);
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(zstd_safe::compress_bound(chunk.len()).max(4096));
            }
            let pos = out.len();
            let mut output = OutBuffer::around_pos(out, pos);
            let left = cctx
                .compress_stream2(&mut output, &mut input, op)
                .map_err(zstd_error)?;
            // flushed (or the frame ended) once nothing is left to write
            if left == 0 && input.pos() == chunk.len() {
                break;
            }
        }
        start = end;
    }
    Ok(())
}

/// A thread's decoding context, and which [`Prefix`] it is decoding.
struct Decoder {
    dctx: zstd_safe::DCtx<'static>,
    owner: u64,
}

thread_local! {
    /// One decoding context per thread, as the segments' own (see `segment::decompress`).
    static DECODER: RefCell<Option<Decoder>> = const { RefCell::new(None) };
    /// The id of the thread's next [`Prefix`].
    static NEXT_READER: std::cell::Cell<u64> = const { std::cell::Cell::new(1) };
}

/// The plain bytes of one zstd frame whose decoded length is `len`, decoded as far as
/// they are asked for ([`Prefix::upto`]).
pub(crate) struct Prefix<'f> {
    frame: &'f [u8],
    /// How much of `frame` the decoder has taken.
    taken: usize,
    /// The decoded bytes (`filled` of them), zeroed ahead of the decoder as it goes: the
    /// caller's, reused from one reader to the next (a fresh buffer of a segment's size
    /// cost a page fault per 4 KiB, a tenth of a phrase search).
    buf: &'f mut Vec<u8>,
    filled: usize,
    len: usize,
    /// Which reader of the thread this is: the context holds its frame while it is
    /// the last reader to use it.
    id: u64,
}

impl<'f> Prefix<'f> {
    /// A reader of `frame`, nothing decoded yet, decoding into `buf` (whatever it holds).
    pub(crate) fn new(frame: &'f [u8], len: usize, buf: &'f mut Vec<u8>) -> Prefix<'f> {
        let id = NEXT_READER.with(|n| {
            let id = n.get();
            n.set(id.wrapping_add(1));
            id
        });
        Prefix {
            frame,
            taken: 0,
            buf,
            filled: 0,
            len,
            id,
        }
    }

    /// The first `want` bytes (at most the decoded length), decoding the blocks that hold
    /// them if not yet done. An error for a frame that is corrupt or ends early.
    pub(crate) fn upto(&mut self, want: usize) -> io::Result<&[u8]> {
        let want = want.min(self.len);
        if self.filled < want {
            // bytes past `filled` are the decoder's to overwrite, never read
            if self.buf.len() < want {
                self.buf.reserve(self.len.saturating_sub(self.buf.len()));
                self.buf.resize(want, 0);
            }
            DECODER.with(|cell| -> io::Result<()> {
                let mut slot = cell.borrow_mut();
                let d = match slot.as_mut() {
                    Some(d) => d,
                    None => slot.insert(Decoder {
                        dctx: zstd_safe::DCtx::try_create()
                            .ok_or_else(|| io::Error::other("zstd: no memory"))?,
                        owner: 0,
                    }),
                };
                if d.owner != self.id {
                    // another reader used the context since (or none yet): start this
                    // frame over
                    d.dctx
                        .reset(ResetDirective::SessionOnly)
                        .map_err(zstd_error)?;
                    d.owner = self.id;
                    self.taken = 0;
                    self.filled = 0;
                }
                let read = self.decode(&mut d.dctx, want);
                if read.is_err() {
                    // the context is mid-frame at an error: whoever comes next restarts
                    d.owner = 0;
                }
                read
            })?;
        }
        Ok(&self.buf[..want])
    }

    /// Decodes until `want` bytes are out (the context holds this reader's frame).
    fn decode(&mut self, dctx: &mut zstd_safe::DCtx<'static>, want: usize) -> io::Result<()> {
        while self.filled < want {
            let mut input = InBuffer::around(&self.frame[self.taken..]);
            let mut output = OutBuffer::around_pos(&mut self.buf[..want], self.filled);
            let hint = dctx
                .decompress_stream(&mut output, &mut input)
                .map_err(zstd_error)?;
            let (taken, filled) = (input.pos(), output.pos());
            if taken == 0 && filled == self.filled {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "zstd frame ends early",
                ));
            }
            self.taken += taken;
            self.filled = filled;
            if hint == 0 && self.filled < self.len {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "zstd frame shorter than its length",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compress(plain: &[u8], ends: &[usize]) -> Vec<u8> {
        let mut cctx = zstd_safe::CCtx::create();
        let mut out = Vec::new();
        compress_in_blocks(&mut cctx, plain, ends, 3, &mut out).unwrap();
        out
    }

    #[test]
    fn a_frame_in_blocks_reads_whole_and_in_part() {
        // texts of a few KB from a small vocabulary, as mail text is
        let words = [
            "the", "meeting", "invoice", "next", "week", "please", "find", "attached", "regards",
            "project", "update", "about", "our", "schedule", "thanks", "review",
        ];
        let mut seed = 7u32;
        let entries: Vec<Vec<u8>> = (0..16)
            .map(|i| {
                let mut t = format!("message {i}:");
                for _ in 0..600 {
                    seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    t.push(' ');
                    t.push_str(words[(seed >> 16) as usize % words.len()]);
                }
                t.into_bytes()
            })
            .collect();
        let mut plain = Vec::new();
        let mut ends = Vec::new();
        for e in &entries {
            plain.extend_from_slice(e);
            ends.push(plain.len());
        }
        let frame = compress(&plain, &ends);
        // any zstd decoder reads it whole
        assert_eq!(zstd::bulk::decompress(&frame, plain.len()).unwrap(), plain);
        let mut buf = Vec::new();
        let mut p = Prefix::new(&frame, plain.len(), &mut buf);
        assert_eq!(p.upto(ends[0]).unwrap(), &plain[..ends[0]]);
        // stopped after the first entry: its block (the largest, with the first tables
        // and nothing earlier to match) and no more of the input taken
        assert!(p.taken < frame.len() / 5, "{} of {}", p.taken, frame.len());
        assert_eq!(p.upto(ends[7]).unwrap(), &plain[..ends[7]]);
        assert_eq!(p.upto(usize::MAX).unwrap(), &plain[..]);
        // the blocks cost little against one block
        let one = zstd::bulk::compress(&plain, 3).unwrap();
        assert!(
            frame.len() < one.len() + one.len() / 10,
            "{} {}",
            frame.len(),
            one.len()
        );
    }

    #[test]
    fn readers_share_the_thread_context_in_any_order() {
        let plain: Vec<u8> = (0..20_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let frame = compress(&plain, &[10_000, 40_000]);
        let mut buf = vec![7; 10];
        for _ in 0..3 {
            // read in part, then dropped mid-frame: the next reader starts afresh, in the
            // same buffer
            let mut p = Prefix::new(&frame, plain.len(), &mut buf);
            assert_eq!(p.upto(100).unwrap(), &plain[..100]);
        }
        // two readers interleaved: each finds its frame again
        let (mut buf_a, mut buf_b) = (Vec::new(), Vec::new());
        let mut a = Prefix::new(&frame, plain.len(), &mut buf_a);
        let mut b = Prefix::new(&frame, plain.len(), &mut buf_b);
        assert_eq!(a.upto(20_000).unwrap(), &plain[..20_000]);
        assert_eq!(b.upto(100).unwrap(), &plain[..100]);
        assert_eq!(a.upto(plain.len()).unwrap(), &plain[..]);
        assert_eq!(b.upto(50_000).unwrap(), &plain[..50_000]);
    }

    #[test]
    fn corrupt_or_short_frames_are_errors() {
        let plain = b"some text that is long enough to compress, some text".repeat(50);
        let frame = compress(&plain, &[100]);
        let mut buf = Vec::new();
        let mut short = Prefix::new(&frame[..frame.len() / 2], plain.len(), &mut buf);
        assert!(short.upto(plain.len()).is_err());
        let mut buf = Vec::new();
        let mut long = Prefix::new(&frame, plain.len() + 10, &mut buf);
        assert!(long.upto(plain.len() + 10).is_err());
        let junk = vec![0x55u8; 200];
        assert!(Prefix::new(&junk, 100, &mut Vec::new()).upto(100).is_err());
    }
}
