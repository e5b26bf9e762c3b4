//! Header block building: folding (RFC 5322 §2.2.3), address formatting with RFC 2047
//! display names (RFC 5322 §3.4, RFC 2047 §5 (3)), and identifiers (Message-ID, boundary).

use rand::seq::SliceRandom;
use rand::Rng;

use crate::encode::{encoded_words, WordEncoding};
use crate::words::Person;

/// An ordered header block with LF line endings, ready to prepend to a body.
#[derive(Default)]
pub(crate) struct HeaderBlock {
    pub buf: String,
}

impl HeaderBlock {
    /// Appends `name: value` where `value` is already folded (its continuation lines start
    /// with white space).
    pub(crate) fn raw(&mut self, name: &str, value: &str) {
        self.buf.push_str(name);
        self.buf.push_str(": ");
        self.buf.push_str(value);
        self.buf.push('\n');
    }

    /// Appends `name: value`, folding at spaces so lines stay within 78 characters where
    /// possible (RFC 5322 §2.1.1 SHOULD) with `indent` as the continuation white space.
    pub(crate) fn folded(&mut self, name: &str, value: &str, indent: &str) {
        self.buf.push_str(name);
        self.buf.push(':');
        let mut col = name.len() + 1;
        for (i, w) in value.split(' ').enumerate() {
            let wl = w.chars().count();
            if i > 0 && col + 1 + wl > 78 {
                self.buf.push('\n');
                self.buf.push_str(indent);
                col = indent.len();
            } else {
                self.buf.push(' ');
                col += 1;
            }
            self.buf.push_str(w);
            col += wl;
        }
        self.buf.push('\n');
    }

    /// Appends a list header (addresses, message ids) whose items are separated by `sep`,
    /// folding between items.
    pub(crate) fn list(&mut self, name: &str, items: &[String], sep: &str) {
        self.buf.push_str(name);
        self.buf.push(':');
        let mut col = name.len() + 1;
        for (i, item) in items.iter().enumerate() {
            let il = item.chars().count() + sep.len();
            if i > 0 && col + 1 + il > 78 {
                self.buf.push_str("\n ");
                col = 1;
            } else {
                self.buf.push(' ');
                col += 1;
            }
            self.buf.push_str(item);
            if i + 1 < items.len() {
                self.buf.push_str(sep);
            }
            col += il;
        }
        self.buf.push('\n');
    }
}

/// Encodes an unstructured header text (Subject) the way mailers do: plain when ASCII,
/// else RFC 2047 B or Q words (RFC 2047 §5 (1)) separated by spaces, for
/// [`HeaderBlock::folded`] to fold between them.
pub(crate) fn unstructured<R: Rng + ?Sized>(rng: &mut R, text: &str) -> String {
    if text.is_ascii() {
        return text.to_owned();
    }
    let enc = if rng.gen_bool(0.5) {
        WordEncoding::B
    } else {
        WordEncoding::Q
    };
    let charset = if rng.gen_ratio(1, 4) {
        "utf-8"
    } else {
        "UTF-8"
    };
    // Keep an ASCII "Re: " prefix outside the encoded word, as most clients do.
    let (prefix, rest) = split_reply_prefix(text);
    format!("{prefix}{}", encoded_words(rest, enc, charset, " "))
}

/// Splits leading reply/forward markers ("Re: ", "Fwd: ", "AW: " ...) off a subject.
pub(crate) fn split_reply_prefix(text: &str) -> (&str, &str) {
    let mut end = 0;
    loop {
        let rest = &text[end..];
        let n = ["Re: ", "RE: ", "Fwd: ", "AW: ", "WG: ", "Fw: "]
            .iter()
            .find(|p| rest.starts_with(*p))
            .map(|p| p.len());
        match n {
            Some(n) => end += n,
            None => return (&text[..end], rest),
        }
    }
}

/// Formats a mailbox (RFC 5322 §3.4 name-addr) with the display name plain, quoted (when it
/// holds specials such as `,`) or RFC 2047-encoded when not ASCII.
pub(crate) fn mailbox<R: Rng + ?Sized>(rng: &mut R, p: &Person) -> String {
    if rng.gen_ratio(1, 25) {
        return p.addr.clone();
    }
    if !p.name.is_ascii() {
        let enc = if rng.gen_bool(0.5) {
            WordEncoding::B
        } else {
            WordEncoding::Q
        };
        // RFC 2047 §5 (3): encoded-words may replace a whole phrase.
        return format!("{} <{}>", encoded_words(&p.name, enc, "UTF-8", " "), p.addr);
    }
    if p.name.contains(|c: char| "()<>[]:;@\\,.\"".contains(c)) || rng.gen_ratio(1, 6) {
        format!("\"{}\" <{}>", p.name.replace('"', "\\\""), p.addr)
    } else {
        format!("{} <{}>", p.name, p.addr)
    }
}

/// Random lowercase hex of `n` digits.
pub(crate) fn hex<R: Rng + ?Sized>(rng: &mut R, n: usize) -> String {
    const H: &[u8; 16] = b"0123456789abcdef";
    (0..n)
        .map(|_| char::from(H[rng.gen_range(0..16)]))
        .collect()
}

/// Random characters from `alphabet`.
pub(crate) fn chars<R: Rng + ?Sized>(rng: &mut R, n: usize, alphabet: &[u8]) -> String {
    (0..n)
        .map(|_| char::from(*alphabet.choose(rng).unwrap_or(&b'x')))
        .collect()
}

pub(crate) const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
pub(crate) const B64CHARS: &[u8] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// An upper-case UUID (8-4-4-4-12), as Apple Mail and Exchange use in ids and boundaries.
pub(crate) fn uuid<R: Rng + ?Sized>(rng: &mut R) -> String {
    format!(
        "{}-{}-4{}-{}{}-{}",
        hex(rng, 8),
        hex(rng, 4),
        hex(rng, 3),
        ["8", "9", "a", "b"][rng.gen_range(0..4)],
        hex(rng, 3),
        hex(rng, 12)
    )
}

/// The styles of MIME-producing software, which decide ids, boundaries and extra headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mailer {
    Webmail,
    Outlook,
    Thunderbird,
    AppleMail,
    Mutt,
    Bot,
    Esp,
    Spammer,
}

impl Mailer {
    /// A mailer for a person's own client.
    pub(crate) fn pick_personal<R: Rng + ?Sized>(rng: &mut R) -> Self {
        match rng.gen_range(0..100) {
            0..=39 => Mailer::Webmail,
            40..=59 => Mailer::Outlook,
            60..=79 => Mailer::Thunderbird,
            80..=91 => Mailer::AppleMail,
            _ => Mailer::Mutt,
        }
    }

    /// A Message-ID (RFC 5322 §3.6.4 msg-id, with angle brackets) in this mailer's style;
    /// 80+ random bits keep ids unique across a corpus.
    pub(crate) fn message_id<R: Rng + ?Sized>(self, rng: &mut R, domain: &str, ts: i64) -> String {
        match self {
            Mailer::Webmail => {
                let n = rng.gen_range(38..=54);
                format!(
                    "<CA{}{}@mail.{domain}>",
                    chars(rng, 1, b"BCDEFGHJKLMN"),
                    chars(
                        rng,
                        n,
                        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+_-="
                    )
                )
            }
            Mailer::Outlook => {
                let host = format!(
                    "{}PR{:02}MB{}",
                    ["AM", "DB", "VI", "PA", "DU"][rng.gen_range(0..5)],
                    rng.gen_range(1..10),
                    rng.gen_range(1000..9999)
                );
                format!(
                    "<{host}{}@{host}.eurprd04.prod.outlook.example>",
                    hex(rng, 24).to_uppercase()
                )
            }
            Mailer::Thunderbird => format!("<{}@{domain}>", uuid(rng)),
            Mailer::AppleMail => format!("<{}@{domain}>", uuid(rng).to_uppercase()),
            Mailer::Mutt => format!(
                "<{}.{}@{}.{domain}>",
                crate::date::compact_utc(ts),
                chars(rng, 16, b"abcdefghijklmnopqrstuvwxyz0123456789"),
                ["laptop", "x1", "desk", "pad"][rng.gen_range(0..4)]
            ),
            Mailer::Bot => format!(
                "<{}/{}/pull/{}/c{}@{domain}>",
                ["acme", "maildex", "tools"][rng.gen_range(0..3)],
                ["server", "client", "docs", "infra"][rng.gen_range(0..4)],
                rng.gen_range(10..5000),
                rng.gen_range(1_000_000_000u64..999_999_999_999_999)
            ),
            Mailer::Esp => format!(
                "<0100{}-{}-{}-{}-{}-000000@email.{domain}>",
                hex(rng, 12),
                hex(rng, 8),
                hex(rng, 4),
                hex(rng, 4),
                hex(rng, 12)
            ),
            Mailer::Spammer => {
                format!("<{}${}@{domain}>", hex(rng, 16).to_uppercase(), hex(rng, 6))
            }
        }
    }

    /// A fresh multipart boundary in this mailer's style (RFC 2046 §5.1.1: 1-70 chars from
    /// bchars, not occurring in the content; random parts make that certain in practice).
    pub(crate) fn boundary<R: Rng + ?Sized>(self, rng: &mut R) -> String {
        match self {
            Mailer::Webmail => format!("0000000000{}", hex(rng, 18)),
            Mailer::Outlook => format!(
                "_{:03}_{}_",
                rng.gen_range(0..10),
                hex(rng, 40).to_uppercase()
            ),
            Mailer::Thunderbird => format!("------------{}", chars(rng, 24, ALNUM)),
            Mailer::AppleMail => format!("Apple-Mail={}", uuid(rng).to_uppercase()),
            Mailer::Mutt => chars(rng, 16, ALNUM),
            Mailer::Bot => format!(
                "--==_mimepart_{}_{}",
                hex(rng, 13),
                rng.gen_range(100..99_999)
            ),
            Mailer::Esp => format!(
                "_----------=_MCPart_{}",
                rng.gen_range(100_000_000u64..999_999_999_999)
            ),
            Mailer::Spammer => format!(
                "----=_NextPart_{}_{}",
                hex(rng, 3).to_uppercase(),
                hex(rng, 16).to_uppercase()
            ),
        }
    }

    /// The X-Mailer or User-Agent header this mailer adds, if any.
    pub(crate) fn agent_header<R: Rng + ?Sized>(
        self,
        rng: &mut R,
    ) -> Option<(&'static str, String)> {
        match self {
            Mailer::Webmail => None,
            Mailer::Outlook => Some((
                "X-Mailer",
                format!(
                    "Microsoft Outlook 16.0.{}.{}",
                    rng.gen_range(10000..17999),
                    rng.gen_range(20000..21999)
                ),
            )),
            Mailer::Thunderbird => Some((
                "User-Agent",
                format!(
                    "Mozilla/5.0 ({}; rv:{v}.0) Gecko/20100101 Thunderbird/{v}.{}.{}",
                    [
                        "X11; Linux x86_64",
                        "Windows NT 10.0; Win64; x64",
                        "Macintosh; Intel Mac OS X 10.15"
                    ][rng.gen_range(0..3)],
                    rng.gen_range(0..9),
                    rng.gen_range(0..3),
                    v = [102, 115, 128][rng.gen_range(0..3)]
                ),
            )),
            Mailer::AppleMail => Some((
                "X-Mailer",
                format!(
                    "Apple Mail (2.{}.{}.{})",
                    [3731, 3774, 3826][rng.gen_range(0..3)],
                    rng.gen_range(100..700),
                    rng.gen_range(1..12)
                ),
            )),
            Mailer::Mutt => Some((
                "User-Agent",
                format!(
                    "NeoMutt/2023{:02}{:02}",
                    rng.gen_range(1..13),
                    rng.gen_range(1..29)
                ),
            )),
            Mailer::Bot => None,
            Mailer::Esp => Some(("X-Mailer", "MailChimp Mailer - **CID1a2b3c**".to_owned())),
            Mailer::Spammer => Some((
                "X-Mailer",
                format!(
                    "PHPMailer 6.{}.{} (https://github.example/PHPMailer/PHPMailer)",
                    rng.gen_range(0..9),
                    rng.gen_range(0..9)
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn folded_lines_stay_short() {
        let mut h = HeaderBlock::default();
        let long = "word ".repeat(60);
        h.folded("Subject", long.trim_end(), " ");
        assert!(h.buf.lines().all(|l| l.len() <= 78), "{}", h.buf);
        assert!(h.buf.lines().skip(1).all(|l| l.starts_with(' ')));
        let unfolded = h.buf.replace("\n ", " ");
        assert_eq!(unfolded, format!("Subject: {}\n", long.trim_end()));
    }

    #[test]
    fn list_folds_between_items() {
        let mut h = HeaderBlock::default();
        let items: Vec<String> = (0..12)
            .map(|i| format!("Person {i} <p{i}@example.com>"))
            .collect();
        h.list("To", &items, ",");
        assert!(h.buf.lines().all(|l| l.len() <= 78), "{}", h.buf);
        assert_eq!(
            h.buf.replace("\n ", " "),
            format!("To: {}\n", items.join(", "))
        );
    }

    #[test]
    fn reply_prefix_stays_ascii() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let s = unstructured(&mut rng, "Re: Fwd: Réunion");
        assert!(s.starts_with("Re: Fwd: =?"), "{s}");
        assert_eq!(unstructured(&mut rng, "Re: plain"), "Re: plain");
    }
}
