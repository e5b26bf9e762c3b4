//! Header block scanning (RFC 5322 §2.2): physical lines, field names,
//! folded field bodies.
//!
//! Tolerance follows Dovecot's message-header-parser: a line without a colon
//! is a field whose name is the whole line; a line starting with space or
//! tab continues the previous field; the header ends at an empty line
//! (`LF` or `CRLF`) or at the end of the data.

/// One physical line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Line {
    /// Offset of the first byte.
    pub start: usize,
    /// Offset just past the content (before CR LF or LF).
    pub content_end: usize,
    /// Offset of the next line (just past LF, or the end of the data).
    pub next: usize,
    /// Whether the line ends with LF.
    pub has_lf: bool,
}

impl Line {
    /// True for the empty line that ends a header block.
    pub fn is_blank(&self) -> bool {
        self.has_lf && self.content_end == self.start
    }
}

/// The physical line starting at `pos` (`pos < data.len()`).
pub(crate) fn line_at(data: &[u8], pos: usize) -> Line {
    match memchr::memchr(b'\n', &data[pos..]) {
        Some(i) => {
            let lf = pos + i;
            let content_end = if lf > pos && data[lf - 1] == b'\r' {
                lf - 1
            } else {
                lf
            };
            Line {
                start: pos,
                content_end,
                next: lf + 1,
                has_lf: true,
            }
        }
        None => Line {
            start: pos,
            content_end: data.len(),
            next: data.len(),
            has_lf: false,
        },
    }
}

/// RFC 5322 WSP.
pub(crate) fn is_wsp(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

/// Splits the first line of a field into (name, value start offset within
/// `content`). The name is the text before the first colon without trailing
/// white space; without a colon the whole line is the name and there is no
/// value.
pub(crate) fn split_field(content: &[u8]) -> (&[u8], Option<usize>) {
    match memchr::memchr(b':', content) {
        Some(colon) => {
            let mut end = colon;
            while end > 0 && is_wsp(content[end - 1]) {
                end -= 1;
            }
            // Skip the white space after the colon; a value made only of
            // white space keeps all but its first byte (Dovecot).
            let rest = &content[colon + 1..];
            let skip = match rest.iter().position(|&c| !is_wsp(c)) {
                Some(n) => n,
                None => usize::from(!rest.is_empty()),
            };
            (&content[..end], Some(colon + 1 + skip))
        }
        None => (content, None),
    }
}

/// A header field: its first line and the offset past its last
/// continuation line.
pub(crate) struct Field<'a> {
    pub name: &'a [u8],
    /// First line.
    pub first: Line,
    /// Value start offset in the data (None without a colon).
    pub value_start: Option<usize>,
    /// Offset of the line after the field.
    pub next: usize,
}

impl Field<'_> {
    /// The raw field body: value of the first line, then each continuation
    /// line (with its leading white space) after an LF; CRs before line
    /// breaks are dropped.
    pub fn full_value(&self, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some(v) = self.value_start {
            out.extend_from_slice(&data[v..self.first.content_end]);
        }
        let mut pos = self.first.next;
        while pos < self.next {
            let line = line_at(data, pos);
            out.push(b'\n');
            out.extend_from_slice(&data[line.start..line.content_end]);
            pos = line.next;
        }
        out
    }
}

/// The field whose first line is `first` (a non-blank line found with [`line_at`]: the
/// header walks test each line for the blank one first, so a line is scanned once),
/// continuation lines included.
pub(crate) fn field_of(data: &[u8], first: Line) -> Field<'_> {
    let (name, value) = split_field(&data[first.start..first.content_end]);
    let mut next = first.next;
    while next < data.len() && is_wsp(data[next]) {
        next = line_at(data, next).next;
    }
    Field {
        name,
        first,
        value_start: value.map(|v| first.start + v),
        next,
    }
}

/// ASCII case-insensitive equality.
pub(crate) fn eq_ci(a: &[u8], b: &[u8]) -> bool {
    a.eq_ignore_ascii_case(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_value_keeps_lf_and_drops_cr() {
        let data = b"Subject: a\r\n b\r\n\tc\r\nX: y\r\n";
        let f = field_of(data, line_at(data, 0));
        assert_eq!(f.name, b"Subject");
        assert_eq!(f.full_value(data), b"a\n b\n\tc");
        assert_eq!(&data[f.next..f.next + 2], b"X:");
    }

    #[test]
    fn name_without_colon_is_the_line() {
        let (name, v) = split_field(b"just text");
        assert_eq!(name, b"just text");
        assert!(v.is_none());
        let (name, v) = split_field(b"Name \t:   ");
        assert_eq!(name, b"Name");
        assert_eq!(v, Some(8));
    }
}
