//! What a message says, and how it is rendered as plain text and as HTML: greeting,
//! paragraphs, closing, signature (the "-- " separator of RFC 3676 §4.3), quoted replies
//! ("> " prefixes, top- or bottom-posted) and list footers.

use rand::Rng;

use crate::words::{paragraphs, wrap_flowed_into, wrap_into, Lang};

/// Quoted material of a reply or forward.
#[derive(Clone, Debug)]
pub(crate) struct Quote {
    /// "On ..., X wrote:" (bottom posting) or an Outlook-style header block (top posting).
    pub attribution: String,
    /// The previous message's plain-text lines (already containing older "> " levels).
    pub lines: Vec<String>,
    /// Reply above the quote (Outlook, webmail) rather than below it (mutt, Thunderbird).
    pub top_posted: bool,
    /// Prefix the quoted lines with "> " (all but Outlook, which indents nothing).
    pub prefixed: bool,
}

/// The text of one message, independent of its MIME rendering.
#[derive(Clone, Debug, Default)]
pub(crate) struct Content {
    pub greeting: Option<String>,
    pub paragraphs: Vec<String>,
    pub closing: Option<String>,
    pub signature: Option<String>,
    pub quote: Option<Quote>,
    pub footer: Option<String>,
    /// Wrap at 72 columns (true) or leave one line per paragraph (webmail, Outlook).
    pub wrapped: bool,
    /// Mark soft line breaks with a trailing space (format=flowed, RFC 3676 §4.2).
    pub flowed: bool,
}

impl Content {
    /// Generates text for about `budget` bytes of rendered plain text, counting the quote.
    pub(crate) fn generate<R: Rng + ?Sized>(
        rng: &mut R,
        lang: Lang,
        budget: usize,
        greeting: Option<String>,
        closing: Option<String>,
        mut quote: Option<Quote>,
        wrapped: bool,
    ) -> Content {
        // Quoted history takes at most ~70% of the budget: clients quote the whole previous
        // message, but the size distribution is what benchmarks depend on.
        if let Some(q) = quote.as_mut() {
            let mut room = budget * 7 / 10;
            let keep = q.lines.iter().take_while(|l| {
                let fits = l.len() + 3 <= room;
                room = room.saturating_sub(l.len() + 3);
                fits
            });
            let n = keep.count().max(3).min(q.lines.len());
            q.lines.truncate(n);
        }
        let fixed = greeting.as_ref().map_or(0, String::len)
            + closing.as_ref().map_or(0, String::len)
            + quote.as_ref().map_or(0, |q| {
                q.attribution.len() + q.lines.iter().map(|l| l.len() + 3).sum::<usize>()
            });
        let own = budget
            .saturating_sub(fixed)
            .max(if quote.is_some() { 60 } else { 120 });
        Content {
            greeting,
            paragraphs: paragraphs(rng, lang, own),
            closing,
            signature: None,
            quote,
            footer: None,
            wrapped,
            flowed: false,
        }
    }

    fn own_text(&self, out: &mut String) {
        if let Some(g) = &self.greeting {
            out.push_str(g);
            out.push_str("\n\n");
        }
        for p in &self.paragraphs {
            if self.wrapped {
                wrap_flowed_into(p, 72, "", self.flowed, out);
            } else {
                out.push_str(p);
                out.push('\n');
            }
            out.push('\n');
        }
        if let Some(c) = &self.closing {
            out.push_str(c);
            out.push('\n');
        }
        if let Some(s) = &self.signature {
            // RFC 3676 §4.3: the signature separator is "-- " on its own line.
            out.push_str("\n-- \n");
            out.push_str(s);
            out.push('\n');
        }
    }

    fn quote_text(q: &Quote, out: &mut String) {
        out.push_str(&q.attribution);
        out.push('\n');
        for l in &q.lines {
            if !q.prefixed {
                out.push_str(l);
            } else if l.starts_with('>') {
                out.push('>');
                out.push_str(l);
            } else if l.is_empty() {
                out.push('>');
            } else {
                out.push_str("> ");
                out.push_str(l);
            }
            out.push('\n');
        }
    }

    /// The plain-text rendering, LF line endings, ending in LF.
    pub(crate) fn plain(&self) -> String {
        let mut out = String::with_capacity(4096);
        match &self.quote {
            Some(q) if !q.top_posted => {
                Self::quote_text(q, &mut out);
                out.push('\n');
                self.own_text(&mut out);
            }
            Some(q) => {
                self.own_text(&mut out);
                out.push('\n');
                Self::quote_text(q, &mut out);
            }
            None => self.own_text(&mut out),
        }
        if let Some(f) = &self.footer {
            out.push_str(f);
        }
        out
    }

    /// The HTML rendering. `heavy` adds the inline CSS that newsletters and Outlook carry,
    /// which is what makes real HTML parts several times larger than their text.
    pub(crate) fn html(&self, heavy: bool) -> String {
        let mut out = String::with_capacity(8192);
        out.push_str("<html>\n<head>\n<meta http-equiv=\"Content-Type\" content=\"text/html; charset=utf-8\">\n");
        if heavy {
            out.push_str(OUTLOOK_STYLE);
        }
        out.push_str("</head>\n<body>\n<div dir=\"ltr\">");
        let p_open = if heavy {
            "<p class=\"MsoNormal\" style=\"margin:0cm;font-size:11pt;font-family:Calibri,sans-serif;color:#1f1f1f;line-height:1.4\"><span lang=\"EN-US\" style=\"mso-ligatures:none\">"
        } else {
            "<div>"
        };
        let p_close = if heavy {
            "</span></p>\n<p class=\"MsoNormal\">&nbsp;</p>\n"
        } else {
            "</div>\n<div><br></div>\n"
        };
        if let Some(g) = &self.greeting {
            out.push_str(p_open);
            escape_into(g, &mut out);
            out.push_str(p_close);
        }
        for p in &self.paragraphs {
            out.push_str(p_open);
            escape_into(p, &mut out);
            out.push_str(p_close);
        }
        if let Some(c) = &self.closing {
            out.push_str(p_open);
            escape_into(c, &mut out);
            out.push_str(p_close);
        }
        if let Some(s) = &self.signature {
            out.push_str("<div>-- <br>");
            for l in s.lines() {
                escape_into(l, &mut out);
                out.push_str("<br>");
            }
            out.push_str("</div>\n");
        }
        if let Some(q) = &self.quote {
            out.push_str("<div class=\"gmail_quote\"><div dir=\"ltr\" class=\"gmail_attr\">");
            escape_into(&q.attribution, &mut out);
            out.push_str("<br></div>\n<blockquote class=\"gmail_quote\" style=\"margin:0px 0px 0px 0.8ex;border-left:1px solid rgb(204,204,204);padding-left:1ex\">\n");
            for l in &q.lines {
                escape_into(l.trim_start_matches(['>', ' ']), &mut out);
                out.push_str("<br>\n");
            }
            out.push_str("</blockquote></div>\n");
        }
        out.push_str("</div>\n</body>\n</html>\n");
        out
    }
}

const OUTLOOK_STYLE: &str =
    "<meta name=\"Generator\" content=\"Microsoft Word 15 (filtered medium)\">
<style><!--
/* Font Definitions */
@font-face
\t{font-family:\"Cambria Math\";
\tpanose-1:2 4 5 3 5 4 6 3 2 4;}
@font-face
\t{font-family:Calibri;
\tpanose-1:2 15 5 2 2 2 4 3 2 4;}
@font-face
\t{font-family:Aptos;}
/* Style Definitions */
p.MsoNormal, li.MsoNormal, div.MsoNormal
\t{margin:0cm;
\tfont-size:11.0pt;
\tfont-family:\"Calibri\",sans-serif;
\tmso-ligatures:standardcontextual;
\tmso-fareast-language:EN-US;}
a:link, span.MsoHyperlink
\t{mso-style-priority:99;
\tcolor:#0563C1;
\ttext-decoration:underline;}
span.EmailStyle17
\t{mso-style-type:personal-compose;
\tfont-family:\"Calibri\",sans-serif;
\tcolor:windowtext;}
.MsoChpDefault
\t{mso-style-type:export-only;
\tfont-size:10.0pt;
\tmso-ligatures:none;
\tmso-fareast-language:EN-US;}
@page WordSection1
\t{size:612.0pt 792.0pt;
\tmargin:70.85pt 70.85pt 2.0cm 70.85pt;}
div.WordSection1
\t{page:WordSection1;}
--></style><!--[if gte mso 9]><xml>
<o:shapedefaults v:ext=\"edit\" spidmax=\"1026\" />
</xml><![endif]--><!--[if gte mso 9]><xml>
<o:shapelayout v:ext=\"edit\">
<o:idmap v:ext=\"edit\" data=\"1\" />
</o:shapelayout></xml><![endif]-->
";

/// Appends `s` with HTML special characters escaped.
pub(crate) fn escape_into(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\n' => out.push_str("<br>\n"),
            _ => out.push(c),
        }
    }
}

/// A newsletter HTML body of about `budget` bytes: table layout, inline CSS, tracking
/// images and an unsubscribe footer, as bulk senders produce.
pub(crate) fn newsletter_html<R: Rng + ?Sized>(
    rng: &mut R,
    lang: Lang,
    budget: usize,
    brand: &str,
) -> String {
    let mut out = String::with_capacity(budget + 2048);
    out.push_str("<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Transitional//EN\" \"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd\">\n<html xmlns=\"http://www.w3.org/1999/xhtml\">\n<head>\n<meta http-equiv=\"Content-Type\" content=\"text/html; charset=UTF-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1.0\">\n<title>");
    escape_into(brand, &mut out);
    out.push_str("</title>\n<style type=\"text/css\">\nbody{margin:0;padding:0;}table,td{border-collapse:collapse;mso-table-lspace:0pt;mso-table-rspace:0pt;}img{border:0;height:auto;line-height:100%;outline:none;text-decoration:none;}\n@media only screen and (max-width:480px){.mcnTextContent{font-size:16px !important;line-height:150% !important;}}\n</style>\n</head>\n<body style=\"margin:0;padding:0;background-color:#f4f4f4;\">\n<center><table align=\"center\" border=\"0\" cellpadding=\"0\" cellspacing=\"0\" width=\"100%\" style=\"max-width:600px;\">\n");
    let mut n = 0u32;
    while out.len() + 700 < budget || n == 0 {
        n += 1;
        out.push_str("<tr><td valign=\"top\" class=\"mcnTextContent\" style=\"padding:9px 18px;color:#202020;font-family:Helvetica,Arial,sans-serif;font-size:16px;line-height:150%;text-align:left;\">\n<h2 style=\"display:block;margin:0;padding:0;color:#202020;font-size:22px;font-weight:bold;\">");
        escape_into(&crate::words::subject(rng, lang), &mut out);
        out.push_str("</h2>\n");
        for p in paragraphs(rng, lang, 300) {
            out.push_str("<p style=\"margin:10px 0;padding:0;\">");
            escape_into(&p, &mut out);
            out.push_str("</p>\n");
        }
        out.push_str(&format!(
            "<a href=\"https://{brand}/c/{}?utm_source=newsletter&amp;utm_medium=email&amp;utm_campaign=w{}\" style=\"color:#007c89;font-weight:normal;text-decoration:underline;\" target=\"_blank\">Read more</a>\n</td></tr>\n",
            crate::header::hex(rng, 24),
            rng.gen_range(1..53)
        ));
    }
    out.push_str(&format!(
        "<tr><td style=\"padding:18px;color:#656565;font-size:12px;\">You are receiving this email because you signed up at {brand}.<br>\n<a href=\"https://{brand}/unsubscribe?u={}\">Unsubscribe</a> | <a href=\"https://{brand}/profile\">Update preferences</a></td></tr>\n</table></center>\n<img src=\"https://{brand}/open/{}.gif\" width=\"1\" height=\"1\" alt=\"\">\n</body>\n</html>\n",
        crate::header::hex(rng, 32),
        crate::header::hex(rng, 40)
    ));
    out
}

/// The plain-text alternative of a newsletter: a short summary with links.
pub(crate) fn newsletter_text<R: Rng + ?Sized>(
    rng: &mut R,
    lang: Lang,
    budget: usize,
    brand: &str,
) -> String {
    let mut out = String::new();
    for p in paragraphs(rng, lang, budget) {
        wrap_into(&p, 72, "", &mut out);
        out.push_str(&format!(
            "\nRead more: https://{brand}/c/{}\n\n",
            crate::header::hex(rng, 24)
        ));
    }
    out.push_str(&format!(
        "Unsubscribe: https://{brand}/unsubscribe?u={}\n",
        crate::header::hex(rng, 32)
    ));
    out
}
