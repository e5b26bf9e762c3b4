//! The MIME part tree: header blocks, boundary delimiters, part offsets.
//!
//! RFC 2046 §5.1.1: a boundary delimiter is a line that starts with `--`
//! and the boundary; the line break before it belongs to the delimiter, so
//! a part ends before that CRLF/LF. The close delimiter is `--boundary--`.
//! Text after the delimiter on the same line (transport padding, or more)
//! is ignored. The boundary only has to match the beginning of the line
//! ("it is sufficient that the boundary appear in its entirety following
//! the CRLF"); when boundaries of several enclosing multiparts match, the
//! longest wins, the innermost on a tie (Dovecot). A delimiter of an outer
//! multipart ends every inner part that is still open. Preamble and
//! epilogue belong to the multipart's own body. A missing close delimiter
//! ends the multipart where its parent ends (or at the end of the file).
//!
//! Bodies are never decoded: a base64 message/rfc822 part is scanned as a
//! message, as Dovecot does (RFC 2046 §5.2.1 allows only 7bit, 8bit and
//! binary there).

use memchr::memmem;

use crate::content::{self, TypeClass};
use crate::crlf::{count_range, LineCounts};
use crate::envelope;
use crate::header::{self, eq_ci, line_at};
use crate::{ContentInfo, Envelope, Part, PartKind, MAX_NESTING, MAX_PARTS};

/// Dovecot truncates boundaries to 70 + 10 bytes (RFC 2046 §5.1.1 allows
/// 70); matching is by prefix, so longer ones still work.
const BOUNDARY_MAX: usize = 80;
/// How much of a line without LF (at the end of the file) is compared.
const BOUNDARY_LINE_MAX: usize = BOUNDARY_MAX + 4;

/// A boundary delimiter line found while scanning.
#[derive(Debug, Clone, Copy)]
struct Hit {
    /// Index of the matched boundary in the boundary stack.
    index: usize,
    /// Offset of the `--`.
    line: usize,
    /// Where the parts that enclose the one that ran into the delimiter
    /// end: before the line break that belongs to the delimiter, or at the
    /// delimiter line when a header ran into it.
    end: usize,
    /// A close delimiter (`--boundary--`).
    close: bool,
}

/// Why a part ended.
enum Stop {
    Eof,
    Hit(Hit),
}

struct Builder<'a> {
    data: &'a [u8],
    /// Boundaries of the open multiparts, outermost first.
    boundaries: Vec<Vec<u8>>,
    /// Parts made so far (the message included).
    parts: usize,
    /// Set when the part limit is reached: from then on no boundary is
    /// recognised and everything runs to the end of the file.
    opaque: bool,
    finder: &'static memmem::Finder<'static>,
}

/// Searcher for the start of a possible delimiter line, built once.
fn delimiter_finder() -> &'static memmem::Finder<'static> {
    static FINDER: std::sync::OnceLock<memmem::Finder<'static>> = std::sync::OnceLock::new();
    FINDER.get_or_init(|| memmem::Finder::new(b"\n--"))
}

/// A finished part with the line counts of its whole range.
struct Built {
    part: Part,
    total: LineCounts,
    envelope: Option<Envelope>,
    stop: Stop,
}

/// State gathered from a header block.
struct HeaderInfo {
    content: ContentInfo,
    class: TypeClass,
    boundary: Option<Vec<u8>>,
    seen_content_type: bool,
    is_mime: bool,
    envelope: Option<Envelope>,
}

fn add(a: LineCounts, b: LineCounts) -> LineCounts {
    LineCounts {
        lf: a.lf + b.lf,
        bare_lf: a.bare_lf + b.bare_lf,
    }
}

/// Builds the part tree and the message envelope.
pub(crate) fn build(data: &[u8]) -> (Part, Envelope) {
    let mut b = Builder {
        data,
        boundaries: Vec::new(),
        parts: 0,
        opaque: false,
        finder: delimiter_finder(),
    };
    let built = b.parse_part(0, 0, false, false, true);
    (built.part, built.envelope.unwrap_or_default())
}

/// The Content-* values of one part's header block as [`build`] reads them: `in_multipart`
/// for a body part of a multipart, where MIME applies without MIME-Version (RFC 2046 §5.1);
/// elsewhere (a message, an encapsulated message) the values count only with MIME-Version
/// or Content-Type.
pub(crate) fn part_content(block: &[u8], in_multipart: bool) -> ContentInfo {
    let b = Builder {
        data: block,
        boundaries: Vec::new(),
        parts: 0,
        opaque: false,
        finder: delimiter_finder(),
    };
    let (info, ..) = b.parse_header(0, in_multipart, false);
    if info.is_mime {
        info.content
    } else {
        ContentInfo::default()
    }
}

impl Builder<'_> {
    /// If the line at `ls` is a delimiter of an open multipart, which one
    /// and whether it closes it.
    fn boundary_line(&self, ls: usize) -> Option<(usize, bool)> {
        let data = self.data;
        if !data[ls..].starts_with(b"--") {
            return None;
        }
        let after = ls + 2;
        // The whole line is matched, trailing `--` included: a boundary may
        // itself end in `--` (Mailman digests use `__--__--`), and then
        // `--__--__--` is its delimiter, not the close delimiter of a shorter
        // boundary `__--__` (RFC 2046 §5.1.1: "--" boundary, then "--" for
        // the close delimiter). Dovecot 2.3.19 reads it the same way.
        let rest = match memchr::memchr(b'\n', &data[after..]) {
            Some(i) => {
                let mut e = after + i;
                if e > after && data[e - 1] == b'\r' {
                    e -= 1;
                }
                &data[after..e]
            }
            None => {
                let r = &data[after..];
                &r[..r.len().min(BOUNDARY_LINE_MAX)]
            }
        };
        let mut best: Option<(usize, usize)> = None;
        for (i, b) in self.boundaries.iter().enumerate().rev() {
            if b.len() <= rest.len()
                && rest.starts_with(b)
                && best.is_none_or(|(_, len)| len < b.len())
            {
                best = Some((i, b.len()));
                if b.len() == rest.len() {
                    break;
                }
            }
        }
        let (index, len) = best?;
        let close = data[after + len..].starts_with(b"--");
        Some((index, close))
    }

    /// Finds the first delimiter line at or after the line start `from`.
    /// A delimiter on the line at `from` itself has no line break of its own
    /// before it (that one was consumed already).
    fn scan(&self, from: usize) -> Option<Hit> {
        if self.opaque || self.boundaries.is_empty() || from >= self.data.len() {
            return None;
        }
        if let Some((index, close)) = self.boundary_line(from) {
            return Some(Hit {
                index,
                line: from,
                end: from,
                close,
            });
        }
        for i in self.finder.find_iter(&self.data[from..]) {
            let lf = from + i;
            if let Some((index, close)) = self.boundary_line(lf + 1) {
                let end = if lf > from && self.data[lf - 1] == b'\r' {
                    lf - 1
                } else {
                    lf
                };
                return Some(Hit {
                    index,
                    line: lf + 1,
                    end,
                    close,
                });
            }
        }
        None
    }

    /// Reads a header block from `start`. Returns the header info, where
    /// the body starts, whether an empty line ended the header, and the
    /// delimiter that ended it early, if any.
    fn parse_header(
        &self,
        start: usize,
        is_mime: bool,
        want_envelope: bool,
    ) -> (HeaderInfo, usize, bool, Option<Hit>) {
        let data = self.data;
        let mut info = HeaderInfo {
            content: ContentInfo::default(),
            class: TypeClass::Other,
            boundary: None,
            seen_content_type: false,
            is_mime,
            envelope: want_envelope.then(Envelope::default),
        };
        let mut pos = start;
        let mut prev_newline = 0;
        loop {
            if pos >= data.len() {
                return (info, data.len(), false, None);
            }
            if !self.opaque && !self.boundaries.is_empty() {
                if let Some((index, close)) = self.boundary_line(pos) {
                    // The line break before the delimiter is not part of
                    // this header (RFC 2046 §5.1.1); as in Dovecot it goes
                    // to the parent's body, so the parent ends at the
                    // delimiter line itself.
                    let hit = Hit {
                        index,
                        line: pos,
                        end: pos,
                        close,
                    };
                    return (info, pos - prev_newline, false, Some(hit));
                }
            }
            let line = line_at(data, pos);
            if line.is_blank() {
                return (info, line.next, true, None);
            }
            let field = header::field_of(data, line);
            self.header_field(&mut info, &field);
            pos = field.next;
            prev_newline = if data[pos - 1] != b'\n' {
                0
            } else if pos >= 2 && data[pos - 2] == b'\r' {
                2
            } else {
                1
            };
        }
    }

    /// Takes what BODYSTRUCTURE and ENVELOPE need from one header field.
    /// The first Content-* header of each kind counts (Dovecot), except
    /// that Content-Disposition without parameters may be replaced.
    fn header_field(&self, info: &mut HeaderInfo, field: &header::Field<'_>) {
        let name = field.name;
        if name.len() >= 8 && eq_ci(&name[..8], b"content-") {
            let sub = &name[8..];
            let value = field.full_value(self.data);
            let c = &mut info.content;
            if eq_ci(sub, b"type") {
                if !info.seen_content_type {
                    info.seen_content_type = true;
                    info.is_mime = true;
                    let (class, boundary) = content::content_type(c, &value);
                    info.class = class;
                    info.boundary = boundary;
                }
            } else if eq_ci(sub, b"transfer-encoding") {
                if c.encoding.is_none() {
                    c.encoding = content::transfer_encoding(&value);
                }
            } else if eq_ci(sub, b"disposition") {
                if c.disposition_params.is_empty() {
                    content::disposition(c, &value);
                }
            } else if eq_ci(sub, b"language") {
                if c.language.is_empty() {
                    c.language = content::language(&value);
                }
            } else {
                let slot = if eq_ci(sub, b"id") {
                    &mut c.id
                } else if eq_ci(sub, b"description") {
                    &mut c.description
                } else if eq_ci(sub, b"md5") {
                    &mut c.md5
                } else if eq_ci(sub, b"location") {
                    &mut c.location
                } else {
                    return;
                };
                if slot.is_none() {
                    *slot = Some(truncate_at_nul(value));
                }
            }
        } else if eq_ci(name, b"mime-version") {
            info.is_mime = true;
        } else if let Some(env) = info.envelope.as_mut() {
            if let Some(slot) = envelope::slot(name) {
                envelope::add(env, slot, field.full_value(self.data));
            }
        }
    }

    /// Parses the part whose header starts at `start`.
    fn parse_part(
        &mut self,
        start: usize,
        depth: u32,
        in_digest: bool,
        mime_child: bool,
        want_envelope: bool,
    ) -> Built {
        let data = self.data;
        self.parts += 1;
        let last_part = self.parts >= MAX_PARTS && !self.opaque;
        if last_part {
            self.opaque = true;
        }
        let (mut info, body_start, has_eoh, header_hit) =
            self.parse_header(start, mime_child, want_envelope);
        if !info.is_mime {
            // RFC 2045 §4: without MIME-Version (or Content-Type, as Dovecot
            // accepts) the Content-* headers do not apply.
            info.content = ContentInfo::default();
            info.class = TypeClass::Other;
            info.boundary = None;
        }
        let mut class = info.class;
        if in_digest && (!info.seen_content_type || !info.is_mime) {
            // RFC 2046 §5.1.5: the default in a digest is message/rfc822.
            class = TypeClass::Message;
        }
        if depth + 1 >= MAX_NESTING || last_part {
            class = TypeClass::Other;
        }
        let header_counts = count_range(data, start, body_start);

        let mut body_counts = LineCounts::default();
        let end;
        let stop;
        let kind = match class {
            TypeClass::Message => {
                let child = if header_hit.is_some() {
                    self.empty_part(body_start)
                } else {
                    self.parse_part(body_start, depth + 1, false, false, true)
                };
                stop = match header_hit {
                    Some(h) => Stop::Hit(h),
                    None => child.stop,
                };
                end = match (&header_hit, &stop) {
                    (Some(_), _) => body_start,
                    (None, Stop::Hit(h)) => h.end,
                    (None, Stop::Eof) => data.len(),
                };
                let child_end = child.part.end as usize;
                body_counts = add(child.total, count_range(data, child_end, end));
                let mut env = child.envelope.unwrap_or_default();
                envelope::finish(&mut env);
                PartKind::Message {
                    envelope: Box::new(env),
                    root: Box::new(child.part),
                }
            }
            TypeClass::Multipart { digest } => {
                let mut children = Vec::new();
                let boundary = info
                    .boundary
                    .take()
                    .filter(|_| has_eoh && header_hit.is_none());
                if let Some(mut b) = boundary {
                    b.truncate(BOUNDARY_MAX);
                    let (e, s, c) =
                        self.multipart_body(body_start, b, depth, digest, &mut children);
                    end = e;
                    stop = s;
                    body_counts = c;
                } else {
                    (end, stop) = self.leaf_body(body_start, header_hit);
                    body_counts = count_range(data, body_start, end);
                }
                PartKind::Multipart(children)
            }
            TypeClass::Other => {
                (end, stop) = self.leaf_body(body_start, header_hit);
                body_counts = add(body_counts, count_range(data, body_start, end));
                PartKind::Single
            }
        };
        let mut envelope = info.envelope;
        if let Some(env) = envelope.as_mut() {
            envelope::finish(env);
        }
        Built {
            part: Part {
                header_start: start as u64,
                body_start: body_start as u64,
                end: end as u64,
                header_vsize: (body_start - start) as u64 + header_counts.bare_lf,
                body_vsize: (end - body_start) as u64 + body_counts.bare_lf,
                body_lines: u32::try_from(body_counts.lf).unwrap_or(u32::MAX),
                content: info.content,
                kind,
            },
            total: add(header_counts, body_counts),
            envelope,
            stop,
        }
    }

    /// The empty message inside a message/rfc822 part whose header ran into
    /// a delimiter.
    fn empty_part(&mut self, at: usize) -> Built {
        self.parts += 1;
        let mut env = Envelope::default();
        envelope::finish(&mut env);
        Built {
            part: Part {
                header_start: at as u64,
                body_start: at as u64,
                end: at as u64,
                header_vsize: 0,
                body_vsize: 0,
                body_lines: 0,
                content: ContentInfo::default(),
                kind: PartKind::Single,
            },
            total: LineCounts::default(),
            envelope: Some(env),
            stop: Stop::Eof,
        }
    }

    /// A body without parts of its own: up to the next delimiter of an
    /// enclosing multipart, or the end of the file.
    fn leaf_body(&self, body_start: usize, header_hit: Option<Hit>) -> (usize, Stop) {
        if let Some(h) = header_hit {
            return (body_start, Stop::Hit(h));
        }
        match self.scan(body_start) {
            Some(h) => (h.end, Stop::Hit(h)),
            None => (self.data.len(), Stop::Eof),
        }
    }

    /// The body of a multipart with boundary `b`: preamble, parts,
    /// epilogue. Returns the end, why it ended and its line counts.
    fn multipart_body(
        &mut self,
        body_start: usize,
        b: Vec<u8>,
        depth: u32,
        digest: bool,
        children: &mut Vec<Part>,
    ) -> (usize, Stop, LineCounts) {
        let data = self.data;
        let mine = self.boundaries.len();
        self.boundaries.push(b);
        let mut counts = LineCounts::default();
        // start of the stretch of the body not inside a child part
        let mut gap = body_start;
        let mut next = self.scan(body_start);
        loop {
            let h = match next {
                None => {
                    let end = data.len();
                    counts = add(counts, count_range(data, gap, end));
                    return (end, Stop::Eof, counts);
                }
                Some(h) if h.index != mine => {
                    counts = add(counts, count_range(data, gap, h.end));
                    return (h.end, Stop::Hit(h), counts);
                }
                Some(h) => h,
            };
            // One of ours: forget boundaries of inner multiparts left open
            // and, for the close delimiter, ours too.
            self.boundaries
                .truncate(if h.close { mine } else { mine + 1 });
            let line = line_at(data, h.line);
            if !line.has_lf {
                let end = data.len();
                counts = add(counts, count_range(data, gap, end));
                return (end, Stop::Eof, counts);
            }
            if h.close {
                // epilogue
                next = self.scan(line.next);
                continue;
            }
            counts = add(counts, count_range(data, gap, line.next));
            let child = self.parse_part(line.next, depth + 1, digest, true, false);
            counts = add(counts, child.total);
            gap = child.part.end as usize;
            children.push(child.part);
            match child.stop {
                Stop::Eof => return (data.len(), Stop::Eof, counts),
                Stop::Hit(h2) => next = Some(h2),
            }
        }
    }
}

/// Dovecot keeps these values as C strings: a NUL ends them.
fn truncate_at_nul(mut v: Vec<u8>) -> Vec<u8> {
    if let Some(i) = memchr::memchr(0, &v) {
        v.truncate(i);
    }
    v
}
