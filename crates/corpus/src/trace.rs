//! Trace and authentication headers added in transit: Return-Path and Delivered-To
//! (RFC 5321 §4.4), Received chains (RFC 5321 §4.4, RFC 5322 §3.6.7), DKIM-Signature
//! (RFC 6376 §3.5), ARC sets (RFC 8617 §4.1), Authentication-Results (RFC 8601 §2.2) and spam
//! filter verdicts (SpamAssassin and rspamd styles). Hosts and addresses come from reserved
//! names and documentation ranges (RFC 5737, RFC 3849).

use rand::seq::SliceRandom;
use rand::Rng;

use crate::date::{rfc5322, Zone, LOCAL_ZONE};
use crate::encode::base64;
use crate::header::{chars, hex, HeaderBlock, Mailer, ALNUM};

/// The receiving site: its MX and mail store hosts and how it filters spam. One per mailbox
/// owner, so a user's headers look like one site's.
#[derive(Clone, Debug)]
pub(crate) struct Site {
    pub mx: String,
    pub mx_ip: String,
    pub store: String,
    pub rspamd: bool,
}

impl Site {
    pub(crate) fn pick<R: Rng + ?Sized>(rng: &mut R) -> Self {
        let n = rng.gen_range(1..=3);
        Site {
            mx: format!("mx{n}.example.org"),
            mx_ip: format!("198.51.100.{}", 10 + n),
            store: format!("imap{}.example.org", rng.gen_range(1..=2)),
            rspamd: rng.gen_bool(0.5),
        }
    }
}

/// An IPv4 address from the three RFC 5737 documentation ranges.
pub(crate) fn ipv4<R: Rng + ?Sized>(rng: &mut R) -> String {
    let net = ["192.0.2", "198.51.100", "203.0.113"]
        .choose(rng)
        .copied()
        .unwrap_or("192.0.2");
    format!("{net}.{}", rng.gen_range(1..255))
}

/// An IPv6 address in 2001:db8::/32 (RFC 3849).
pub(crate) fn ipv6<R: Rng + ?Sized>(rng: &mut R) -> String {
    format!(
        "2001:db8:{:x}:{:x}::{:x}",
        rng.gen_range(1..0xffffu32),
        rng.gen_range(0..0x100u32),
        rng.gen_range(1..0x1000u32)
    )
}

fn postfix_queue_id<R: Rng + ?Sized>(rng: &mut R) -> String {
    if rng.gen_bool(0.6) {
        // Long queue ids (enable_long_queue_ids = yes).
        format!(
            "4{}",
            chars(
                rng,
                14,
                b"BCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz0123456789"
            )
        )
    } else {
        hex(rng, 10).to_uppercase()
    }
}

/// What the trace generator needs to know about one delivered message.
pub(crate) struct Transit<'a> {
    pub owner: &'a str,
    pub envelope_from: &'a str,
    pub from_domain: &'a str,
    pub mailer: Mailer,
    pub sent: i64,
    pub delivered: i64,
    pub sender_zone: Zone,
    /// The list host and list address when the message came through a mailing list.
    pub list: Option<(&'a str, &'a str)>,
    pub spam: bool,
    /// Lean headers (small notification-style mail): fewer hops, no ARC.
    pub lean: bool,
}

struct Hop {
    value: String,
}

fn tls_clause<R: Rng + ?Sized>(rng: &mut R) -> &'static str {
    [
        "\n\t(using TLSv1.3 with cipher TLS_AES_256_GCM_SHA384 (256/256 bits)\n\t key-exchange X25519 server-signature RSA-PSS (2048 bits) server-digest SHA256)\n\t(No client certificate requested)",
        "\n\t(using TLSv1.3 with cipher TLS_AES_128_GCM_SHA256 (128/128 bits)\n\t key-exchange X25519 server-signature ECDSA (P-256) server-digest SHA256)\n\t(No client certificate requested)",
        "\n\t(using TLSv1.2 with cipher ECDHE-RSA-AES256-GCM-SHA384 (256/256 bits))\n\t(No client certificate requested)",
    ]
    .choose(rng)
    .copied()
    .unwrap_or("")
}

/// The sender-side hops, newest first, in the style of the sending software.
fn sender_hops<R: Rng + ?Sized>(
    rng: &mut R,
    t: &Transit,
    times: &mut impl Iterator<Item = i64>,
) -> (String, String, Vec<Hop>) {
    let d = t.from_domain;
    let mut hops = Vec::new();
    let (host, ip) = match t.mailer {
        Mailer::Webmail => {
            let host = format!(
                "mail-{}{}-f{}.{d}",
                ["ed1", "ej1", "wm1", "lf1", "pj1", "yw1"][rng.gen_range(0..6)],
                "",
                rng.gen_range(41..199)
            );
            hops.push(Hop {
                value: format!(
                    "by {host} with SMTP id {}-{}so{}{}.{}\n        for <{}>; {}",
                    hex(rng, 10),
                    hex(rng, 14),
                    rng.gen_range(1_000_000..9_999_999),
                    chars(rng, 3, b"abcdefghijklmnopqrstuvwxyz0123456789"),
                    rng.gen_range(0..3),
                    t.owner,
                    rfc5322(times.next().unwrap_or(t.sent), t.sender_zone, true, true)
                ),
            });
            let ip = ipv4(rng);
            (host, ip)
        }
        Mailer::Outlook => {
            let a = format!(
                "{}PR{:02}MB{}",
                ["AM", "DB", "VI", "PA"][rng.gen_range(0..4)],
                rng.gen_range(1..10),
                rng.gen_range(1000..9999)
            );
            let b = format!(
                "{}PR{:02}MB{}",
                ["AM", "DB", "VI", "PA"][rng.gen_range(0..4)],
                rng.gen_range(1..10),
                rng.gen_range(1000..9999)
            );
            let utc = Zone {
                offset_min: 0,
                comment: None,
            };
            // Exchange folds anywhere, even inside the date.
            let date = rfc5322(times.next().unwrap_or(t.sent), utc, true, false);
            let (d1, d2) = date.split_at(date.len().min(17));
            hops.push(Hop {
                value: format!(
                    "from {a}.eurprd04.prod.outlook.example\n ([fe80::{:x}:{:x}:{:x}:{:x}]) by {a}.eurprd04.prod.outlook.example\n ([fe80::{:x}:{:x}:{:x}:{:x}%4]) with mapi id 15.20.{}.{:03}; {d1}\n {d2}",
                    rng.gen_range(0..0xffffu32), rng.gen_range(0..0xffffu32), rng.gen_range(0..0xffffu32), rng.gen_range(0..0xffffu32),
                    rng.gen_range(0..0xffffu32), rng.gen_range(0..0xffffu32), rng.gen_range(0..0xffffu32), rng.gen_range(0..0xffffu32),
                    rng.gen_range(6000..7999), rng.gen_range(0..100)
                ),
            });
            hops.push(Hop {
                value: format!(
                    "from {a}.eurprd04.prod.outlook.example ({}) by\n {b}.eurprd04.prod.outlook.example ({}) with\n Microsoft SMTP Server (version=TLS1_2,\n cipher=TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384) id 15.20.{}.{}; {}",
                    ipv6(rng),
                    ipv6(rng),
                    rng.gen_range(6000..7999),
                    rng.gen_range(10..40),
                    rfc5322(times.next().unwrap_or(t.sent), utc, true, false)
                ),
            });
            (
                format!(
                    "mail-{}.outbound.protection.outlook.example",
                    rng.gen_range(100..999)
                ),
                ipv4(rng),
            )
        }
        Mailer::Bot | Mailer::Esp => {
            let host = format!(
                "{}.{d}",
                ["out-7", "smtp-out", "o1", "mta-04"][rng.gen_range(0..4)]
            );
            (host, ipv4(rng))
        }
        Mailer::Spammer => (
            format!("{}.dynamic.isp.example", ipv4(rng).replace('.', "-")),
            ipv4(rng),
        ),
        Mailer::Thunderbird | Mailer::AppleMail | Mailer::Mutt => {
            let host = format!("smtp.{d}");
            let client = if rng.gen_bool(0.5) {
                format!("[IPv6:{}]", ipv6(rng))
            } else {
                format!("[{}]", ipv4(rng))
            };
            hops.push(Hop {
                value: format!(
                    "from {} (unknown {client})\n\t(Authenticated sender: {})\n\tby {host} (Postfix) with ESMTPSA id {};\n\t{}",
                    if rng.gen_bool(0.5) { client.clone() } else { format!("[{}]", ipv4(rng)) },
                    t.envelope_from,
                    postfix_queue_id(rng),
                    rfc5322(times.next().unwrap_or(t.sent), t.sender_zone, true, true)
                ),
            });
            (host, ipv4(rng))
        }
    };
    (host, ip, hops)
}

/// Appends a DKIM-Signature (RFC 6376 §3.5) with realistic tag order and folding; the
/// `bh=` is a base64 SHA-256 (44 chars) and `b=` a base64 RSA-2048 (344 chars) or Ed25519
/// (88 chars) signature. Returns the first 8 chars of b= (for header.b= in results).
pub(crate) fn dkim<R: Rng + ?Sized>(
    rng: &mut R,
    h: &mut HeaderBlock,
    name: &str,
    domain: &str,
    ts: i64,
    ed25519: bool,
    bulk: bool,
) -> String {
    let mut bh = [0u8; 32];
    rng.fill(&mut bh[..]);
    let mut sig = vec![0u8; if ed25519 { 64 } else { 256 }];
    rng.fill(&mut sig[..]);
    let b = base64(&sig);
    let selector = [
        "20230601",
        "google",
        "selector1",
        "s1",
        "mail",
        "dkim",
        "k1",
        "default",
    ]
    .choose(rng)
    .copied()
    .unwrap_or("s1");
    let signed = if bulk {
        "From:Date:Subject:Message-Id:To:MIME-Version:Content-Type:List-Unsubscribe:\n\t List-Unsubscribe-Post:Feedback-ID"
    } else {
        [
            "from:to:cc:subject:date:message-id:in-reply-to:references:mime-version:content-type",
            "to:subject:message-id:date:from:mime-version:from:to:cc:subject\n\t :date:message-id:reply-to",
            "From:Reply-To:Subject:Date:Message-ID:To:Cc:MIME-Version:\n\t Content-Type:Content-Transfer-Encoding:In-Reply-To:References",
        ]
        .choose(rng)
        .copied()
        .unwrap_or("from:to:subject:date")
    };
    let mut v = format!(
        "v=1; a={}; c=relaxed/relaxed;\n\td={domain}; s={selector}; t={ts};",
        if ed25519 {
            "ed25519-sha256"
        } else {
            "rsa-sha256"
        }
    );
    if rng.gen_bool(0.4) {
        v.push_str(&format!(" x={};", ts + 604_800));
    }
    v.push_str(&format!("\n\th={signed};\n\tbh={};\n\tb=", base64(&bh)));
    for (i, chunk) in b.as_bytes().chunks(70).enumerate() {
        if i > 0 {
            v.push_str("\n\t ");
        }
        v.push_str(&String::from_utf8_lossy(chunk));
    }
    h.raw(name, &v);
    b[..8].to_owned()
}

/// Appends one ARC set (RFC 8617 §4.1: ARC-Seal, ARC-Message-Signature,
/// ARC-Authentication-Results with the same instance `i`), in the order sealers write it.
fn arc_set<R: Rng + ?Sized>(
    rng: &mut R,
    h: &mut HeaderBlock,
    i: u32,
    sealer: &str,
    t: &Transit,
    ts: i64,
    ip: &str,
) {
    let mut seal = [0u8; 256];
    rng.fill(&mut seal[..]);
    let cv = if i == 1 { "none" } else { "pass" };
    let fold = |s: &str| {
        s.as_bytes()
            .chunks(70)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect::<Vec<_>>()
            .join("\n        ")
    };
    h.raw(
        "ARC-Seal",
        &format!("i={i}; a=rsa-sha256; t={ts}; cv={cv};\n        d={sealer}; s=arc-20240605;\n        b={}", fold(&base64(&seal))),
    );
    let mut sig = [0u8; 256];
    rng.fill(&mut sig[..]);
    let mut bh = [0u8; 32];
    rng.fill(&mut bh[..]);
    h.raw(
        "ARC-Message-Signature",
        &format!(
            "i={i}; a=rsa-sha256; c=relaxed/relaxed; d={sealer};\n        s=arc-20240605; t={ts};\n        h=to:subject:message-id:date:from:mime-version:dkim-signature;\n        bh={};\n        b={}",
            base64(&bh),
            fold(&base64(&sig))
        ),
    );
    h.raw(
        "ARC-Authentication-Results",
        &format!(
            "i={i}; mx.{sealer};\n       dkim=pass header.i=@{d} header.s=s1 header.b={};\n       spf=pass ({sealer}: domain of {ef} designates {ip} as permitted sender) smtp.mailfrom={ef};\n       dmarc=pass (p=NONE sp=NONE dis=NONE) header.from={d}",
            chars(rng, 8, ALNUM),
            d = t.from_domain,
            ef = t.envelope_from
        ),
    );
}

fn spam_headers<R: Rng + ?Sized>(
    rng: &mut R,
    h: &mut HeaderBlock,
    site: &Site,
    t: &Transit,
    qid: &str,
) {
    let score: f64 = if t.spam {
        rng.gen_range(5.5..24.0)
    } else {
        rng.gen_range(-6.0..2.5)
    };
    if site.rspamd {
        h.raw("X-Rspamd-Queue-Id", qid);
        h.raw(
            "X-Rspamd-Server",
            site.mx.split('.').next().unwrap_or("mx1"),
        );
        let mut symbols: Vec<String> = vec![
            format!(
                "BAYES_{}({:.2})[{:.2}%]",
                if t.spam { "SPAM" } else { "HAM" },
                if t.spam { 5.1 } else { -3.0 },
                rng.gen_range(90.0..100.0)
            ),
            format!(
                "DMARC_POLICY_{}({})[{},none]",
                if t.spam { "SOFTFAIL" } else { "ALLOW" },
                if t.spam { "0.10" } else { "-0.50" },
                t.from_domain
            ),
            format!(
                "R_DKIM_{}(-0.20)[{}:s=s1]",
                if t.spam { "NA" } else { "ALLOW" },
                t.from_domain
            ),
            format!("R_SPF_ALLOW(-0.20)[+ip4:{}]", ipv4(rng)),
            "MIME_GOOD(-0.10)[multipart/alternative,text/plain]".to_owned(),
            [
                "RCVD_COUNT_TWO(0.00)[2]",
                "RCVD_COUNT_THREE(0.00)[3]",
                "RCVD_COUNT_FIVE(0.00)[5]",
            ][rng.gen_range(0..3)]
            .to_owned(),
            format!("FROM_HAS_DN(0.00)[]"),
            format!("TO_DN_NONE(0.00)[]"),
            format!("RCPT_COUNT_ONE(0.00)[1]"),
            format!(
                "ASN(0.00)[asn:{}, ipnet:{}/24, country:{}]",
                rng.gen_range(1000..65000),
                ipv4(rng),
                ["DE", "US", "FR", "NL", "JP"][rng.gen_range(0..5)]
            ),
            "MID_RHS_MATCH_FROM(0.00)[]".to_owned(),
            "ARC_NA(0.00)[]".to_owned(),
        ];
        symbols.truncate(rng.gen_range(6..=symbols.len()));
        let body = symbols.join(";\n\t ");
        h.raw(
            "X-Spamd-Result",
            &format!(
                "default: {} [{score:.2} / 15.00];\n\t {body}",
                if t.spam { "True" } else { "False" }
            ),
        );
        let bar = if score < 0.0 {
            "-".repeat((-score) as usize + 1)
        } else {
            "+".repeat(score as usize + 1)
        };
        h.raw("X-Spamd-Bar", &bar);
        h.raw(
            "X-Rspamd-Action",
            if t.spam { "add header" } else { "no action" },
        );
        if t.spam {
            h.raw("X-Spam", "Yes");
        }
    } else {
        let tests_ham = [
            "BAYES_00",
            "DKIM_SIGNED",
            "DKIM_VALID",
            "DKIM_VALID_AU",
            "DKIM_VALID_EF",
            "HTML_MESSAGE",
            "RCVD_IN_DNSWL_NONE",
            "RCVD_IN_MSPIKE_H2",
            "SPF_HELO_NONE",
            "SPF_PASS",
            "T_SCC_BODY_TEXT_LINE",
        ];
        let tests_spam = [
            "BAYES_99",
            "BAYES_999",
            "HTML_IMAGE_RATIO_02",
            "HTML_MESSAGE",
            "MIME_HTML_ONLY",
            "RCVD_IN_SBL_CSS",
            "RDNS_DYNAMIC",
            "SPF_SOFTFAIL",
            "URIBL_ABUSE_SURBL",
            "URIBL_BLACK",
            "FREEMAIL_FORGED_REPLYTO",
        ];
        let tests = if t.spam {
            &tests_spam[..]
        } else {
            &tests_ham[..]
        };
        let n = rng.gen_range(5..=tests.len());
        h.raw(
            "X-Spam-Checker-Version",
            &format!("SpamAssassin 4.0.0 (2022-12-13) on\n\t{}", site.mx),
        );
        if t.spam {
            h.raw("X-Spam-Flag", "YES");
        }
        h.raw("X-Spam-Level", &"*".repeat(score.max(0.0) as usize));
        let mut status = format!(
            "{}, score={score:.1} required=5.0 tests=",
            if t.spam { "Yes" } else { "No" }
        );
        let mut col = status.len() + 15;
        for (i, test) in tests[..n].iter().enumerate() {
            if col + test.len() + 1 > 76 {
                status.push_str("\n\t");
                col = 8;
            }
            status.push_str(test);
            if i + 1 < n {
                status.push(',');
            }
            col += test.len() + 1;
        }
        status.push_str(if t.spam {
            "\n\tautolearn=no autolearn_force=no version=4.0.0"
        } else {
            "\n\tautolearn=ham autolearn_force=no version=4.0.0"
        });
        h.raw("X-Spam-Status", &status);
        if t.spam {
            let mut report = String::from("\n\t*  3.5 BAYES_99 BODY: Bayes spam probability is 99 to 100%\n\t*      [score: 1.0000]");
            for test in &tests[2..n] {
                report.push_str(&format!(
                    "\n\t*  {:.1} {test} {}",
                    rng.gen_range(0.1..2.5),
                    [
                        "Message only has text/html MIME parts",
                        "Contains an URL listed in the ABUSE SURBL blocklist",
                        "Relay looks like a dynamic address",
                        "SPF: sender does not match SPF record (softfail)",
                        "HTML has a low ratio of text to image area"
                    ][rng.gen_range(0..5)]
                ));
            }
            h.raw("X-Spam-Report", &report);
        }
    }
}

/// Builds the trace header block that sits above the origin headers of an incoming message:
/// Return-Path, Delivered-To, 2-6 Received headers (newest first, each with its own date),
/// spam verdict, Authentication-Results, optional ARC sets and the sender's DKIM-Signature.
/// The second value is the length of what the final delivery added (Return-Path,
/// Delivered-To and the store's LMTP Received header): the rest is what LMTP carried.
pub(crate) fn trace<R: Rng + ?Sized>(
    rng: &mut R,
    site: &Site,
    t: &Transit,
) -> (HeaderBlock, usize) {
    let mut h = HeaderBlock::default();
    // Hop times from the oldest (sender) to the newest (our store), monotonic.
    let span = (t.delivered - t.sent).max(1);
    let mut stamps: Vec<i64> = (0..6).map(|_| t.sent + rng.gen_range(0..=span)).collect();
    stamps.sort_unstable();
    let mut times = stamps.into_iter();

    let (out_host, out_ip, internal) = sender_hops(rng, t, &mut times);
    let mut list_hop = None;
    if let Some((list_host, list_addr)) = t.list {
        list_hop = Some(format!(
            "from {out_host} ({out_host} [{out_ip}])\n\tby {list_host} (Postfix) with ESMTPS id {}\n\tfor <{list_addr}>; {}",
            postfix_queue_id(rng),
            rfc5322(times.next().unwrap_or(t.sent), LOCAL_ZONE, true, true)
        ));
    }
    let (peer_host, peer_ip) = match t.list {
        Some((list_host, _)) => (format!("mail.{list_host}"), ipv4(rng)),
        None => (out_host, out_ip),
    };
    let mx_time = times.next().unwrap_or(t.delivered);
    let filter_time = times.next().unwrap_or(t.delivered);
    let qid = postfix_queue_id(rng);

    h.raw("Return-Path", &format!("<{}>", t.envelope_from));
    h.raw("Delivered-To", t.owner);
    let lmtp_id: String = chars(
        rng,
        22,
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
    );
    h.raw(
        "Received",
        &format!(
            "from {} ([{}])\n\tby {} with LMTPS\n\tid {lmtp_id}\n\t(envelope-from <{}>)\n\tfor <{}>; {}",
            site.mx,
            site.mx_ip,
            site.store,
            t.envelope_from,
            t.owner,
            rfc5322(t.delivered, LOCAL_ZONE, true, false)
        ),
    );
    let delivery_len = h.buf.len();
    spam_headers(rng, &mut h, site, t, &qid);
    if !t.lean && rng.gen_bool(0.5) {
        h.raw(
            "Received",
            &format!("from localhost (localhost [127.0.0.1])\n\tby {} (Postfix) with ESMTP id {qid}\n\tfor <{}>; {}", site.mx, t.owner, rfc5322(filter_time, LOCAL_ZONE, true, true)),
        );
    }
    let sig_domain = t.list.map(|(host, _)| host).unwrap_or(t.from_domain);
    let dkim_b: String = chars(rng, 8, ALNUM);
    if t.spam {
        h.raw("Authentication-Results", &format!("{};\n\tdkim=none;\n\tspf=softfail (domain of {} does not designate {peer_ip} as permitted sender) smtp.mailfrom={};\n\tdmarc=fail (p=none dis=none) header.from={}", site.mx, t.envelope_from, t.envelope_from, t.from_domain));
    } else if rng.gen_bool(0.5) {
        h.raw("Authentication-Results", &format!("{};\n\tdkim=pass (2048-bit key; unprotected) header.d={sig_domain} header.i=@{sig_domain} header.a=rsa-sha256 header.s=s1 header.b={dkim_b};\n\tdkim-atps=neutral", site.mx));
        h.raw(
            "Authentication-Results",
            &format!(
                "{}; dmarc=pass (p=none dis=none) header.from={}",
                site.mx, t.from_domain
            ),
        );
        h.raw(
            "Authentication-Results",
            &format!(
                "{}; spf=pass smtp.mailfrom={}",
                site.mx,
                t.envelope_from.rsplit('@').next().unwrap_or(sig_domain)
            ),
        );
    } else {
        h.raw("Authentication-Results", &format!("{};\n\tdkim=pass header.d={sig_domain} header.s=s1 header.b={dkim_b};\n\tspf=pass ({}: domain of {} designates {peer_ip} as permitted sender) smtp.mailfrom={};\n\tdmarc=pass (policy=none) header.from={}", site.mx, site.mx, t.envelope_from, t.envelope_from, t.from_domain));
    }
    h.raw(
        "Received",
        &format!(
            "from {peer_host} ({peer_host} [{peer_ip}]){}\n\tby {} (Postfix) with ESMTPS id {qid}\n\tfor <{}>; {}",
            tls_clause(rng),
            site.mx,
            t.owner,
            rfc5322(mx_time, LOCAL_ZONE, true, true)
        ),
    );
    // ARC (RFC 8617) comes from forwarders and big providers: lists seal their own hop,
    // rarely on top of the author's provider's seal.
    if !t.lean && !t.spam {
        match t.list {
            Some((list_host, _)) if rng.gen_bool(0.5) => {
                let two = rng.gen_bool(0.15);
                arc_set(
                    rng,
                    &mut h,
                    if two { 2 } else { 1 },
                    list_host,
                    t,
                    mx_time,
                    &peer_ip,
                );
                if two {
                    arc_set(rng, &mut h, 1, t.from_domain, t, t.sent, &peer_ip);
                }
            }
            None if matches!(t.mailer, Mailer::Webmail | Mailer::Outlook) && rng.gen_bool(0.35) => {
                arc_set(rng, &mut h, 1, t.from_domain, t, t.sent, &peer_ip);
            }
            _ => {}
        }
    }
    if let Some((list_host, _)) = t.list {
        dkim(
            rng,
            &mut h,
            "DKIM-Signature",
            list_host,
            mx_time,
            false,
            false,
        );
    }
    if let Some(hop) = list_hop {
        h.raw("Received", &hop);
    }
    if !t.spam {
        let bulk = matches!(t.mailer, Mailer::Esp | Mailer::Bot);
        if rng.gen_ratio(1, 6) {
            dkim(
                rng,
                &mut h,
                "DKIM-Signature",
                t.from_domain,
                t.sent,
                true,
                bulk,
            );
        }
        dkim(
            rng,
            &mut h,
            "DKIM-Signature",
            t.from_domain,
            t.sent,
            false,
            bulk,
        );
    }
    // Keep the chain within 2-6 Received headers: LMTP + MX (+ filter) (+ list) + sender's.
    let have = h.buf.matches("\nReceived:").count();
    for hop in internal.into_iter().take(6usize.saturating_sub(have)) {
        if t.lean {
            break;
        }
        h.raw("Received", &hop.value);
    }
    if t.mailer == Mailer::Webmail && !t.lean {
        h.raw(
            "X-Received",
            &format!(
                "by 2002:a17:90{}:{:x}:b0:{:x}:{:x} with SMTP id {}-{}.{};\n        {}",
                rng.gen_range(0..9),
                rng.gen_range(0x100..0xfff),
                rng.gen_range(0x100..0xfff),
                rng.gen_range(0x100..0xfff),
                hex(rng, 10),
                hex(rng, 12),
                rng.gen_range(1..50),
                rfc5322(t.sent, t.sender_zone, true, true)
            ),
        );
        h.raw(
            "X-Gm-Message-State",
            &format!("AOJu0Y{}", chars(rng, 60, ALNUM)),
        );
    }
    (h, delivery_len)
}
