//! Body shapes: which MIME structure a message gets for its kind, sender software and size
//! budget, and how the budget is shared between text, HTML and attachments.
//!
//! Shapes produced: text/plain (7bit, 8bit, quoted-printable, base64; some format=flowed),
//! multipart/alternative (text + HTML, + text/calendar for invitations),
//! multipart/mixed with base64 attachments, multipart/related with inline images
//! (RFC 2387), forwarded message/rfc822, multipart/signed (PGP/MIME and S/MIME), list
//! patches as inline text/x-patch, and Mailman footers.

use rand::Rng;

use crate::body::{calendar_text, filename, patch_text, Mime, Part};
use crate::header::{hex, Mailer};
use crate::lists::{footer, ListDef};
use crate::message::Kind;
use crate::payload::BinKind;
use crate::render::{newsletter_html, newsletter_text, Content, Quote};
use crate::words::{Lang, Person};

/// Everything the body builder needs to know about the message.
pub(crate) struct Shape<'a> {
    pub kind: Kind,
    pub mailer: Mailer,
    pub lang: Lang,
    /// Bytes left for the body (content headers included) after the header block.
    pub budget: usize,
    pub list: Option<&'a ListDef>,
    pub from: &'a Person,
    /// The first recipient (greetings address them).
    pub to: &'a Person,
    pub owner: &'a Person,
    pub sent: i64,
    pub subject: &'a str,
}

/// How the text of a message is rendered.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    Plain,
    Alternative { heavy: bool },
}

/// HTML size relative to the text it renders, measured on generated samples.
fn html_factor(heavy: bool) -> f64 {
    if heavy {
        1.75
    } else {
        1.2
    }
}

fn first_name(p: &Person) -> &str {
    p.name
        .split([' ', ','])
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or("there")
}

fn greeting<R: Rng + ?Sized>(rng: &mut R, lang: Lang, to: &Person) -> Option<String> {
    if rng.gen_ratio(1, 6) {
        return None;
    }
    let n = first_name(to);
    Some(match lang {
        Lang::En => ["Hi {},", "Hello {},", "Dear {},", "Hey {}!", "{},"][rng.gen_range(0..5)]
            .replace("{}", n),
        Lang::De => format!("Hallo {n},"),
        Lang::Fr => format!("Bonjour {n},"),
        Lang::Es => format!("Hola {n}:"),
        Lang::Ru => format!("Привет, {n}!"),
        Lang::Ja => format!("{n}さん"),
    })
}

fn closing<R: Rng + ?Sized>(rng: &mut R, lang: Lang, from: &Person) -> Option<String> {
    if rng.gen_ratio(1, 5) {
        return None;
    }
    let n = first_name(from);
    Some(match lang {
        Lang::En => format!(
            "{}\n{n}",
            [
                "Best regards,",
                "Thanks,",
                "Cheers,",
                "Best,",
                "Kind regards,"
            ][rng.gen_range(0..5)]
        ),
        Lang::De => format!("Viele Grüße\n{n}"),
        Lang::Fr => format!("Cordialement,\n{n}"),
        Lang::Es => format!("Saludos,\n{n}"),
        Lang::Ru => format!("С уважением,\n{n}"),
        Lang::Ja => "よろしくお願いいたします。".to_owned(),
    })
}

fn style_for<R: Rng + ?Sized>(rng: &mut R, mailer: Mailer) -> Style {
    match mailer {
        Mailer::Webmail | Mailer::Bot => Style::Alternative { heavy: false },
        Mailer::Outlook | Mailer::Esp | Mailer::Spammer => Style::Alternative { heavy: true },
        Mailer::Thunderbird if rng.gen_bool(0.6) => Style::Plain,
        Mailer::AppleMail if rng.gen_bool(0.3) => Style::Plain,
        Mailer::Thunderbird | Mailer::AppleMail => Style::Alternative { heavy: false },
        Mailer::Mutt => Style::Plain,
    }
}

/// Per-part MIME overhead (boundary line, content headers) used when sharing budgets.
const PART_OVERHEAD: usize = 160;

struct TextCtx<'a> {
    s: &'a Shape<'a>,
    quote: Option<Quote>,
    signature: Option<String>,
    footer: Option<String>,
}

/// Generates content for about `budget` bytes and renders it in `style`. Returns the part
/// and the plain rendering (kept to be quoted by later replies).
fn text_part<R: Rng + ?Sized>(
    rng: &mut R,
    mime: &mut Mime,
    cx: &mut TextCtx,
    budget: usize,
    style: Style,
) -> (Part, String, Content) {
    let s = cx.s;
    let to = s.to;
    let wrapped = matches!(
        s.mailer,
        Mailer::Thunderbird | Mailer::Mutt | Mailer::AppleMail
    );
    let plain_budget = match style {
        Style::Plain => budget.saturating_sub(PART_OVERHEAD),
        Style::Alternative { heavy } => {
            let fixed = if heavy { 2_000 } else { 350 } + 2 * PART_OVERHEAD;
            (budget.saturating_sub(fixed) as f64 / (1.0 + html_factor(heavy))) as usize
        }
    };
    let greet = if matches!(s.kind, Kind::List(_)) {
        None
    } else {
        greeting(rng, s.lang, to)
    };
    let close = closing(rng, s.lang, s.from);
    let mut content = Content::generate(
        rng,
        s.lang,
        plain_budget,
        greet,
        close,
        cx.quote.take(),
        wrapped,
    );
    content.flowed = s.mailer == Mailer::Thunderbird && style == Style::Plain;
    content.signature = cx.signature.take();
    content.footer = cx.footer.take();
    let plain = content.plain();
    let part = match style {
        Style::Plain => mime.text(rng, "plain", &plain, s.lang, content.flowed),
        Style::Alternative { heavy } => {
            let text = mime.text(rng, "plain", &plain, s.lang, false);
            let html = mime.text(rng, "html", &content.html(heavy), s.lang, false);
            mime.multipart(rng, "alternative", "", vec![text, html])
        }
    };
    (part, plain, content)
}

/// Shares `total` bytes among `n` parts with random weights (each at least `min`).
fn split<R: Rng + ?Sized>(rng: &mut R, total: usize, n: usize, min: usize) -> Vec<usize> {
    let w: Vec<f64> = (0..n).map(|_| rng.gen_range(0.2..1.0)).collect();
    let sum: f64 = w.iter().sum();
    w.iter()
        .map(|x| ((total as f64 * x / sum) as usize).max(min))
        .collect()
}

/// Raw bytes whose base64 (76-char lines + LF) fills about `encoded` bytes.
fn raw_for_encoded(encoded: usize) -> usize {
    encoded.saturating_sub(PART_OVERHEAD) * 57 / 77
}

fn attachments<R: Rng + ?Sized>(
    rng: &mut R,
    mime: &mut Mime,
    budget: usize,
    images_only: bool,
) -> Vec<Part> {
    let n = match rng.gen_range(0..100) {
        0..=69 => 1,
        70..=89 => 2,
        _ => rng.gen_range(3..=5),
    };
    split(rng, budget, n, 400)
        .into_iter()
        .map(|share| {
            let kind = if images_only {
                [BinKind::Jpeg, BinKind::Png][rng.gen_range(0..2)]
            } else {
                BinKind::pick(rng)
            };
            let name = filename(rng, kind);
            mime.binary(rng, kind, raw_for_encoded(share), &name, None)
        })
        .collect()
}

/// Inline images for multipart/related, with the `<img>` tags that reference them.
fn inline_images<R: Rng + ?Sized>(
    rng: &mut R,
    mime: &mut Mime,
    budget: usize,
) -> (Vec<Part>, String) {
    let n = rng.gen_range(1..=3);
    let mut tags = String::new();
    let parts = split(rng, budget, n, 300)
        .into_iter()
        .enumerate()
        .map(|(i, share)| {
            let kind = if rng.gen_bool(0.5) {
                BinKind::Png
            } else {
                BinKind::Jpeg
            };
            let cid = match mime.mailer {
                Mailer::Outlook => format!(
                    "image{:03}.{}@01DA{}.{}",
                    i + 1,
                    kind.extension(),
                    hex(rng, 4).to_uppercase(),
                    hex(rng, 8).to_uppercase()
                ),
                Mailer::Webmail => format!("ii_{}{}", hex(rng, 8), i),
                _ => format!("{}@example.com", crate::header::uuid(rng).to_uppercase()),
            };
            tags.push_str(&format!(
                "<img src=\"cid:{cid}\" width=\"{}\" height=\"{}\" alt=\"image{}\">\n",
                rng.gen_range(80..640),
                rng.gen_range(40..480),
                i + 1
            ));
            let name = format!("image{:03}.{}", i + 1, kind.extension());
            mime.binary(rng, kind, raw_for_encoded(share), &name, Some(&cid))
        })
        .collect();
    (parts, tags)
}

/// Builds the body of a message. Returns the top-level entity and its plain text.
pub(crate) fn shape_body<R: Rng + ?Sized>(
    rng: &mut R,
    s: &Shape,
    quote: Option<Quote>,
    inner: Option<Vec<u8>>,
    signature: &str,
) -> (Part, String) {
    let mut mime = Mime::new(rng, s.mailer);
    let sig = if !signature.is_empty() {
        Some(signature.to_owned())
    } else if rng.gen_bool(0.4) && matches!(s.kind, Kind::Personal | Kind::List(_)) {
        Some(format!(
            "{}\n{}",
            s.from.name,
            [
                "Senior Engineer | Example Corp",
                "https://blog.example.net",
                "Sent from my phone",
                "PGP: 0x1234ABCD5678EF90"
            ][rng.gen_range(0..4)]
        ))
    } else {
        None
    };
    let mut cx = TextCtx {
        s,
        quote,
        signature: sig,
        footer: None,
    };
    let b = s.budget;
    match s.kind {
        Kind::Newsletter => newsletter(rng, &mut mime, s),
        Kind::Spam => spam(rng, &mut mime, &mut cx),
        Kind::Invite => invite(rng, &mut mime, &mut cx),
        Kind::Notification => {
            let (p, plain, _) = text_part(
                rng,
                &mut mime,
                &mut cx,
                b,
                Style::Alternative { heavy: false },
            );
            (p, plain)
        }
        Kind::List(_) => list_mail(rng, &mut mime, &mut cx),
        Kind::Personal | Kind::Sent | Kind::Draft => personal(rng, &mut mime, &mut cx, inner),
    }
}

fn personal<R: Rng + ?Sized>(
    rng: &mut R,
    mime: &mut Mime,
    cx: &mut TextCtx,
    inner: Option<Vec<u8>>,
) -> (Part, String) {
    let s = cx.s;
    let b = s.budget;
    let style = style_for(rng, s.mailer);
    if let Some(inner) = inner {
        // Forward as attachment: a short note plus the original as message/rfc822.
        cx.quote = None;
        let note = rng.gen_range(150..1200).min(b / 3 + 150);
        let (text, plain, _) = text_part(rng, mime, cx, note, style);
        let name: String = s
            .subject
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == ' ')
            .take(40)
            .collect();
        let msg = mime.rfc822(inner, name.trim());
        return (mime.multipart(rng, "mixed", "", vec![text, msg]), plain);
    }
    let attach = b > 60_000 || (b > 20_000 && rng.gen_bool(0.5)) || rng.gen_bool(0.06);
    if attach {
        let text_b = (b / 6).min(rng.gen_range(400..6_000));
        let (text, plain, _) = text_part(rng, mime, cx, text_b, style);
        let rest = b.saturating_sub(text.len() + PART_OVERHEAD);
        let mut parts = vec![text];
        parts.extend(attachments(rng, mime, rest, false));
        return (mime.multipart(rng, "mixed", "", parts), plain);
    }
    let signed = match s.mailer {
        Mailer::Mutt => rng.gen_bool(0.3),
        Mailer::Thunderbird => rng.gen_bool(0.05),
        Mailer::Outlook => rng.gen_bool(0.05),
        _ => false,
    };
    if signed {
        let smime = s.mailer == Mailer::Outlook;
        let sig_len = if smime { 5_100 } else { 1_000 };
        let inner_style = if smime { style } else { Style::Plain };
        // RFC 3156 §3 / RFC 1847 §2.1: signed content must be 7bit-safe.
        mime.seven_bit = true;
        let (text, plain, _) = text_part(rng, mime, cx, b.saturating_sub(sig_len), inner_style);
        mime.seven_bit = false;
        let sig = mime.signature(smime);
        let params = if smime {
            " protocol=\"application/pkcs7-signature\";\n\tmicalg=sha-256;"
        } else {
            " micalg=pgp-sha256;\n\tprotocol=\"application/pgp-signature\";"
        };
        return (
            mime.multipart(rng, "signed", params, vec![text, sig]),
            plain,
        );
    }
    let related = b > 12_000
        && matches!(
            s.mailer,
            Mailer::Outlook | Mailer::AppleMail | Mailer::Webmail
        )
        && rng.gen_bool(0.15);
    if related {
        return related_mail(
            rng,
            mime,
            cx,
            b,
            style == Style::Alternative { heavy: true },
        );
    }
    let (p, plain, _) = text_part(rng, mime, cx, b, style);
    (p, plain)
}

/// HTML with inline images: Outlook nests alternative inside related (RFC 2387 `type=`),
/// Apple Mail and webmail put related inside alternative.
fn related_mail<R: Rng + ?Sized>(
    rng: &mut R,
    mime: &mut Mime,
    cx: &mut TextCtx,
    b: usize,
    heavy: bool,
) -> (Part, String) {
    let s = cx.s;
    let text_b = (b / 3).min(rng.gen_range(1_500..12_000));
    let fixed = if heavy { 2_000 } else { 350 };
    let plain_b = (text_b.saturating_sub(fixed) as f64 / (1.0 + html_factor(heavy))) as usize;
    let content = {
        let greet = greeting(rng, s.lang, s.to);
        let close = closing(rng, s.lang, s.from);
        Content::generate(rng, s.lang, plain_b, greet, close, cx.quote.take(), false)
    };
    let plain = content.plain();
    let (images, tags) = inline_images(rng, mime, b.saturating_sub(text_b + 3 * PART_OVERHEAD));
    let html_src = content
        .html(heavy)
        .replacen("</body>", &format!("{tags}</body>"), 1);
    let text = mime.text(rng, "plain", &plain, s.lang, false);
    let html = mime.text(rng, "html", &html_src, s.lang, false);
    let part = if s.mailer == Mailer::Outlook {
        let alt = mime.multipart(rng, "alternative", "", vec![text, html]);
        let mut parts = vec![alt];
        parts.extend(images);
        mime.multipart(rng, "related", " type=\"multipart/alternative\";", parts)
    } else {
        let mut parts = vec![html];
        parts.extend(images);
        let rel = mime.multipart(rng, "related", " type=\"text/html\";", parts);
        mime.multipart(rng, "alternative", "", vec![text, rel])
    };
    (part, plain)
}

fn list_mail<R: Rng + ?Sized>(rng: &mut R, mime: &mut Mime, cx: &mut TextCtx) -> (Part, String) {
    let s = cx.s;
    let Some(l) = s.list else {
        let (p, plain, _) = text_part(rng, mime, cx, s.budget, Style::Plain);
        return (p, plain);
    };
    let b = s.budget;
    let style = match s.mailer {
        Mailer::Webmail | Mailer::AppleMail => Style::Alternative { heavy: false },
        _ => Style::Plain,
    };
    let patch = l.dev && (b > 25_000 || rng.gen_bool(0.15));
    let big = b > 150_000;
    let single = style == Style::Plain && !patch && !big;
    if l.mailman2 && single {
        cx.footer = Some(footer(l));
    }
    let (part, plain) = if patch || big {
        let text_b = (b / 5).min(rng.gen_range(300..3_000));
        let (text, plain, _) = text_part(rng, mime, cx, text_b, style);
        let rest = b.saturating_sub(text.len() + PART_OVERHEAD);
        let extra = if patch && rest < 400_000 {
            mime.text_attachment(
                "text/x-patch",
                &format!(
                    "0001-{}.patch",
                    ["fix-index-rebuild", "add-option", "speed-up-sync"][rng.gen_range(0..3)]
                ),
                patch_text(rng, rest),
                true,
            )
        } else {
            let kind = [BinKind::Png, BinKind::Zip][rng.gen_range(0..2)];
            let name = filename(rng, kind);
            mime.binary(rng, kind, raw_for_encoded(rest), &name, None)
        };
        (mime.multipart(rng, "mixed", "", vec![text, extra]), plain)
    } else {
        let (p, plain, _) = text_part(rng, mime, cx, b, style);
        (p, plain)
    };
    if l.mailman2 && !single {
        // Mailman 2 adds its footer as a separate part when it cannot append to the text.
        let f = mime.text_attachment("text/plain", "footer.txt", footer(l), true);
        let f = Part {
            headers: f.headers.replace("; name=\"footer.txt\"", "").replace(
                "Content-Disposition: inline; filename=\"footer.txt\"\n",
                "Content-Disposition: inline\n",
            ),
            body: f.body,
        };
        return (mime.multipart(rng, "mixed", "", vec![part, f]), plain);
    }
    (part, plain)
}

fn newsletter<R: Rng + ?Sized>(rng: &mut R, mime: &mut Mime, s: &Shape) -> (Part, String) {
    let b = s.budget;
    let brand = s
        .from
        .addr
        .rsplit('@')
        .next()
        .unwrap_or("shop.example")
        .to_owned();
    let with_images = b > 40_000 && rng.gen_bool(0.6);
    let text_b = if with_images {
        (b / 10).min(8_000)
    } else {
        b / 6
    };
    let plain = newsletter_text(rng, s.lang, text_b, &brand);
    let html_b = if with_images {
        (b / 4).min(60_000)
    } else {
        b.saturating_sub(plain.len() + 3 * PART_OVERHEAD)
    };
    let html_src = newsletter_html(rng, s.lang, html_b * 9 / 10, &brand);
    let text = mime.text(rng, "plain", &plain, s.lang, false);
    if with_images {
        let (images, tags) = inline_images(
            rng,
            mime,
            b.saturating_sub(text.len() + html_b + 4 * PART_OVERHEAD),
        );
        let html = mime.text(
            rng,
            "html",
            &html_src.replacen("</center>", &format!("{tags}</center>"), 1),
            s.lang,
            false,
        );
        let mut parts = vec![html];
        parts.extend(images);
        let rel = mime.multipart(rng, "related", " type=\"text/html\";", parts);
        return (
            mime.multipart(rng, "alternative", "", vec![text, rel]),
            plain,
        );
    }
    let html = mime.text(rng, "html", &html_src, s.lang, false);
    (
        mime.multipart(rng, "alternative", "", vec![text, html]),
        plain,
    )
}

fn spam<R: Rng + ?Sized>(rng: &mut R, mime: &mut Mime, cx: &mut TextCtx) -> (Part, String) {
    let s = cx.s;
    let b = s.budget;
    cx.signature = None;
    if rng.gen_bool(0.2) && b > 8_000 {
        let (text, plain, _) = text_part(
            rng,
            mime,
            cx,
            1_500.min(b / 3),
            Style::Alternative { heavy: true },
        );
        let rest = b.saturating_sub(text.len() + PART_OVERHEAD);
        let name = ["Invoice_0932.zip", "DHL_Delivery.zip", "Rechnung.zip"][rng.gen_range(0..3)];
        let zip = mime.binary(rng, BinKind::Zip, raw_for_encoded(rest), name, None);
        return (mime.multipart(rng, "mixed", "", vec![text, zip]), plain);
    }
    let content = Content::generate(rng, s.lang, b / 3, None, None, None, false);
    if rng.gen_bool(0.5) {
        // HTML only, as much spam is.
        let html = content.html(true);
        (
            mime.text(rng, "html", &html, s.lang, false),
            content.plain(),
        )
    } else {
        let plain = content.plain();
        let text = mime.text(rng, "plain", &plain, s.lang, false);
        let html = mime.text(rng, "html", &content.html(true), s.lang, false);
        (
            mime.multipart(rng, "alternative", "", vec![text, html]),
            plain,
        )
    }
}

fn invite<R: Rng + ?Sized>(rng: &mut R, mime: &mut Mime, cx: &mut TextCtx) -> (Part, String) {
    let s = cx.s;
    let ical = calendar_text(rng, &s.from.addr, &s.owner.addr, s.subject, s.sent);
    let b = s.budget.saturating_sub(ical.len() * 2 + 3 * PART_OVERHEAD);
    let plain_b = (b.saturating_sub(2_000) as f64 / (1.0 + html_factor(true))) as usize;
    let mut content = {
        let greet = greeting(rng, s.lang, s.to);
        let close = closing(rng, s.lang, s.from);
        Content::generate(rng, s.lang, plain_b, greet, close, cx.quote.take(), false)
    };
    content.signature = cx.signature.take();
    let plain = content.plain();
    let text = mime.text(rng, "plain", &plain, s.lang, false);
    let html = mime.text(rng, "html", &content.html(true), s.lang, false);
    let mut cal_body = Vec::new();
    crate::encode::base64_lines_into(ical.as_bytes(), &mut cal_body);
    let cal = Part { headers: "Content-Type: text/calendar; charset=\"utf-8\"; method=REQUEST\nContent-Transfer-Encoding: base64\n".to_owned(), body: cal_body.clone() };
    let alt = mime.multipart(rng, "alternative", "", vec![text, html, cal]);
    if rng.gen_bool(0.3) {
        let ics = Part { headers: "Content-Type: application/ics; name=\"invite.ics\"\nContent-Disposition: attachment; filename=\"invite.ics\"\nContent-Transfer-Encoding: base64\n".to_owned(), body: cal_body };
        return (mime.multipart(rng, "mixed", "", vec![alt, ics]), plain);
    }
    (alt, plain)
}
