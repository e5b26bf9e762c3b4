//! Independent helpers for the integration tests: a header splitter, a small MIME walker
//! and a modified UTF-7 decoder. They do not reuse the generator's code, so a generator bug
//! cannot hide behind a helper that shares it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Splits a message at its first empty line: (header block incl. final LF, body).
pub fn split(msg: &[u8]) -> Option<(&[u8], &[u8])> {
    if msg.starts_with(b"\n") {
        return Some((&msg[..0], &msg[1..]));
    }
    let pos = msg.windows(2).position(|w| w == b"\n\n")?;
    Some((&msg[..pos + 1], &msg[pos + 2..]))
}

/// Unfolded header fields in order: (name, value) with folding removed (RFC 5322 §2.2.3).
pub fn fields(header: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(header);
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.starts_with([' ', '\t']) {
            if let Some(last) = out.last_mut() {
                last.1.push_str(line);
            }
        } else if let Some((n, v)) = line.split_once(':') {
            out.push((n.to_owned(), v.trim_start().to_owned()));
        }
    }
    out
}

/// The first value of header `name` (case-insensitive).
pub fn get<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// A parameter of a structured header value such as Content-Type (quoted or not).
pub fn param(value: &str, name: &str) -> Option<String> {
    for part in value.split(';').skip(1) {
        let part = part.trim();
        if let Some((k, v)) = part.split_once('=') {
            if k.trim().eq_ignore_ascii_case(name) {
                return Some(v.trim().trim_matches('"').to_owned());
            }
        }
    }
    None
}

/// What the MIME walk found.
#[derive(Default, Debug)]
pub struct Walk {
    pub boundaries: Vec<String>,
    pub content_types: Vec<String>,
    pub encodings: Vec<String>,
    pub errors: Vec<String>,
}

/// Walks a MIME entity (header block + body), checking every multipart is delimited and
/// closed (RFC 2046 §5.1.1) and every base64/quoted-printable body keeps to 76-char lines.
pub fn walk(entity: &[u8], depth: usize, out: &mut Walk) {
    let Some((head, body)) = split(entity) else {
        out.errors
            .push("no blank line between header and body".into());
        return;
    };
    let f = fields(head);
    let ct = get(&f, "Content-Type").unwrap_or("text/plain").to_owned();
    let mtype = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    out.content_types.push(mtype.clone());
    let cte = get(&f, "Content-Transfer-Encoding")
        .unwrap_or("7bit")
        .to_ascii_lowercase();
    out.encodings.push(cte.clone());
    if depth > 8 {
        out.errors.push("too deep".into());
        return;
    }
    if mtype.starts_with("multipart/") {
        let Some(b) = param(&ct, "boundary") else {
            out.errors.push(format!("{mtype} without boundary"));
            return;
        };
        out.boundaries.push(b.clone());
        let text = body;
        let delim = format!("--{b}");
        let close = format!("--{b}--");
        let mut parts: Vec<Vec<u8>> = Vec::new();
        let mut cur: Option<Vec<u8>> = None;
        let mut closed = false;
        for line in text.split_inclusive(|&c| c == b'\n') {
            let l = line.strip_suffix(b"\n").unwrap_or(line);
            if l == close.as_bytes() {
                if let Some(p) = cur.take() {
                    parts.push(p);
                }
                closed = true;
                break;
            } else if l == delim.as_bytes() {
                if let Some(p) = cur.take() {
                    parts.push(p);
                }
                cur = Some(Vec::new());
            } else if let Some(c) = cur.as_mut() {
                c.extend_from_slice(line);
            }
        }
        if !closed {
            out.errors.push(format!("boundary {b} not closed"));
        }
        if parts.is_empty() {
            out.errors.push(format!("{mtype} has no parts"));
        }
        for mut p in parts {
            // The LF before a delimiter belongs to the delimiter (RFC 2046 §5.1.1).
            if p.ends_with(b"\n") {
                p.pop();
            }
            walk(&p, depth + 1, out);
        }
    } else if mtype == "message/rfc822" {
        walk(body, depth + 1, out);
    } else if cte == "base64" || cte == "quoted-printable" {
        if let Some(l) = body.split(|&c| c == b'\n').find(|l| l.len() > 76) {
            out.errors.push(format!("{cte} line of {} chars", l.len()));
        }
    }
}

/// Decodes one IMAP modified UTF-7 mailbox name (RFC 3501 §5.1.3); None if malformed.
pub fn mutf7_decode(s: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(pos) = rest.find('&') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        let end = after.find('-')?;
        let enc = &after[..end];
        if enc.is_empty() {
            out.push('&');
        } else {
            let mut bits = 0u32;
            let mut nbits = 0;
            let mut bytes = Vec::new();
            for c in enc.chars() {
                let v = match c {
                    'A'..='Z' => c as u32 - 'A' as u32,
                    'a'..='z' => c as u32 - 'a' as u32 + 26,
                    '0'..='9' => c as u32 - '0' as u32 + 52,
                    '+' => 62,
                    ',' => 63,
                    _ => return None,
                };
                bits = (bits << 6) | v;
                nbits += 6;
                if nbits >= 8 {
                    nbits -= 8;
                    bytes.push((bits >> nbits) as u8);
                    bits &= (1 << nbits) - 1;
                }
            }
            if bytes.len() % 2 != 0 {
                return None;
            }
            let units: Vec<u16> = bytes
                .chunks(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            out.push_str(&String::from_utf16(&units).ok()?);
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// Every regular file under `root`: relative path -> (contents, mtime seconds).
pub fn tree(root: &Path) -> BTreeMap<PathBuf, (Vec<u8>, i64)> {
    fn visit(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, (Vec<u8>, i64)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            let md = std::fs::metadata(&p).unwrap();
            if md.is_dir() {
                out.insert(p.strip_prefix(root).unwrap().join(""), (Vec::new(), -1));
                visit(root, &p, out);
            } else {
                let mtime = md
                    .modified()
                    .unwrap()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs() as i64;
                out.insert(
                    p.strip_prefix(root).unwrap().to_owned(),
                    (std::fs::read(&p).unwrap(), mtime),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    visit(root, root, &mut out);
    out
}

/// Nearest-rank quantile of sorted `v`.
pub fn quantile(v: &[usize], p: f64) -> usize {
    let r = (p * v.len() as f64).ceil() as usize;
    v[r.clamp(1, v.len()) - 1]
}
