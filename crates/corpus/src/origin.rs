//! Origin header fields (RFC 5322 §3.6): what the sender's software writes, in that
//! software's field order, with its own extras (Outlook's Thread-Index and X-MS-* fields,
//! Thunderbird's Content-Language, bulk senders' List-Unsubscribe and Feedback-ID).

use rand::Rng;

use crate::date::{rfc5322, Zone};
use crate::header::{mailbox, split_reply_prefix, unstructured, HeaderBlock, Mailer};
use crate::lists::ListDef;
use crate::message::{Draft, Kind, State};
use crate::words::Lang;

/// Builds the origin header block of `d` (without Content-* fields, which come with the
/// body).
pub(crate) fn origin_headers<R: Rng + ?Sized>(
    rng: &mut R,
    st: &State,
    d: &Draft,
    list: Option<&ListDef>,
) -> HeaderBlock {
    let mut fields: Vec<(&'static str, String)> = Vec::new();
    let mut one = |name: &'static str, h: HeaderBlock| fields.push((name, h.buf));
    let with_day = !matches!(d.mailer, Mailer::Spammer) || rng.gen_bool(0.5);
    let mut h = HeaderBlock::default();
    h.raw(
        "Date",
        &rfc5322(
            d.sent,
            d.zone,
            with_day,
            d.mailer == Mailer::Mutt && rng.gen_bool(0.3),
        ),
    );
    one("Date", h);
    let mut h = HeaderBlock::default();
    h.raw("From", &mailbox(rng, &d.from));
    one("From", h);
    let mut h = HeaderBlock::default();
    match &d.group_to {
        Some(g) => h.folded("To", g, " "),
        None => {
            let items: Vec<String> =
                d.to.iter()
                    .map(|p| {
                        if p.name.is_empty() {
                            p.addr.clone()
                        } else {
                            mailbox(rng, p)
                        }
                    })
                    .collect();
            h.list("To", &items, ",");
        }
    }
    one("To", h);
    if !d.cc.is_empty() {
        let items: Vec<String> = d.cc.iter().map(|p| mailbox(rng, p)).collect();
        let mut h = HeaderBlock::default();
        h.list(
            if d.mailer == Mailer::Outlook {
                "CC"
            } else {
                "Cc"
            },
            &items,
            ",",
        );
        one("Cc", h);
    }
    let mut h = HeaderBlock::default();
    h.folded("Subject", &unstructured(rng, &d.subject), " ");
    one("Subject", h);
    let mut h = HeaderBlock::default();
    h.raw(
        if d.mailer == Mailer::AppleMail {
            "Message-Id"
        } else {
            "Message-ID"
        },
        &d.message_id,
    );
    one("Message-ID", h);
    if let Some(last) = d.references.last() {
        let mut h = HeaderBlock::default();
        h.raw("In-Reply-To", last);
        one("In-Reply-To", h);
        // Clients trim long chains to the first id plus the latest ones.
        let refs: Vec<String> = if d.references.len() > 12 {
            std::iter::once(d.references[0].clone())
                .chain(d.references[d.references.len() - 11..].iter().cloned())
                .collect()
        } else {
            d.references.clone()
        };
        let mut h = HeaderBlock::default();
        if matches!(d.mailer, Mailer::Thunderbird | Mailer::Webmail) {
            h.raw("References", &refs.join("\n "));
        } else {
            h.list("References", &refs, "");
        }
        one("References", h);
    }
    let mut h = HeaderBlock::default();
    h.raw(
        if d.mailer == Mailer::AppleMail {
            "Mime-Version"
        } else {
            "MIME-Version"
        },
        if d.mailer == Mailer::AppleMail {
            "1.0 (Mac OS X Mail 16.0 \\(3774.600.62\\))"
        } else {
            "1.0"
        },
    );
    one("MIME-Version", h);
    if let Some((name, value)) = d.mailer.agent_header(rng) {
        let mut h = HeaderBlock::default();
        h.raw(name, &value);
        one("X-Mailer", h);
    }
    let mut extra = HeaderBlock::default();
    match d.mailer {
        Mailer::Outlook => {
            extra.folded(
                "Thread-Topic",
                &unstructured(rng, split_reply_prefix(&d.subject).1),
                " ",
            );
            let n = rng.gen_range(26..90);
            extra.raw(
                "Thread-Index",
                &format!(
                    "AQH{}",
                    crate::header::chars(rng, n, crate::header::B64CHARS)
                ),
            );
            extra.raw("Accept-Language", "en-US, de-DE");
            extra.raw(
                "Content-Language",
                if d.lang == Lang::De { "de-DE" } else { "en-US" },
            );
            extra.raw(
                "X-MS-Has-Attach",
                if rng.gen_bool(0.2) { "yes" } else { "" },
            );
            extra.raw("X-MS-TNEF-Correlator", "");
            if d.kind != Kind::Sent && d.kind != Kind::Draft {
                extra.raw("X-MS-Exchange-Organization-SCL", "-1");
                extra.raw("X-MS-PublicTrafficType", "Email");
                extra.raw(
                    "X-MS-TrafficTypeDiagnostic",
                    &format!(
                        "{}:EE_|{}:EE_",
                        crate::header::chars(rng, 14, crate::header::ALNUM),
                        crate::header::chars(rng, 14, crate::header::ALNUM)
                    ),
                );
                extra.raw(
                    "X-MS-Office365-Filtering-Correlation-Id",
                    &crate::header::uuid(rng),
                );
                extra.raw(
                    "X-Microsoft-Antispam",
                    &format!(
                        "BCL:0;ARA:{}|{}|{};",
                        rng.gen_range(10_000_000..99_999_999),
                        rng.gen_range(1_000_000..9_999_999),
                        rng.gen_range(100_000..999_999)
                    ),
                );
                let mut info = String::new();
                let n = rng.gen_range(300..900);
                for (i, c) in crate::header::chars(rng, n, crate::header::B64CHARS)
                    .as_bytes()
                    .chunks(76)
                    .enumerate()
                {
                    if i > 0 {
                        info.push_str("\n ");
                    }
                    info.push_str(&String::from_utf8_lossy(c));
                }
                extra.raw("X-Microsoft-Antispam-Message-Info", &info);
                extra.raw(
                    "X-OriginatorOrg",
                    d.from.addr.rsplit('@').next().unwrap_or("example.com"),
                );
                extra.raw(
                    "X-MS-Exchange-CrossTenant-OriginalArrivalTime",
                    &rfc5322(
                        d.sent,
                        Zone {
                            offset_min: 0,
                            comment: Some("UTC"),
                        },
                        false,
                        true,
                    ),
                );
                extra.raw("X-MS-Exchange-CrossTenant-Id", &crate::header::uuid(rng));
                extra.raw(
                    "X-MS-Exchange-Transport-CrossTenantHeadersStamped",
                    &format!(
                        "{}PR04MB{}",
                        ["AM", "DB", "VI"][rng.gen_range(0..3)],
                        rng.gen_range(1000..9999)
                    ),
                );
            }
        }
        Mailer::Thunderbird => {
            extra.raw(
                "Content-Language",
                if d.lang == Lang::De { "de-DE" } else { "en-US" },
            );
            if d.kind == Kind::Draft {
                extra.raw("X-Mozilla-Draft-Info", "internal/draft; vcard=0; receipt=0; DSN=0; uuencode=0;\n attachmentreminder=0; deliveryformat=1");
                extra.raw("X-Identity-Key", "id1");
            }
        }
        Mailer::Bot => {
            extra.raw(
                "Reply-To",
                &format!(
                    "acme/server <reply+{}@code.example.com>",
                    crate::header::hex(rng, 40).to_uppercase()
                ),
            );
            extra.raw("List-ID", "acme/server <server.acme.code.example.com>");
            extra.raw("List-Archive", "https://code.example.com/acme/server");
            extra.raw("List-Unsubscribe", &format!("<mailto:unsub+{}@reply.code.example.com>,\n <https://code.example.com/notifications/unsubscribe/{}>", crate::header::hex(rng, 32), crate::header::hex(rng, 40)));
            extra.raw("X-Auto-Response-Suppress", "All");
            extra.raw("Auto-Submitted", "auto-generated");
            extra.raw("Precedence", "bulk");
            extra.raw(
                "X-Notification-Reason",
                [
                    "mention",
                    "review_requested",
                    "author",
                    "subscribed",
                    "ci_activity",
                ][rng.gen_range(0..5)],
            );
        }
        Mailer::Esp => {
            extra.raw("Reply-To", &d.from.addr);
            extra.raw(
                "List-Unsubscribe",
                &format!(
                    "<mailto:unsubscribe-{}@{}?subject=unsubscribe>,\n <https://{}/unsubscribe/{}>",
                    crate::header::hex(rng, 20),
                    d.from.addr.rsplit('@').next().unwrap_or("example.com"),
                    d.from.addr.rsplit('@').next().unwrap_or("example.com"),
                    crate::header::hex(rng, 48)
                ),
            );
            extra.raw("List-Unsubscribe-Post", "List-Unsubscribe=One-Click");
            extra.raw(
                "Feedback-ID",
                &format!(
                    "{}:{}:campaign:esp",
                    rng.gen_range(10_000..99_999),
                    rng.gen_range(100..999)
                ),
            );
            extra.raw("X-Campaign-ID", &crate::header::hex(rng, 10));
            extra.raw("Precedence", "bulk");
        }
        Mailer::Spammer => {
            extra.raw(
                "Reply-To",
                &format!(
                    "claims{}@{}",
                    rng.gen_range(10..99),
                    ["freemail.example", "mail.test"][rng.gen_range(0..2)]
                ),
            );
            extra.raw("X-Priority", "1 (Highest)");
        }
        _ => {}
    }
    if matches!(d.kind, Kind::Sent | Kind::Draft) && rng.gen_bool(0.04) {
        // Saved copies keep the Bcc the owner used.
        let p = st.contact(rng);
        extra.raw("Bcc", &mailbox(rng, &p));
    }
    fields.push(("Extra", extra.buf));
    // Each mailer writes its fields in its own order.
    let order: &[&str] = match d.mailer {
        Mailer::Webmail => &[
            "MIME-Version",
            "References",
            "In-Reply-To",
            "From",
            "Date",
            "Message-ID",
            "Subject",
            "To",
            "Cc",
            "Extra",
            "X-Mailer",
        ],
        Mailer::Outlook => &[
            "From",
            "To",
            "Cc",
            "Subject",
            "Extra",
            "Date",
            "Message-ID",
            "References",
            "In-Reply-To",
            "X-Mailer",
            "MIME-Version",
        ],
        Mailer::Thunderbird => &[
            "Message-ID",
            "Date",
            "MIME-Version",
            "X-Mailer",
            "Subject",
            "Extra",
            "To",
            "Cc",
            "References",
            "From",
            "In-Reply-To",
        ],
        Mailer::AppleMail => &[
            "From",
            "MIME-Version",
            "Subject",
            "Date",
            "References",
            "To",
            "Cc",
            "In-Reply-To",
            "Message-ID",
            "X-Mailer",
            "Extra",
        ],
        _ => &[
            "Date",
            "From",
            "To",
            "Cc",
            "Subject",
            "Message-ID",
            "References",
            "In-Reply-To",
            "MIME-Version",
            "X-Mailer",
            "Extra",
        ],
    };
    let mut out = HeaderBlock::default();
    for name in order {
        if let Some((_, v)) = fields.iter().find(|(n, _)| n == name) {
            out.buf.push_str(v);
        }
    }
    let _ = list;
    out
}
