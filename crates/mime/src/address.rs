//! RFC 5322 §3.4 address lists for ENVELOPE, groups included.
//!
//! Broken addresses are kept rather than dropped, with the placeholders
//! Dovecot puts in ENVELOPE (`MISSING_MAILBOX`, `MISSING_DOMAIN`,
//! `SYNTAX_ERROR`, `INVALID_ROUTE`) so clients see the same list.

use crate::rfc822::{is_atext, Lex, Lexer};
use crate::Address;

const MISSING_MAILBOX: &[u8] = b"MISSING_MAILBOX";
const MISSING_DOMAIN: &[u8] = b"MISSING_DOMAIN";

#[derive(Default)]
struct Cur {
    name: Option<Vec<u8>>,
    route: Option<Vec<u8>>,
    mailbox: Option<Vec<u8>>,
    domain: Option<Vec<u8>>,
    invalid: bool,
}

struct Parser<'a> {
    lx: Lexer<'a>,
    out: Vec<Address>,
    cur: Cur,
}

/// Result of a parse step: `Fail` (-1), `End` (0) or `More` (1).
type R = Lex;

impl Parser<'_> {
    fn push(&mut self) {
        let c = std::mem::take(&mut self.cur);
        self.out.push(Address {
            name: c.name,
            route: c.route,
            mailbox: c.mailbox,
            host: c.domain,
        });
    }

    /// Pushes the current mailbox with placeholders for missing pieces.
    fn push_fixed(&mut self) {
        if self.cur.mailbox.is_none() {
            self.cur.mailbox = Some(MISSING_MAILBOX.to_vec());
            self.cur.invalid = true;
        }
        if self.cur.domain.as_deref().is_none_or(<[u8]>::is_empty) {
            self.cur.domain = Some(MISSING_DOMAIN.to_vec());
            self.cur.invalid = true;
        }
        self.push();
    }

    /// local-part = dot-atom / quoted-string / obs-local-part
    fn local_part(&mut self) -> R {
        let mut s = Vec::new();
        let r = if self.lx.cur() == b'"' {
            self.lx.quoted_string(&mut s)
        } else {
            self.lx.dot_atom(&mut s)
        };
        if r == Lex::Fail {
            return Lex::Fail;
        }
        self.cur.mailbox = Some(s);
        r
    }

    fn domain(&mut self) -> R {
        let mut s = Vec::new();
        let r = self.lx.domain(&mut s);
        if r == Lex::Fail {
            return Lex::Fail;
        }
        self.cur.domain = Some(s);
        r
    }

    /// obs-domain-list (RFC 5322 §4.4): `@a,@b` before `:`.
    fn domain_list(&mut self) -> R {
        let mut s = Vec::new();
        loop {
            if self.lx.at_end() {
                return Lex::End;
            }
            if self.lx.cur() != b'@' {
                break;
            }
            if !s.is_empty() {
                s.push(b',');
            }
            s.push(b'@');
            let r = self.lx.domain(&mut s);
            if r.stop() {
                return r;
            }
            while self.lx.skip_lwsp() == Lex::More && self.lx.cur() == b',' {
                self.lx.pos += 1;
            }
        }
        self.cur.route = Some(s);
        Lex::More
    }

    /// angle-addr = "<" [obs-route] addr-spec ">"; the cursor is on `<`.
    fn angle_addr(&mut self) -> R {
        self.lx.pos += 1;
        if self.lx.skip_lwsp().stop() {
            return Lex::Fail;
        }
        if self.lx.cur() == b'@' {
            if self.domain_list() == Lex::More && self.lx.cur() == b':' {
                self.lx.pos += 1;
            } else {
                self.cur.route = Some(b"INVALID_ROUTE".to_vec());
                if self.lx.at_end() {
                    return Lex::Fail;
                }
            }
            if self.lx.skip_lwsp().stop() {
                return Lex::Fail;
            }
        }
        if self.lx.cur() != b'>' {
            if self.local_part().stop() {
                return Lex::Fail;
            }
            if self.lx.cur() == b'@' && self.domain().stop() {
                return Lex::Fail;
            }
        }
        if self.lx.cur() != b'>' {
            return Lex::Fail;
        }
        self.lx.pos += 1;
        self.lx.skip_lwsp()
    }

    /// name-addr = [display-name] angle-addr
    fn name_addr(&mut self) -> R {
        let mut s = Vec::new();
        if self.lx.phrase(&mut s).stop() || self.lx.cur() != b'<' {
            return Lex::Fail;
        }
        self.cur.name = if s.is_empty() { None } else { Some(s) };
        if self.angle_addr() == Lex::Fail {
            self.cur.domain = Some(b"SYNTAX_ERROR".to_vec());
            self.cur.invalid = true;
        }
        if self.lx.at_end() {
            Lex::End
        } else {
            Lex::More
        }
    }

    /// addr-spec = local-part "@" domain, with `(comment)` as the name and a
    /// lone word taken as a mailbox, several words as a name.
    fn addr_spec(&mut self) -> R {
        if let Some(c) = self.lx.last_comment.as_mut() {
            c.clear();
        }
        let quoted = self.lx.cur() == b'"';
        let mut r = self.local_part();
        if r.stop() {
            self.cur.invalid = true;
        }
        let mut domain_r = None;
        if r != Lex::End && !self.lx.at_end() && self.lx.cur() == b'@' {
            let r2 = self.domain();
            if r2.stop() {
                r = r2;
            }
            domain_r = Some(r2);
        }
        let comment = self.lx.last_comment.clone().unwrap_or_default();
        if !comment.is_empty() {
            self.cur.name = Some(comment);
        } else if domain_r.is_none() {
            // Only "user" so far: alone it is a mailbox, followed by more
            // words it is a display name.
            let mut s = self.cur.mailbox.clone().unwrap_or_default();
            s.push(b' ');
            let len = s.len();
            let _ = self.lx.phrase(&mut s);
            if s.len() != len {
                self.cur.mailbox = None;
                self.cur.name = Some(s);
            } else if !quoted {
                self.cur.domain = Some(Vec::new());
            }
            self.cur.invalid = true;
            r = Lex::Fail;
        }
        r
    }

    /// mailbox = name-addr / addr-spec
    fn mailbox(&mut self) -> R {
        let start = self.lx.pos;
        let mut r = self.name_addr();
        if r == Lex::Fail {
            self.lx.pos = start;
            r = self.addr_spec();
            if self.cur.invalid
                && self.cur.name.is_none()
                && self.cur.mailbox.is_some()
                && self.cur.domain.is_none()
            {
                self.cur.name = self.cur.mailbox.take();
            }
        }
        if r == Lex::Fail {
            self.cur.invalid = true;
        }
        self.push_fixed();
        r
    }

    /// group = display-name ":" [group-list] ";" [CFWS]
    fn group(&mut self) -> R {
        let mut s = Vec::new();
        if self.lx.phrase(&mut s).stop() || self.lx.cur() != b':' {
            return Lex::Fail;
        }
        self.lx.pos += 1;
        let mut r = self.lx.skip_lwsp();
        if r.stop() {
            self.cur.invalid = true;
        }
        self.cur.mailbox = Some(s);
        self.push();
        if r == Lex::More && self.lx.cur() != b';' {
            loop {
                let _ = self.mailbox();
                if self.lx.at_end() || self.lx.cur() != b',' {
                    break;
                }
                self.lx.pos += 1;
                if self.lx.skip_lwsp().stop() {
                    r = Lex::Fail;
                    break;
                }
            }
        }
        if r != Lex::Fail {
            if self.lx.at_end() || self.lx.cur() != b';' {
                r = Lex::Fail;
            } else {
                self.lx.pos += 1;
                r = self.lx.skip_lwsp();
            }
        }
        if r == Lex::Fail {
            self.cur.invalid = true;
        }
        self.push();
        if r == Lex::End {
            Lex::End
        } else {
            Lex::More
        }
    }

    /// address = mailbox / group
    fn address(&mut self) -> R {
        let start = self.lx.pos;
        let r = self.group();
        if r == Lex::Fail {
            self.lx.pos = start;
            return self.mailbox();
        }
        r
    }

    fn address_list(&mut self) {
        loop {
            if self.address() == Lex::End {
                break;
            }
            if self.lx.at_end() || self.lx.cur() != b',' {
                break;
            }
            self.lx.pos += 1;
            match self.lx.skip_lwsp() {
                Lex::More => {}
                Lex::Fail => {
                    // ends with garbage
                    self.push_fixed();
                    break;
                }
                Lex::End => break,
            }
        }
    }
}

/// Parses an address field body (From, To, ...) into ENVELOPE entries.
pub(crate) fn parse_address_list(value: &[u8]) -> Vec<Address> {
    let mut p = Parser {
        lx: Lexer::with_comments(value),
        out: Vec::new(),
        cur: Cur::default(),
    };
    if p.lx.skip_lwsp() == Lex::More {
        p.address_list();
    }
    p.out
}

/// An address field body written out the way Dovecot's SEARCH sees it
/// (`message_address_write`): each address of the ENVELOPE list as
/// `name <route:mailbox@domain>` (`<mailbox@domain>` without a name), a
/// group as `name: member, member;`, names and local parts quoted (and
/// `"`, `\` and `'` escaped) when they are not atoms. Comments are gone, so
/// `<user (c)@ (c) example.org>` reads `<user@example.org>`. Encoded words
/// are kept; the caller decodes them. RFC 3501 §6.4.4 FROM/TO/CC/BCC match
/// a substring of this text, which holds the address as ENVELOPE reads it
/// and the display name, as in Dovecot.
pub fn address_search_text(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    let mut first = true;
    let mut in_group = false;
    for a in parse_address_list(value) {
        if !first {
            out.extend_from_slice(b", ");
        }
        first = false;
        if a.host.is_none() {
            if in_group {
                // end of group: "a, b;" or "name:;"
                if out.ends_with(b", ") {
                    out.truncate(out.len() - 2);
                } else if out.ends_with(b": ") {
                    out.truncate(out.len() - 1);
                }
                out.push(b';');
            } else {
                match a.mailbox.as_deref() {
                    Some(n) if !n.is_empty() => push_phrase(&mut out, n),
                    _ => out.extend_from_slice(b"\"\""),
                }
                out.extend_from_slice(b": ");
                first = true;
            }
            in_group = !in_group;
            continue;
        }
        let name = a.name.as_deref().unwrap_or_default();
        push_phrase(&mut out, name);
        let mailbox = a.mailbox.as_deref().unwrap_or_default();
        let host = a.host.as_deref().unwrap_or_default();
        if a.route.is_none() && mailbox.is_empty() && host.is_empty() {
            continue;
        }
        if !name.is_empty() {
            out.push(b' ');
        }
        out.push(b'<');
        if let Some(route) = &a.route {
            out.extend_from_slice(route);
            out.push(b':');
        }
        if mailbox.is_empty() {
            out.extend_from_slice(b"\"\"");
        } else {
            push_maybe_quoted(&mut out, mailbox, false);
        }
        if !host.is_empty() {
            out.push(b'@');
            out.extend_from_slice(host);
        }
        out.push(b'>');
    }
    out
}

/// A display or group name: as it is when it holds an encoded word (RFC 2047
/// §5 forbids them inside quotes), else quoted if needed.
fn push_phrase(out: &mut Vec<u8>, name: &[u8]) {
    if memchr::memmem::find(name, b"=?").is_some() {
        out.extend_from_slice(name);
    } else {
        push_maybe_quoted(out, name, true);
    }
}

/// `text` as an atom (dots allowed unless `quote_dot`), or else as a quoted
/// string with `"`, `\` and `'` escaped (Dovecot's `str_append_maybe_escape`).
fn push_maybe_quoted(out: &mut Vec<u8>, text: &[u8], quote_dot: bool) {
    if text
        .iter()
        .all(|&c| is_atext(c) || (!quote_dot && c == b'.'))
    {
        out.extend_from_slice(text);
        return;
    }
    out.push(b'"');
    for &c in text {
        if matches!(c, b'"' | b'\\' | b'\'') {
            out.push(b'\\');
        }
        out.push(c);
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(v: &str) -> Vec<[Option<String>; 4]> {
        parse_address_list(v.as_bytes())
            .into_iter()
            .map(|a| {
                let s = |x: Option<Vec<u8>>| x.map(|x| String::from_utf8_lossy(&x).into_owned());
                [s(a.name), s(a.route), s(a.mailbox), s(a.host)]
            })
            .collect()
    }

    fn a(
        n: Option<&str>,
        r: Option<&str>,
        m: Option<&str>,
        h: Option<&str>,
    ) -> [Option<String>; 4] {
        [n, r, m, h].map(|x| x.map(str::to_string))
    }

    #[test]
    fn name_addr_and_comment_name() {
        assert_eq!(
            show("\"Doe, John\" <j@x.org>, k@y.org (Kay)"),
            vec![
                a(Some("Doe, John"), None, Some("j"), Some("x.org")),
                a(Some("Kay"), None, Some("k"), Some("y.org")),
            ]
        );
    }

    #[test]
    fn groups_have_start_and_end_markers() {
        assert_eq!(
            show("undisclosed-recipients:;"),
            vec![
                a(None, None, Some("undisclosed-recipients"), None),
                a(None, None, None, None)
            ]
        );
    }

    #[test]
    fn broken_addresses_get_placeholders() {
        assert_eq!(
            show("user, <>, x <a@b"),
            vec![
                a(None, None, Some("user"), Some("MISSING_DOMAIN")),
                a(None, None, Some("MISSING_MAILBOX"), Some("MISSING_DOMAIN")),
                a(Some("x"), None, Some("a"), Some("SYNTAX_ERROR")),
            ]
        );
    }

    fn search_text(v: &str) -> String {
        String::from_utf8_lossy(&address_search_text(v.as_bytes())).into_owned()
    }

    #[test]
    fn search_text_is_the_envelope_address_written_out() {
        assert_eq!(
            search_text("<user-from (comment)@ (comment) domain.org>"),
            "<user-from@domain.org>"
        );
        assert_eq!(
            search_text("joe@example.org (Joe Bloggs), \"a\\\"b\" <ab@x.org>"),
            "\"Joe Bloggs\" <joe@example.org>, \"a\\\"b\" <ab@x.org>"
        );
        assert_eq!(
            search_text("Team: ann@x.org, Bob <bob@x.org>;, \"quoted local\"@x.org"),
            "Team: <ann@x.org>, Bob <bob@x.org>;, <\"quoted local\"@x.org>"
        );
        assert_eq!(
            search_text("undisclosed-recipients:;"),
            "undisclosed-recipients:;"
        );
        assert_eq!(
            search_text("=?UTF-8?Q?J=C3=B6rg?= <j@x.org>, <@r.example:m@x.org>, broken@"),
            "=?UTF-8?Q?J=C3=B6rg?= <j@x.org>, <@r.example:m@x.org>, <broken@MISSING_DOMAIN>"
        );
    }

    #[test]
    fn empty_and_comment_only_give_nothing() {
        assert!(show("").is_empty());
        assert!(show("  (just a comment) ").is_empty());
    }
}
