//! IMAP rendering of ENVELOPE, BODY and BODYSTRUCTURE (RFC 3501 §7.4.2,
//! RFC 9051 §7.5.2), byte for byte as Dovecot 2.3 writes them.

use crate::header::eq_ci;
use crate::{Address, ContentInfo, Envelope, Param, Part, PartKind};

/// Dovecot switches from a quoted string to a literal at the fifth `"` or
/// `\` (a literal is then about as short).
const MAX_QUOTED_ESCAPES: usize = 4;

fn push_literal(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'{');
    out.extend_from_slice(s.len().to_string().as_bytes());
    out.extend_from_slice(b"}\r\n");
    out.extend_from_slice(s);
}

/// A string (RFC 3501 §9 `string`): quoted when it can be, else a literal
/// (CR, LF, 8-bit bytes, or many quoted-specials). A NUL ends the value,
/// as in Dovecot's C strings.
pub(crate) fn push_string(out: &mut Vec<u8>, s: &[u8]) {
    let s = match memchr::memchr(0, s) {
        Some(i) => &s[..i],
        None => s,
    };
    let mut escapes = 0;
    for &c in s {
        let literal = match c {
            b'"' | b'\\' => {
                escapes += 1;
                escapes > MAX_QUOTED_ESCAPES
            }
            b'\r' | b'\n' => true,
            c => c >= 0x80,
        };
        if literal {
            push_literal(out, s);
            return;
        }
    }
    out.push(b'"');
    for &c in s {
        if c == b'"' || c == b'\\' {
            out.push(b'\\');
        }
        out.push(c);
    }
    out.push(b'"');
}

/// `nstring`: NIL or a string.
pub(crate) fn push_nstring(out: &mut Vec<u8>, s: Option<&[u8]>) {
    match s {
        Some(s) => push_string(out, s),
        None => out.extend_from_slice(b"NIL"),
    }
}

/// Removes CR and LF; a space takes their place when the next byte is not
/// white space (so folded lines join with their own indentation).
pub(crate) fn remove_newlines(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    // the runs between line breaks are copied whole
    let mut start = 0;
    for i in memchr::memchr2_iter(b'\r', b'\n', s) {
        out.extend_from_slice(&s[start..i]);
        if !matches!(s.get(i + 1), None | Some(b' ' | b'\t' | b'\r' | b'\n' | 0)) {
            out.push(b' ');
        }
        start = i + 1;
    }
    out.extend_from_slice(&s[start..]);
    out
}

/// `nstring` of an unfolded value (Dovecot's `imap_append_nstring_nolf`).
fn push_nstring_nolf(out: &mut Vec<u8>, s: Option<&[u8]>) {
    match s {
        Some(s) if memchr::memchr2(b'\r', b'\n', s).is_some() => {
            push_string(out, &remove_newlines(s))
        }
        other => push_nstring(out, other),
    }
}

/// A string "for humans" (subject, display names): white space runs become
/// one space, leading and trailing white space goes, NUL becomes 0x80. Any
/// such change, or a `"`, `\` or 8-bit byte, makes it a literal (Dovecot's
/// `imap_append_string_for_humans`).
fn push_string_for_humans(out: &mut Vec<u8>, s: &[u8]) {
    let is_ws = |c: u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    let mut modify = false;
    let mut removed = 0;
    let mut last_ws = true;
    let mut ws_prefix = true;
    for &c in s {
        match c {
            0 => {
                last_ws = false;
                modify = true;
            }
            c if is_ws(c) => {
                if c != b' ' || last_ws {
                    modify = true;
                }
                if last_ws {
                    removed += 1;
                }
                last_ws = true;
            }
            b'"' | b'\\' => {
                modify = true;
                last_ws = false;
            }
            c => {
                if c >= 0x80 {
                    modify = true;
                }
                last_ws = false;
            }
        }
        if !last_ws {
            ws_prefix = false;
        }
    }
    if last_ws && !s.is_empty() && !ws_prefix {
        modify = true;
        removed += 1;
    }
    if !modify {
        out.push(b'"');
        out.extend_from_slice(s);
        out.push(b'"');
        return;
    }
    if s.len() == removed {
        out.extend_from_slice(b"\"\"");
        return;
    }
    let mut text = Vec::with_capacity(s.len());
    let mut last_ws = true;
    for &c in s {
        match c {
            0 => {
                text.push(0x80);
                last_ws = false;
            }
            c if is_ws(c) => {
                if !last_ws {
                    text.push(b' ');
                }
                last_ws = true;
            }
            c => {
                text.push(c);
                last_ws = false;
            }
        }
    }
    if last_ws && text.last() == Some(&b' ') {
        text.pop();
    }
    push_literal(out, &text);
}

fn push_addresses(out: &mut Vec<u8>, list: &[Address]) {
    if list.is_empty() {
        out.extend_from_slice(b"NIL");
        return;
    }
    out.push(b'(');
    for a in list {
        out.push(b'(');
        match &a.name {
            Some(n) => push_string_for_humans(out, n),
            None => out.extend_from_slice(b"NIL"),
        }
        out.push(b' ');
        push_nstring(out, a.route.as_deref());
        out.push(b' ');
        push_nstring(out, a.mailbox.as_deref());
        out.push(b' ');
        push_nstring(out, a.host.as_deref());
        out.push(b')');
    }
    out.push(b')');
}

/// Writes the ENVELOPE value (RFC 3501 §7.4.2) with its parentheses:
/// `("date" "subject" ((from)) ...)`, as the FETCH response carries it
/// after `ENVELOPE `. Strings that cannot be quoted become literals.
pub fn write_envelope(env: &Envelope, out: &mut Vec<u8>) {
    out.push(b'(');
    write_envelope_fields(env, out);
    out.push(b')');
}

fn write_envelope_fields(env: &Envelope, out: &mut Vec<u8>) {
    push_nstring_nolf(out, env.date.as_deref());
    out.push(b' ');
    match &env.subject {
        Some(s) => push_string_for_humans(out, s),
        None => out.extend_from_slice(b"NIL"),
    }
    for list in [
        &env.from,
        &env.sender,
        &env.reply_to,
        &env.to,
        &env.cc,
        &env.bcc,
    ] {
        out.push(b' ');
        push_addresses(out, list);
    }
    out.push(b' ');
    push_nstring_nolf(out, env.in_reply_to.as_deref());
    out.push(b' ');
    push_nstring_nolf(out, env.message_id.as_deref());
}

/// `body-fld-param` (RFC 3501 §9): NIL or a list of name/value strings; a
/// text part without charset gets `"charset" "us-ascii"` (RFC 2045 §5.2).
fn push_params(out: &mut Vec<u8>, params: &[Param], default_charset: bool) {
    if params.is_empty() && !default_charset {
        out.extend_from_slice(b"NIL");
        return;
    }
    out.push(b'(');
    let mut seen_charset = false;
    for (i, p) in params.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        seen_charset |= eq_ci(&p.name, b"charset");
        push_string(out, &p.name);
        out.push(b' ');
        push_string(out, &p.value);
    }
    if default_charset && !seen_charset {
        if !params.is_empty() {
            out.push(b' ');
        }
        out.extend_from_slice(b"\"charset\" \"us-ascii\"");
    }
    out.push(b')');
}

/// Disposition, language and location: the extension data common to
/// multipart and single parts.
fn push_common_ext(out: &mut Vec<u8>, c: &ContentInfo) {
    out.push(b' ');
    match &c.disposition {
        None => out.extend_from_slice(b"NIL"),
        Some(d) => {
            out.push(b'(');
            push_string(out, d);
            out.push(b' ');
            push_params(out, &c.disposition_params, false);
            out.push(b')');
        }
    }
    out.push(b' ');
    if c.language.is_empty() {
        out.extend_from_slice(b"NIL");
    } else {
        out.push(b'(');
        for (i, l) in c.language.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            push_string(out, l);
        }
        out.push(b')');
    }
    out.push(b' ');
    push_nstring_nolf(out, c.location.as_deref());
}

const EMPTY_BODY: &[u8] = b"(\"text\" \"plain\" (\"charset\" \"us-ascii\") NIL NIL \"7bit\" 0 0";

/// Writes BODYSTRUCTURE (`extended`) or BODY (RFC 3501 §7.4.2) of `part`
/// with its parentheses, as the FETCH response carries it.
pub fn write_body_structure(part: &Part, extended: bool, out: &mut Vec<u8>) {
    out.push(b'(');
    write_part(part, extended, out);
    out.push(b')');
}

fn write_part(part: &Part, extended: bool, out: &mut Vec<u8>) {
    let c = &part.content;
    if let PartKind::Multipart(children) = &part.kind {
        if children.is_empty() {
            // A multipart without parts is not allowed (RFC 2046 §5.1.1);
            // Dovecot shows one empty text/plain part.
            out.extend_from_slice(EMPTY_BODY);
            if extended {
                out.extend_from_slice(b" NIL NIL NIL NIL");
            }
            out.push(b')');
        }
        for child in children {
            write_body_structure(child, extended, out);
        }
        out.push(b' ');
        push_string(out, c.subtype.as_deref().unwrap_or_default());
        if extended {
            out.push(b' ');
            push_params(out, &c.params, false);
            push_common_ext(out, c);
        }
        return;
    }
    let text;
    match (&part.kind, &c.media_type) {
        (PartKind::Message { .. }, _) => {
            out.extend_from_slice(b"\"message\" \"rfc822\"");
            text = false;
        }
        (_, None) => {
            out.extend_from_slice(b"\"text\" \"plain\"");
            text = true;
        }
        (_, Some(ty)) => {
            let sub = c.subtype.as_deref().unwrap_or_default();
            if eq_ci(ty, b"multipart") || (eq_ci(ty, b"message") && eq_ci(sub, b"rfc822")) {
                // Kept as one part past the nesting limits: Dovecot calls it
                // application/octet-stream.
                out.extend_from_slice(b"\"application\" \"octet-stream\"");
                text = false;
            } else {
                text = eq_ci(ty, b"text");
                push_string(out, ty);
                out.push(b' ');
                push_string(out, sub);
            }
        }
    }
    out.push(b' ');
    push_params(out, &c.params, text);
    out.push(b' ');
    push_nstring_nolf(out, c.id.as_deref());
    out.push(b' ');
    push_nstring_nolf(out, c.description.as_deref());
    out.push(b' ');
    match &c.encoding {
        Some(e) => push_string(out, e),
        None => out.extend_from_slice(b"\"7bit\""),
    }
    out.push(b' ');
    out.extend_from_slice(part.body_vsize.to_string().as_bytes());
    if let PartKind::Message { envelope, root } = &part.kind {
        out.extend_from_slice(b" ");
        write_envelope(envelope, out);
        out.push(b' ');
        write_body_structure(root, extended, out);
        out.push(b' ');
        out.extend_from_slice(part.body_lines.to_string().as_bytes());
    } else if text {
        out.push(b' ');
        out.extend_from_slice(part.body_lines.to_string().as_bytes());
    }
    if extended {
        out.push(b' ');
        push_nstring_nolf(out, c.md5.as_deref());
        push_common_ext(out, c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        push_string(&mut out, v);
        out
    }

    fn h(v: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        push_string_for_humans(&mut out, v);
        out
    }

    #[test]
    fn quoted_or_literal() {
        assert_eq!(s(b"a\"b"), b"\"a\\\"b\"");
        assert_eq!(s(b"\"\"\"\""), b"\"\\\"\\\"\\\"\\\"\"");
        assert_eq!(s(b"\"\"\"\"\""), b"{5}\r\n\"\"\"\"\"");
        assert_eq!(s(b"caf\xc3\xa9"), b"{5}\r\ncaf\xc3\xa9");
        assert_eq!(s(b"a\0b"), b"\"a\"");
    }

    #[test]
    fn for_humans_collapses_white_space() {
        assert_eq!(h(b"plain text"), b"\"plain text\"");
        assert_eq!(h(b"  a  b\n c "), b"{5}\r\na b c");
        assert_eq!(h(b"   "), b"\"\"");
        assert_eq!(h(b"a\\b"), b"{3}\r\na\\b");
    }

    #[test]
    fn nolf_joins_folded_lines() {
        assert_eq!(remove_newlines(b"a\n b"), b"a b");
        assert_eq!(remove_newlines(b"a\nb"), b"a b");
    }
}
