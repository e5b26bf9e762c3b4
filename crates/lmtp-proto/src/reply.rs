//! Reply codes and their wire format (RFC 5321 §4.2, RFC 3463 enhanced codes).

use std::fmt;

/// An RFC 3463 enhanced status code `class.subject.detail`, e.g. `5.1.1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enhanced {
    /// 2 (success), 4 (persistent transient failure) or 5 (permanent failure).
    pub class: u8,
    /// Subject: 1 addressing, 2 mailbox, 3 mail system, 4 network, 5 protocol, ...
    pub subject: u16,
    /// Detail within the subject.
    pub detail: u16,
}

impl Enhanced {
    /// Builds `class.subject.detail`.
    pub const fn new(class: u8, subject: u16, detail: u16) -> Self {
        Enhanced {
            class,
            subject,
            detail,
        }
    }
}

impl fmt::Display for Enhanced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.class, self.subject, self.detail)
    }
}

/// A failure status the server hands to the session for one recipient, at
/// RCPT ([`crate::RcptResult::Rejected`]) or after the message
/// ([`crate::RcptOutcome::Failed`]).
///
/// The session formats it as `<code> <enhanced> <<recipient>> <text>`.
/// Control characters in `text` (CR, LF, ...) are replaced by spaces so a
/// text can never inject a reply line. A `code` outside 400..=599 is a caller
/// bug; it is sent as `451 4.3.0` so the client retries rather than loses mail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// Three-digit reply code (RFC 5321 §4.2.1), 4xx or 5xx.
    pub code: u16,
    /// Enhanced status code (RFC 3463); its class should match `code`.
    pub enhanced: Enhanced,
    /// Human-readable text, one line.
    pub text: String,
}

impl Status {
    /// A status with the given code, enhanced code and text.
    pub fn new(code: u16, enhanced: Enhanced, text: impl Into<String>) -> Self {
        Status {
            code,
            enhanced,
            text: text.into(),
        }
    }

    /// `550 5.1.1`: no such user (RFC 3463 §3.2 "Bad destination mailbox
    /// address"); what LMTP answers at RCPT for an unknown user (RFC 2033 §4.2).
    pub fn unknown_user() -> Self {
        Status::new(550, Enhanced::new(5, 1, 1), "User unknown")
    }

    /// `552 5.2.2`: mailbox over quota (RFC 3463 §3.3 "Mailbox full").
    pub fn over_quota() -> Self {
        Status::new(552, Enhanced::new(5, 2, 2), "Mailbox over quota")
    }

    /// `552 5.3.4`: message bigger than the limit (RFC 3463 §3.4).
    pub fn too_big() -> Self {
        Status::new(552, Enhanced::new(5, 3, 4), "Message too big")
    }

    /// `451 4.3.0`: temporary local failure (index trouble, I/O error); the
    /// client keeps the message and retries.
    pub fn temporary(text: impl Into<String>) -> Self {
        Status::new(451, Enhanced::new(4, 3, 0), text)
    }

    /// `452 4.3.1`: mail system full (disk full), RFC 3463 §3.4.
    pub fn disk_full() -> Self {
        Status::new(452, Enhanced::new(4, 3, 1), "Insufficient system storage")
    }
}

/// Formats one single-line reply. `enhanced` is written only when the
/// client has seen ENHANCEDSTATUSCODES in the LHLO reply (RFC 2034 §3).
pub(crate) fn line(code: u16, enhanced: Option<Enhanced>, text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 16);
    out.extend_from_slice(code.to_string().as_bytes());
    out.push(b' ');
    if let Some(e) = enhanced {
        out.extend_from_slice(e.to_string().as_bytes());
        out.push(b' ');
    }
    push_text(&mut out, text);
    out.extend_from_slice(b"\r\n");
    out
}

/// Appends `text` with control characters replaced by spaces.
pub(crate) fn push_text(out: &mut Vec<u8>, text: &str) {
    out.extend(
        text.bytes()
            .map(|b| if b < 0x20 || b == 0x7f { b' ' } else { b }),
    );
}

/// Formats a multi-line reply: `code-` on all lines but the last, which
/// gets `code ` (RFC 5321 §4.2.1). No enhanced codes: RFC 2034 §3 leaves
/// them out of the EHLO (here LHLO) reply.
pub(crate) fn multiline(code: u16, lines: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        out.extend_from_slice(code.to_string().as_bytes());
        out.push(if i + 1 == lines.len() { b' ' } else { b'-' });
        push_text(&mut out, l);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Formats a per-recipient failure: `<code> <enh> <<addr>> <text>`.
pub(crate) fn recipient_failure(status: &Status, addr: &str, enhanced: bool) -> Vec<u8> {
    let (code, enh) = if (400..=599).contains(&status.code) {
        (status.code, status.enhanced)
    } else {
        (451, Enhanced::new(4, 3, 0))
    };
    let text = format!("<{addr}> {}", status.text);
    line(code, enhanced.then_some(enh), &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enhanced_only_when_asked() {
        assert_eq!(line(250, None, "Ok"), b"250 Ok\r\n");
        assert_eq!(
            line(250, Some(Enhanced::new(2, 1, 0)), "Ok"),
            b"250 2.1.0 Ok\r\n"
        );
    }

    #[test]
    fn text_cannot_inject_lines() {
        let s = Status::new(550, Enhanced::new(5, 1, 1), "no\r\n250 2.0.0 fake");
        assert_eq!(
            recipient_failure(&s, "a@b", true),
            b"550 5.1.1 <a@b> no  250 2.0.0 fake\r\n"
        );
    }

    #[test]
    fn success_code_in_failure_becomes_temporary() {
        let s = Status::new(250, Enhanced::new(2, 0, 0), "oops");
        assert_eq!(
            recipient_failure(&s, "a@b", true),
            b"451 4.3.0 <a@b> oops\r\n"
        );
    }

    #[test]
    fn multiline_dashes() {
        let l = vec!["h".to_string(), "PIPELINING".to_string()];
        assert_eq!(multiline(250, &l), b"250-h\r\n250 PIPELINING\r\n");
    }
}
