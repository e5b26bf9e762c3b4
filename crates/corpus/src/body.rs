//! MIME parts (RFC 2045, RFC 2046): text parts with the transfer encoding each mailer would
//! pick, binary attachments, multipart containers with unique boundaries, message/rfc822,
//! signatures (RFC 1847 multipart/signed, RFC 3156 PGP/MIME, RFC 8551 S/MIME).

use rand::seq::SliceRandom;
use rand::Rng;

use crate::encode::{base64_lines_into, encoded_words, quoted_printable, WordEncoding};
use crate::header::{hex, Mailer};
use crate::payload::{binary, BinKind, FastStream};
use crate::words::Lang;

/// One MIME entity: its content header lines (each ended by LF) and its body bytes.
pub(crate) struct Part {
    pub headers: String,
    pub body: Vec<u8>,
}

impl Part {
    /// Size of the entity as it sits inside its parent (headers, blank line, body).
    pub(crate) fn len(&self) -> usize {
        self.headers.len() + 1 + self.body.len()
    }
}

/// State shared by all parts of one message: the mailer style, the filler stream, and the
/// boundaries already used (RFC 2046 §5.1.1: a nested boundary must differ from every
/// enclosing one; we make them unique within the whole message).
pub(crate) struct Mime {
    pub mailer: Mailer,
    pub stream: FastStream,
    /// Text parts must be 7bit-safe (inside multipart/signed, RFC 1847 §2.1).
    pub seven_bit: bool,
    used: Vec<String>,
}

impl Mime {
    pub(crate) fn new<R: Rng + ?Sized>(rng: &mut R, mailer: Mailer) -> Self {
        Mime {
            mailer,
            stream: FastStream::from_rng(rng),
            seven_bit: false,
            used: Vec::new(),
        }
    }

    fn boundary<R: Rng + ?Sized>(&mut self, rng: &mut R) -> String {
        loop {
            let b = self.mailer.boundary(rng);
            if !self.used.contains(&b) {
                self.used.push(b.clone());
                return b;
            }
        }
    }

    /// A multipart entity (RFC 2046 §5.1.1): each child after a "--boundary" line, closed
    /// by "--boundary--". `params` follow the boundary parameter (e.g. `type=...`).
    pub(crate) fn multipart<R: Rng + ?Sized>(
        &mut self,
        rng: &mut R,
        subtype: &str,
        params: &str,
        children: Vec<Part>,
    ) -> Part {
        let b = self.boundary(rng);
        let headers = match self.mailer {
            Mailer::Webmail | Mailer::Thunderbird | Mailer::Esp => {
                format!("Content-Type: multipart/{subtype};{params} boundary=\"{b}\"\n")
            }
            _ => format!("Content-Type: multipart/{subtype};{params}\n\tboundary=\"{b}\"\n"),
        };
        let total: usize = children.iter().map(Part::len).sum();
        let mut body = Vec::with_capacity(total + children.len() * (b.len() + 8) + 128);
        if matches!(
            self.mailer,
            Mailer::Thunderbird | Mailer::Outlook | Mailer::Spammer
        ) && subtype != "alternative"
        {
            body.extend_from_slice(b"This is a multi-part message in MIME format.\n");
        }
        for c in children {
            body.extend_from_slice(b"--");
            body.extend_from_slice(b.as_bytes());
            body.push(b'\n');
            body.extend_from_slice(c.headers.as_bytes());
            body.push(b'\n');
            body.extend_from_slice(&c.body);
            if body.last() != Some(&b'\n') {
                body.push(b'\n');
            }
            // Apple Mail and Outlook leave a blank line before the next delimiter.
            if matches!(self.mailer, Mailer::AppleMail | Mailer::Outlook) {
                body.push(b'\n');
            }
        }
        body.extend_from_slice(b"--");
        body.extend_from_slice(b.as_bytes());
        body.extend_from_slice(b"--\n");
        Part { headers, body }
    }

    /// A text/plain or text/html part, transfer-encoded as this mailer would (RFC 2045 §6):
    /// 7bit when it can be, else 8bit, quoted-printable or base64. Lines over 998 octets
    /// always get an encoding (RFC 5322 §2.1.1).
    pub(crate) fn text<R: Rng + ?Sized>(
        &mut self,
        rng: &mut R,
        subtype: &str,
        text: &str,
        lang: Lang,
        flowed: bool,
    ) -> Part {
        let ascii = text.is_ascii();
        let longest = text.split('\n').map(str::len).max().unwrap_or(0);
        let long = longest > 76;
        let charset = match self.mailer {
            Mailer::Mutt if ascii => "us-ascii",
            Mailer::Webmail | Mailer::Bot => "\"UTF-8\"",
            Mailer::Spammer | Mailer::Outlook if rng.gen_bool(0.5) => "\"utf-8\"",
            _ => "UTF-8",
        };
        let cte = if self.mailer == Mailer::Spammer {
            "base64"
        } else if ascii && !long {
            "7bit"
        } else {
            match self.mailer {
                Mailer::Mutt | Mailer::Thunderbird
                    if longest <= 998 && (self.mailer == Mailer::Mutt || rng.gen_bool(0.7)) =>
                {
                    if ascii {
                        "7bit"
                    } else {
                        "8bit"
                    }
                }
                Mailer::Webmail if matches!(lang, Lang::Ru | Lang::Ja) => "base64",
                _ => "quoted-printable",
            }
        };
        let cte = if self.seven_bit && cte == "8bit" {
            "quoted-printable"
        } else {
            cte
        };
        let mut headers = format!("Content-Type: text/{subtype}; charset={charset}");
        if flowed && subtype == "plain" {
            headers.push_str("; format=flowed");
        }
        headers.push('\n');
        // RFC 2045 §6.1: omitting Content-Transfer-Encoding means 7bit; webmail does that.
        if !(cte == "7bit" && matches!(self.mailer, Mailer::Webmail) && rng.gen_bool(0.7)) {
            headers.push_str("Content-Transfer-Encoding: ");
            headers.push_str(cte);
            headers.push('\n');
        }
        let body = match cte {
            "base64" => {
                let mut v = Vec::with_capacity(text.len() * 4 / 3 + text.len() / 57 + 4);
                base64_lines_into(text.as_bytes(), &mut v);
                v
            }
            "quoted-printable" => quoted_printable(text).into_bytes(),
            _ => text.as_bytes().to_vec(),
        };
        Part { headers, body }
    }

    /// A base64 binary attachment (RFC 2045 §6.8, 76-char lines) of `size` raw bytes.
    /// With `cid`, an inline part for multipart/related (RFC 2387) referenced by Content-ID.
    pub(crate) fn binary<R: Rng + ?Sized>(
        &mut self,
        rng: &mut R,
        kind: BinKind,
        size: usize,
        filename: &str,
        cid: Option<&str>,
    ) -> Part {
        let data = binary(kind, size, &mut self.stream);
        let name_param = filename_params(rng, self.mailer, filename);
        let mut headers = format!(
            "Content-Type: {};\n\tname{}\n",
            kind.mime_type(),
            name_param.0
        );
        if let Some(cid) = cid {
            headers.push_str(&format!(
                "Content-Disposition: inline;\n\tfilename{}\n",
                name_param.1
            ));
            headers.push_str(&format!("Content-ID: <{cid}>\n"));
            if self.mailer == Mailer::Webmail {
                headers.push_str(&format!(
                    "X-Attachment-Id: {}\n",
                    cid.split('@').next().unwrap_or(cid)
                ));
            }
        } else if self.mailer == Mailer::Outlook {
            headers.push_str(&format!(
                "Content-Description: {filename}\nContent-Disposition: attachment;\n\tfilename{}; size={size};\n\tcreation-date=\"Tue, 28 Nov 2023 13:20:11 GMT\";\n\tmodification-date=\"Tue, 28 Nov 2023 13:23:12 GMT\"\n",
                name_param.1
            ));
        } else {
            headers.push_str(&format!(
                "Content-Disposition: attachment;\n\tfilename{}\n",
                name_param.1
            ));
            if self.mailer == Mailer::Webmail {
                headers.push_str(&format!(
                    "X-Attachment-Id: f_{}\nContent-ID: <f_{}>\n",
                    hex(rng, 10),
                    hex(rng, 10)
                ));
            }
        }
        headers.push_str("Content-Transfer-Encoding: base64\n");
        let mut body = Vec::with_capacity(size * 4 / 3 + size / 57 + 4);
        base64_lines_into(&data, &mut body);
        Part { headers, body }
    }

    /// A text attachment (patch, log, CSV, calendar): inline or attachment, 7bit/8bit.
    pub(crate) fn text_attachment(
        &mut self,
        mime: &str,
        filename: &str,
        text: String,
        inline: bool,
    ) -> Part {
        let cte = if text.is_ascii() { "7bit" } else { "8bit" };
        let disp = if inline { "inline" } else { "attachment" };
        Part {
            headers: format!(
                "Content-Type: {mime}; charset=UTF-8; name=\"{filename}\"\nContent-Disposition: {disp}; filename=\"{filename}\"\nContent-Transfer-Encoding: {cte}\n"
            ),
            body: text.into_bytes(),
        }
    }

    /// A message/rfc822 part carrying a complete message (RFC 2046 §5.2.1), as clients
    /// forward "as attachment".
    pub(crate) fn rfc822(&mut self, inner: Vec<u8>, subject_file: &str) -> Part {
        let eightbit = inner.iter().any(|&b| b >= 0x80);
        let mut headers = format!("Content-Type: message/rfc822;\n\tname=\"{subject_file}.eml\"\n");
        headers.push_str(&format!(
            "Content-Disposition: attachment;\n\tfilename=\"{subject_file}.eml\"\n"
        ));
        // RFC 2046 §5.2.1: only 7bit, 8bit or binary are allowed on message/rfc822.
        headers.push_str(if eightbit {
            "Content-Transfer-Encoding: 8bit\n"
        } else {
            "Content-Transfer-Encoding: 7bit\n"
        });
        Part {
            headers,
            body: inner,
        }
    }

    /// The detached signature part of multipart/signed: ASCII-armoured OpenPGP (RFC 3156 §5)
    /// or base64 CMS (RFC 8551 §3.5.3).
    pub(crate) fn signature(&mut self, smime: bool) -> Part {
        let mut raw = Vec::new();
        if smime {
            self.stream.fill(&mut raw, 3600);
            let mut body = Vec::new();
            base64_lines_into(&raw, &mut body);
            Part {
                headers: "Content-Type: application/pkcs7-signature; name=\"smime.p7s\"\nContent-Transfer-Encoding: base64\nContent-Disposition: attachment; filename=\"smime.p7s\"\nContent-Description: S/MIME Cryptographic Signature\n".to_owned(),
                body,
            }
        } else {
            // An OpenPGP v4 signature packet header (tag 2, RSA, SHA-256, issuer fingerprint
            // subpacket) so the armour starts like real ones ("iQIzBAABCAAdFiEE").
            raw.extend_from_slice(&[
                0x89, 0x02, 0x33, 0x04, 0x00, 0x01, 0x08, 0x00, 0x1d, 0x16, 0x21, 0x04,
            ]);
            self.stream.fill(&mut raw, 554);
            let mut b64 = Vec::new();
            crate::encode::base64_into(&raw, &mut b64);
            let mut body = b"-----BEGIN PGP SIGNATURE-----\n\n".to_vec();
            for line in b64.chunks(64) {
                body.extend_from_slice(line);
                body.push(b'\n');
            }
            body.extend_from_slice(b"=");
            body.extend_from_slice(&b64[..4]);
            body.extend_from_slice(b"\n-----END PGP SIGNATURE-----\n");
            Part {
                headers: "Content-Type: application/pgp-signature; name=\"signature.asc\"\nContent-Description: OpenPGP digital signature\nContent-Disposition: attachment; filename=\"signature.asc\"\n".to_owned(),
                body,
            }
        }
    }
}

/// The `name`/`filename` parameter tails (`="x"` or RFC 2231 `*=UTF-8''x`) for a file name
/// as this mailer writes it: RFC 2231 §4 for Thunderbird/mutt, RFC 2047 words inside the
/// quoted string for webmail/Outlook (not standard, but what those clients send).
fn filename_params<R: Rng + ?Sized>(
    rng: &mut R,
    mailer: Mailer,
    filename: &str,
) -> (String, String) {
    if filename.is_ascii() {
        let q = format!("=\"{filename}\"");
        return (q.clone(), q);
    }
    match mailer {
        Mailer::Thunderbird | Mailer::Mutt | Mailer::AppleMail => {
            let mut pct = String::new();
            for b in filename.bytes() {
                if b.is_ascii_alphanumeric() || b".-_".contains(&b) {
                    pct.push(char::from(b));
                } else {
                    pct.push_str(&format!("%{b:02X}"));
                }
            }
            let v = format!("*=UTF-8''{pct}");
            (v.clone(), v)
        }
        _ => {
            let enc = if rng.gen_bool(0.5) {
                WordEncoding::B
            } else {
                WordEncoding::Q
            };
            let v = format!("=\"{}\"", encoded_words(filename, enc, "UTF-8", " "));
            (v.clone(), v)
        }
    }
}

/// An attachment file name for `kind`, some of them non-ASCII.
pub(crate) fn filename<R: Rng + ?Sized>(rng: &mut R, kind: BinKind) -> String {
    let stem = match kind {
        BinKind::Pdf => [
            "Invoice_2023-11",
            "report-q3-final",
            "Vertrag_unterschrieben",
            "boarding-pass",
            "Facture n°4512",
            "slides",
        ]
        .choose(rng),
        BinKind::Jpeg => [
            "IMG_4021",
            "IMG_20230812_141503",
            "photo",
            "DSC01234",
            "Urlaubsfoto_Strand",
        ]
        .choose(rng),
        BinKind::Png => [
            "screenshot",
            "Screenshot 2023-11-28 at 14.02.11",
            "diagram",
            "chart",
            "Bildschirmfoto",
        ]
        .choose(rng),
        BinKind::Docx => ["Präsentation_Entwurf", "minutes", "proposal-v3", "CV"].choose(rng),
        BinKind::Xlsx => ["budget-2024", "Übersicht_Kosten", "timesheet", "export"].choose(rng),
        BinKind::Zip => ["logs", "archive", "photos", "build-artifacts"].choose(rng),
    };
    format!("{}.{}", stem.copied().unwrap_or("file"), kind.extension())
}

/// A unified diff of about `budget` bytes, as sent to development lists.
pub(crate) fn patch_text<R: Rng + ?Sized>(rng: &mut R, budget: usize) -> String {
    let file = [
        "src/lib.rs",
        "src/index/mod.rs",
        "imap/fetch.c",
        "Makefile",
        "docs/config.md",
    ]
    .choose(rng)
    .copied()
    .unwrap_or("src/lib.rs");
    let mut out = format!(
        "---\n {file} | {} ++++++++----\n 1 file changed, {} insertions(+), {} deletions(-)\n\ndiff --git a/{file} b/{file}\nindex {}..{} 100644\n--- a/{file}\n+++ b/{file}\n",
        rng.gen_range(5..80),
        rng.gen_range(3..60),
        rng.gen_range(1..30),
        hex(rng, 12),
        hex(rng, 12)
    );
    let idents = [
        "index", "mailbox", "uid", "flags", "entry", "offset", "len", "buf", "ctx", "msg", "ret",
        "err",
    ];
    while out.len() < budget {
        let line = rng.gen_range(10..2000);
        out.push_str(&format!(
            "@@ -{line},{} +{line},{} @@ fn {}_{}(\n",
            rng.gen_range(5..20),
            rng.gen_range(5..20),
            idents[rng.gen_range(0..idents.len())],
            idents[rng.gen_range(0..idents.len())]
        ));
        for _ in 0..rng.gen_range(4..16) {
            let mark = [" ", " ", " ", "+", "-"][rng.gen_range(0..5)];
            let a = idents[rng.gen_range(0..idents.len())];
            let b = idents[rng.gen_range(0..idents.len())];
            let stmt = match rng.gen_range(0..5) {
                0 => format!("let {a} = {b}.get({})?;", rng.gen_range(0..64)),
                1 => format!(
                    "if {a}.is_empty() {{ return Err(Error::{}); }}",
                    ["NotFound", "Corrupt", "Io"][rng.gen_range(0..3)]
                ),
                2 => format!("{a}.{b}({a}_{b}, {});", rng.gen_range(0..4096)),
                3 => "}".to_owned(),
                _ => format!(
                    "// {} the {a} before {b}",
                    ["check", "flush", "lock", "sort"][rng.gen_range(0..4)]
                ),
            };
            out.push_str(&format!(
                "{mark}\t{}{stmt}\n",
                "    ".repeat(rng.gen_range(0..3))
            ));
        }
    }
    out.push_str("-- \n2.43.0\n");
    out
}

/// An iCalendar invitation (RFC 5545) for text/calendar; method=REQUEST parts (RFC 6047).
pub(crate) fn calendar_text<R: Rng + ?Sized>(
    rng: &mut R,
    organizer: &str,
    attendee: &str,
    summary: &str,
    ts: i64,
) -> String {
    let ical = |t: i64| {
        let s = crate::date::compact_utc(t);
        format!("{}T{}Z", &s[..8], &s[8..])
    };
    let start = (ts + rng.gen_range(1..20) * 86_400) / 1800 * 1800;
    let summary: String = summary.chars().take(40).collect();
    format!(
        "BEGIN:VCALENDAR\nMETHOD:REQUEST\nPRODID:Microsoft Exchange Server 2010\nVERSION:2.0\nBEGIN:VEVENT\nORGANIZER;CN=Organizer:mailto:{organizer}\nATTENDEE;ROLE=REQ-PARTICIPANT;PARTSTAT=NEEDS-ACTION;RSVP=TRUE:mailto:\n {attendee}\nDESCRIPTION;LANGUAGE=en-US:{summary}\nUID:{}\nSUMMARY;LANGUAGE=en-US:{summary}\nDTSTART:{}\nDTEND:{}\nCLASS:PUBLIC\nPRIORITY:5\nDTSTAMP:{}\nTRANSP:OPAQUE\nSTATUS:CONFIRMED\nSEQUENCE:0\nLOCATION;LANGUAGE=en-US:Room {}\nBEGIN:VALARM\nDESCRIPTION:REMINDER\nTRIGGER;RELATED=START:-PT15M\nACTION:DISPLAY\nEND:VALARM\nEND:VEVENT\nEND:VCALENDAR\n",
        hex(rng, 64).to_uppercase(),
        ical(start),
        ical(start + 3600),
        ical(ts),
        rng.gen_range(100..600)
    )
}
