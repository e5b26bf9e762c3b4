//! Content-* header values (RFC 2045 §5, RFC 2183, RFC 3282, RFC 2557,
//! RFC 1864) and RFC 2231 parameter continuations.
//!
//! Values stay raw: parameter values are unquoted but RFC 2231 charset and
//! %-escapes are kept (`utf-8''a%20b`), which is what BODYSTRUCTURE reports
//! in Dovecot. Broken input is skipped over the way Dovecot does, byte by
//! byte to the next `;`.

use crate::header::eq_ci;
use crate::rfc822::{Lex, Lexer};
use crate::{ContentInfo, Param};

/// Parses `type/subtype` (RFC 2045 §5.1). Returns the type, the subtype
/// (None when the `/` or what follows it is missing) and whether the value
/// parsed well enough to read parameters after it.
///
/// RFC 2045 §5.2 says to treat a syntactically invalid Content-Type as
/// text/plain; charset=us-ascii. We give Dovecot 2.3.19's answers instead
/// (the golden tests hold them; `type_no_subtype_variants`), so clients see
/// the same structure from us as from Dovecot: a type alone (`text`,
/// `application`, ending the value) is kept with an empty subtype and no
/// parameters (a lone `text` is still text); anything else that is not
/// `type/subtype` followed by the end or `;` (`text; charset=x`, `text/`,
/// `/plain`, `text/a/b`, `text/plain junk`) has an empty type and subtype
/// and no parameters: BODYSTRUCTURE reads `("" "" NIL ...)`, not text.
fn parse_type(lx: &mut Lexer<'_>) -> (Vec<u8>, Option<Vec<u8>>, bool) {
    let mut ty = Vec::new();
    if lx.skip_lwsp().stop() {
        return (ty, None, false);
    }
    match lx.mime_token(&mut ty) {
        Lex::More if lx.cur() == b'/' && !ty.is_empty() => {}
        Lex::More => return (Vec::new(), None, false),
        Lex::End | Lex::Fail => return (ty, None, false),
    }
    lx.pos += 1;
    if lx.skip_lwsp().stop() {
        return (Vec::new(), None, false);
    }
    let mut sub = Vec::new();
    match lx.mime_token(&mut sub) {
        _ if sub.is_empty() => (Vec::new(), None, false),
        Lex::More if lx.cur() != b';' => (Vec::new(), None, false),
        r => (ty, Some(sub), r != Lex::Fail),
    }
}

/// Outcome of reading one parameter.
enum Step {
    /// A parameter (attribute, value).
    Param(Vec<u8>, Vec<u8>),
    /// A broken parameter; the caller skips one byte and tries again.
    Broken,
}

/// One `; attribute=value` step (RFC 2045 §5.1). `None` at the end of the
/// input.
fn next_param(lx: &mut Lexer<'_>) -> Option<Step> {
    if lx.at_end() {
        return None;
    }
    if lx.cur() != b';' {
        return Some(Step::Broken);
    }
    lx.pos += 1;
    if lx.skip_lwsp().stop() {
        return Some(Step::Broken);
    }
    let mut key = Vec::new();
    if lx.mime_token(&mut key).stop() || lx.cur() != b'=' {
        return Some(Step::Broken);
    }
    lx.pos += 1;
    let mut value = Vec::new();
    let r = lx.skip_lwsp();
    let r = if r.stop() {
        // no value at all: an empty one, unless a comment was broken
        r
    } else if lx.cur() == b'"' {
        lx.quoted_string(&mut value)
    } else if lx.cur() == b'=' {
        // Broken but common: name==?utf-8?b?...?= taken up to the next
        // separator, as Dovecot does.
        while !lx.at_end() && !matches!(lx.cur(), b';' | b' ' | b'\t' | b'\r' | b'\n') {
            value.push(lx.cur());
            lx.pos += 1;
        }
        Lex::More
    } else {
        lx.mime_token(&mut value)
    };
    if r == Lex::Fail {
        Some(Step::Broken)
    } else {
        Some(Step::Param(key, value))
    }
}

struct Section {
    base: Vec<u8>,
    index: u32,
    extended: bool,
    value: Vec<u8>,
}

/// Reads all parameters and joins RFC 2231 §3/§4 continuations.
///
/// Sections `name*N[*]` of one name are put in index order and joined; if
/// any section is extended the result is `name*` with non-extended sections
/// %-escaped and a `''` prefix when the first one is not extended. With a
/// gap in the indexes the sections are kept separately as `name*N[*]`. As in
/// Dovecot, `name*` without an index takes the index of the section read
/// before it in the same header.
pub(crate) fn parse_params(lx: &mut Lexer<'_>) -> Vec<Param> {
    let mut plain = Vec::new();
    let mut sections: Vec<Section> = Vec::new();
    let mut index = 0u32;
    while let Some(step) = next_param(lx) {
        let (key, value) = match step {
            Step::Param(k, v) => (k, v),
            Step::Broken => {
                if lx.at_end() {
                    break;
                }
                lx.pos += 1;
                continue;
            }
        };
        let Some(star) = memchr::memchr(b'*', &key) else {
            plain.push(Param { name: key, value });
            continue;
        };
        let mut p = star;
        if p + 1 < key.len() {
            p += 1;
            index = 0;
            while p < key.len() && key[p].is_ascii_digit() {
                index = index
                    .saturating_mul(10)
                    .saturating_add(u32::from(key[p] - b'0'));
                p += 1;
            }
        }
        let extended = p < key.len() && key[p] == b'*';
        if extended {
            p += 1;
        }
        if p < key.len() {
            plain.push(Param { name: key, value });
            continue;
        }
        sections.push(Section {
            base: key[..star].to_vec(),
            index,
            extended,
            value,
        });
    }
    if sections.is_empty() {
        return plain;
    }
    sections.sort_by(|a, b| a.base.cmp(&b.base).then(a.index.cmp(&b.index)));
    let mut i = 0;
    while i < sections.len() {
        let mut j = i;
        let mut in_order = true;
        let mut any_extended = false;
        while j < sections.len() && eq_ci(&sections[i].base, &sections[j].base) {
            if sections[j].index as usize != j - i {
                in_order = false;
            }
            any_extended |= sections[j].extended;
            j += 1;
        }
        let group = &sections[i..j];
        if in_order {
            let mut value = Vec::new();
            if any_extended && !group[0].extended {
                value.extend_from_slice(b"''");
            }
            for s in group {
                if any_extended && !s.extended {
                    for &c in &s.value {
                        if c == b'%' {
                            value.extend_from_slice(b"%25");
                        } else {
                            value.push(c);
                        }
                    }
                } else {
                    value.extend_from_slice(&s.value);
                }
            }
            let mut name = group[0].base.clone();
            if any_extended {
                name.push(b'*');
            }
            plain.push(Param { name, value });
        } else {
            for s in group {
                let mut name = s.base.clone();
                name.push(b'*');
                name.extend_from_slice(s.index.to_string().as_bytes());
                if s.extended {
                    name.push(b'*');
                }
                plain.push(Param {
                    name,
                    value: s.value.clone(),
                });
            }
        }
        i = j;
    }
    plain
}

/// Content-Type as seen by the part parser: what kind of part it makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TypeClass {
    Multipart { digest: bool },
    Message,
    Other,
}

/// Parses a Content-Type field body into `info` (type, subtype, params)
/// and returns the class of the part and its boundary parameter.
pub(crate) fn content_type(info: &mut ContentInfo, value: &[u8]) -> (TypeClass, Option<Vec<u8>>) {
    let mut lx = Lexer::new(value);
    let (ty, sub, ok) = parse_type(&mut lx);
    let class = match &sub {
        Some(s) if eq_ci(&ty, b"multipart") => TypeClass::Multipart {
            digest: eq_ci(s, b"digest"),
        },
        Some(s) if eq_ci(&ty, b"message") && eq_ci(s, b"rfc822") => TypeClass::Message,
        _ => TypeClass::Other,
    };
    info.media_type = Some(ty);
    info.subtype = sub;
    let mut boundary = None;
    if ok {
        info.params = parse_params(&mut lx);
        if matches!(class, TypeClass::Multipart { .. }) {
            boundary = info
                .params
                .iter()
                .find(|p| eq_ci(&p.name, b"boundary"))
                .map(|p| p.value.clone());
        }
    }
    (class, boundary)
}

/// Content-Transfer-Encoding (RFC 2045 §6.1): one token and nothing else.
pub(crate) fn transfer_encoding(value: &[u8]) -> Option<Vec<u8>> {
    let mut lx = Lexer::new(value);
    lx.skip_lwsp();
    let mut tok = Vec::new();
    if lx.mime_token(&mut tok) == Lex::Fail || lx.skip_lwsp() != Lex::End || tok.is_empty() {
        return None;
    }
    Some(tok)
}

/// Content-Disposition (RFC 2183 §2): type token and parameters.
pub(crate) fn disposition(info: &mut ContentInfo, value: &[u8]) {
    let mut lx = Lexer::new(value);
    lx.skip_lwsp();
    let mut tok = Vec::new();
    if lx.mime_token(&mut tok) == Lex::Fail {
        return;
    }
    info.disposition = Some(tok);
    info.disposition_params = parse_params(&mut lx);
}

/// Content-Language (RFC 3282 §2): comma-separated language tags.
pub(crate) fn language(value: &[u8]) -> Vec<Vec<u8>> {
    let mut lx = Lexer::new(value);
    let mut out = Vec::new();
    lx.skip_lwsp();
    loop {
        let mut tag = Vec::new();
        if lx.atom(&mut tag) == Lex::Fail {
            break;
        }
        out.push(tag);
        if lx.at_end() || lx.cur() != b',' {
            break;
        }
        lx.pos += 1;
        lx.skip_lwsp();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: &str) -> Vec<(String, String)> {
        let mut lx = Lexer::new(v.as_bytes());
        parse_params(&mut lx)
            .into_iter()
            .map(|p| {
                (
                    String::from_utf8_lossy(&p.name).into_owned(),
                    String::from_utf8_lossy(&p.value).into_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn rfc2231_continuations_join_without_decoding() {
        assert_eq!(
            params("; a*0*=utf-8''x%20; a*1=\"y%z\"; b=1"),
            vec![
                ("b".into(), "1".into()),
                ("a*".into(), "utf-8''x%20y%25z".into())
            ]
        );
    }

    #[test]
    fn rfc2231_gap_keeps_sections() {
        assert_eq!(
            params("; f*0=a; f*2=c"),
            vec![("f*0".into(), "a".into()), ("f*2".into(), "c".into())]
        );
    }

    #[test]
    fn broken_param_skips_to_next_semicolon() {
        assert_eq!(
            params("; name=a b c; other=x"),
            vec![("name".into(), "a".into()), ("other".into(), "x".into())]
        );
    }

    #[test]
    fn encoding_needs_a_single_token() {
        assert_eq!(transfer_encoding(b" base64 (c)"), Some(b"base64".to_vec()));
        assert_eq!(transfer_encoding(b"7bit junk"), None);
        assert_eq!(transfer_encoding(b""), None);
    }

    #[test]
    fn languages() {
        assert_eq!(
            language(b"fr, (x) en-GB"),
            vec![b"fr".to_vec(), b"en-GB".to_vec()]
        );
    }
}
