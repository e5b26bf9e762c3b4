//! Composing whole messages: who writes to whom, threads (RFC 5322 §3.6.4 In-Reply-To and
//! References), origin headers in each mailer's order, trace headers for incoming mail, and
//! a body shaped to the drawn size.

use std::collections::VecDeque;

use rand::seq::SliceRandom;
use rand::Rng;

use crate::date::{rfc5322, Zone, EPOCH_START, LOCAL_ZONE, ZONES};
use crate::header::{split_reply_prefix, Mailer};
use crate::lists::{list_headers, ListDef, LISTS};
use crate::origin::origin_headers;
use crate::render::{Content, Quote};
use crate::shape::{shape_body, Shape};
use crate::size::sample_size;
use crate::trace::{trace, Site, Transit};
use crate::words::{person, subject, Lang, Person};

/// Where a generated message is going to be filed; this decides who wrote it and how it
/// looks (e.g. `Sent` mail has no trace headers, `Junk` mail is spam).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Incoming mail: personal and business mail, notifications, newsletters, some list mail.
    Inbox,
    /// Mail the owner sent (saved by the client; no Received headers).
    Sent,
    /// Unfinished mail the owner is writing.
    Drafts,
    /// Spam that the filter caught.
    Junk,
    /// Meeting invitations (text/calendar) and their replies.
    Meetings,
    /// Mail from the mailing list with this index in [`MAILING_LISTS`](crate::MAILING_LISTS).
    List(usize),
}

/// One generated message.
#[derive(Clone, Debug)]
pub struct Generated {
    /// The message: RFC 5322 header block, blank line, body; LF line endings, no CR.
    pub bytes: Vec<u8>,
    /// Delivery time in Unix seconds (use as INTERNALDATE / file mtime).
    pub received: i64,
    /// The Message-ID, with angle brackets.
    pub message_id: String,
    /// For incoming mail: the envelope sender (MAIL FROM, the Return-Path) and the offset
    /// in `bytes` where the message as carried over LMTP starts, i.e. after the
    /// Return-Path, Delivered-To and Received header that the final delivery added.
    pub lmtp: Option<(String, usize)>,
}

impl Generated {
    /// The message as an LMTP client would send it (without the headers the final delivery
    /// adds), or the whole message for mail that is saved rather than delivered (Sent,
    /// Drafts), as APPEND would carry it.
    pub fn lmtp_data(&self) -> &[u8] {
        let start = self.lmtp.as_ref().map_or(0, |(_, off)| *off);
        self.bytes.get(start..).unwrap_or(&self.bytes)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Personal,
    List(usize),
    Notification,
    Newsletter,
    Spam,
    Invite,
    Sent,
    Draft,
}

/// A conversation the generator can continue.
struct Thread {
    base: String,
    ids: Vec<String>,
    last_from: Person,
    last_to: Person,
    last_date: i64,
    last_lines: Vec<String>,
    lang: Lang,
    list: Option<usize>,
    last_subject: String,
}

/// Generator state that survives between messages of one mailbox.
pub(crate) struct State {
    pub(crate) owner: Person,
    site: Site,
    pub(crate) own_mailer: Mailer,
    signature: String,
    contacts: Vec<Person>,
    posters: Vec<Vec<Person>>,
    threads: VecDeque<Thread>,
    clock: i64,
    mean_gap: f64,
    scale: f64,
}

impl State {
    pub(crate) fn new<R: Rng + ?Sized>(rng: &mut R, owner_addr: &str, scale: f64) -> State {
        let local = owner_addr.split('@').next().unwrap_or("user");
        let mut owner = person(rng, Some("example.org"));
        owner.addr = owner_addr.to_owned();
        let signature = format!(
            "{}\n{}",
            owner.name,
            [
                "Example Org, Platform team",
                "Sent from my phone",
                "+49 30 1234567",
                local
            ][rng.gen_range(0..4)]
        );
        State {
            site: Site::pick(rng),
            own_mailer: [
                Mailer::Thunderbird,
                Mailer::Webmail,
                Mailer::AppleMail,
                Mailer::Mutt,
                Mailer::Outlook,
            ][rng.gen_range(0..5)],
            signature,
            contacts: (0..rng.gen_range(25..60))
                .map(|_| person(rng, None))
                .collect(),
            posters: LISTS
                .iter()
                .map(|_| (0..30).map(|_| person(rng, None)).collect())
                .collect(),
            threads: VecDeque::new(),
            clock: EPOCH_START + rng.gen_range(0..86_400),
            mean_gap: 3600.0,
            owner,
            scale,
        }
    }

    pub(crate) fn set_clock(&mut self, ts: i64) {
        self.clock = ts;
    }

    pub(crate) fn set_mean_gap(&mut self, secs: f64) {
        self.mean_gap = secs.max(1.0);
    }

    pub(crate) fn owner(&self) -> &str {
        &self.owner.addr
    }

    /// A frequent correspondent: contacts early in the list write more often.
    pub(crate) fn contact<R: Rng + ?Sized>(&self, rng: &mut R) -> Person {
        let u: f64 = rng.gen();
        let i = ((u * u) * self.contacts.len() as f64) as usize;
        self.contacts[i.min(self.contacts.len() - 1)].clone()
    }
}

fn pick_kind<R: Rng + ?Sized>(rng: &mut R, role: Role) -> Kind {
    match role {
        Role::Sent => Kind::Sent,
        Role::Drafts => Kind::Draft,
        Role::Junk => Kind::Spam,
        Role::List(i) => Kind::List(i % LISTS.len()),
        Role::Meetings => {
            if rng.gen_bool(0.7) {
                Kind::Invite
            } else {
                Kind::Personal
            }
        }
        Role::Inbox => match rng.gen_range(0..100) {
            0..=54 => Kind::Personal,
            55..=69 => Kind::Notification,
            70..=79 => Kind::Newsletter,
            80..=94 => Kind::List(rng.gen_range(0..LISTS.len())),
            95..=97 => Kind::Invite,
            _ => Kind::Spam,
        },
    }
}

/// Decisions about one message before rendering.
pub(crate) struct Draft {
    pub(crate) kind: Kind,
    pub(crate) mailer: Mailer,
    pub(crate) from: Person,
    pub(crate) to: Vec<Person>,
    pub(crate) cc: Vec<Person>,
    pub(crate) group_to: Option<String>,
    pub(crate) subject: String,
    pub(crate) lang: Lang,
    pub(crate) sent: i64,
    pub(crate) zone: Zone,
    pub(crate) message_id: String,
    pub(crate) parent: Option<usize>,
    pub(crate) references: Vec<String>,
    pub(crate) quote: Option<Quote>,
    pub(crate) forward: bool,
}

fn attribution(
    mailer: Mailer,
    from: &Person,
    date: i64,
    subject: &str,
    to: &Person,
) -> (String, bool, bool) {
    let d = rfc5322(date, LOCAL_ZONE, true, false);
    match mailer {
        Mailer::Outlook => (
            format!("________________________________\nFrom: {} <{}>\nSent: {d}\nTo: {} <{}>\nSubject: {subject}\n", from.name, from.addr, to.name, to.addr),
            true,
            false,
        ),
        Mailer::Webmail | Mailer::AppleMail => (format!("On {d}, {} <{}> wrote:", from.name, from.addr), true, true),
        _ => (format!("On {d}, {} wrote:", from.name), false, true),
    }
}

fn reply_prefix(mailer: Mailer, lang: Lang, forward: bool) -> &'static str {
    match (forward, mailer, lang) {
        (false, Mailer::Outlook, Lang::De) => "AW: ",
        (false, Mailer::Outlook, _) => "RE: ",
        (false, _, _) => "Re: ",
        (true, Mailer::Outlook, Lang::De) => "WG: ",
        (true, Mailer::Outlook, _) => "FW: ",
        (true, _, _) => "Fwd: ",
    }
}

/// Composes the next message for `role`, advancing the mailbox clock.
pub(crate) fn compose<R: Rng + ?Sized>(st: &mut State, rng: &mut R, role: Role) -> Generated {
    let gap = -(rng.gen_range(f64::EPSILON..1.0f64)).ln() * st.mean_gap;
    st.clock += (gap as i64).max(1);
    let kind = pick_kind(rng, role);
    let target = sample_size(rng, st.scale);
    let delivered = st.clock;
    let d = draft(st, rng, kind, delivered);
    let list = match kind {
        Kind::List(i) => Some(&LISTS[i]),
        _ => None,
    };
    let incoming = !matches!(kind, Kind::Sent | Kind::Draft);
    // Small mail comes with lean headers (fewer hops, no ARC), as notifications do.
    let lean = target < 5_000 || matches!(kind, Kind::Notification) && target < 8_000;

    let mut origin = origin_headers(rng, st, &d, list);
    if let Some(l) = list {
        list_headers(rng, &mut origin, l, &d.message_id);
    }
    let mut head = String::new();
    let mut lmtp = None;
    if incoming {
        let from_domain = d
            .from
            .addr
            .rsplit('@')
            .next()
            .unwrap_or("example.com")
            .to_owned();
        let envelope_from = match list {
            Some(l) => format!(
                "{}-bounces+{}@{}",
                l.local,
                st.owner.addr.replace('@', "="),
                l.host
            ),
            None if matches!(kind, Kind::Newsletter | Kind::Notification) => {
                format!(
                    "bounce-{}-{}@{from_domain}",
                    rng.gen_range(1000..99_999),
                    crate::header::hex(rng, 8)
                )
            }
            None => d.from.addr.clone(),
        };
        let list_addr = list.map(|l| format!("{}@{}", l.local, l.host));
        let t = Transit {
            owner: &st.owner.addr,
            envelope_from: &envelope_from,
            from_domain: &from_domain,
            mailer: d.mailer,
            sent: d.sent,
            delivered,
            sender_zone: d.zone,
            list: list.map(|l| l.host).zip(list_addr.as_deref()),
            spam: kind == Kind::Spam,
            lean,
        };
        let (block, len) = trace(rng, &st.site, &t);
        head.push_str(&block.buf);
        lmtp = Some((envelope_from.clone(), len));
    }
    head.push_str(&origin.buf);

    let budget = target.saturating_sub(head.len() + 120);
    let shape = Shape {
        kind,
        mailer: d.mailer,
        lang: d.lang,
        budget,
        list,
        from: &d.from,
        to: d.to.first().unwrap_or(&st.owner),
        owner: &st.owner,
        sent: d.sent,
        subject: &d.subject,
    };
    let inner_budget = budget * 4 / 5;
    let inner = if d.forward && rng.gen_bool(0.5) {
        Some(inner_message(
            st,
            rng,
            inner_budget,
            d.sent,
            split_reply_prefix(&d.subject).1,
        ))
    } else {
        None
    };
    let own_sig = if incoming { "" } else { st.signature.as_str() };
    let (part, plain) = shape_body(rng, &shape, d.quote.clone(), inner, own_sig);

    let mut bytes = Vec::with_capacity(head.len() + part.len() + 1);
    bytes.extend_from_slice(head.as_bytes());
    bytes.extend_from_slice(part.headers.as_bytes());
    bytes.push(b'\n');
    bytes.extend_from_slice(&part.body);

    remember(st, &d, list, plain);
    Generated {
        bytes,
        received: if incoming { delivered } else { d.sent },
        lmtp,
        message_id: d.message_id,
    }
}

fn draft<R: Rng + ?Sized>(st: &mut State, rng: &mut R, kind: Kind, delivered: i64) -> Draft {
    let zone = *ZONES.choose(rng).unwrap_or(&LOCAL_ZONE);
    let sent = delivered - rng.gen_range(2..180);
    let owner = st.owner.clone();
    let (mailer, from, to): (Mailer, Person, Vec<Person>) = match kind {
        Kind::Personal | Kind::Invite => (
            Mailer::pick_personal(rng),
            st.contact(rng),
            vec![owner.clone()],
        ),
        Kind::Sent | Kind::Draft => (st.own_mailer, owner.clone(), vec![st.contact(rng)]),
        Kind::List(i) => {
            let p = st.posters[i]
                .choose(rng)
                .cloned()
                .unwrap_or_else(|| person(rng, None));
            let m = [
                Mailer::Mutt,
                Mailer::Thunderbird,
                Mailer::Webmail,
                Mailer::AppleMail,
            ][rng.gen_range(0..4)];
            (
                m,
                p,
                vec![Person {
                    name: String::new(),
                    addr: format!("{}@{}", LISTS[i].local, LISTS[i].host),
                }],
            )
        }
        Kind::Notification => {
            let (name, addr) = [
                ("CI Bot", "ci@builds.example.com"),
                ("Tracker", "notifications@tracker.example"),
                ("acme/server", "notifications@code.example.com"),
                ("Calendar", "calendar-notification@example.com"),
            ][rng.gen_range(0..4)];
            (
                Mailer::Bot,
                Person {
                    name: name.into(),
                    addr: addr.into(),
                },
                vec![owner.clone()],
            )
        }
        Kind::Newsletter => {
            let (name, addr) = [
                ("Shop News", "news@shop.example"),
                ("The Weekly Digest", "digest@news.example.net"),
                ("Reisebüro Sonnenschein", "angebote@reisen.example"),
                ("Tech Events", "hello@events.test"),
            ][rng.gen_range(0..4)];
            (
                Mailer::Esp,
                Person {
                    name: name.into(),
                    addr: addr.into(),
                },
                vec![owner.clone()],
            )
        }
        Kind::Spam => {
            let domain = [
                "secure-pay.example",
                "prize-center.test",
                "pharma.example.net",
                "bank-alert.example",
            ][rng.gen_range(0..4)];
            (
                Mailer::Spammer,
                person(rng, Some(domain)),
                vec![owner.clone()],
            )
        }
    };
    let mut lang = Lang::pick(rng);
    let mut quote = None;
    let mut references = Vec::new();
    let mut parent = None;
    let mut forward = false;
    let reply_p = match kind {
        Kind::Personal => 0.45,
        Kind::Sent | Kind::Draft => 0.6,
        Kind::List(_) => 0.65,
        Kind::Invite => 0.1,
        _ => 0.0,
    };
    let list_idx = match kind {
        Kind::List(i) => Some(i),
        _ => None,
    };
    let mut from = from;
    let mut to = to;
    let mut subj;
    let candidates: Vec<usize> = st
        .threads
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, t)| t.list == list_idx)
        .map(|(i, _)| i)
        .take(12)
        .collect();
    if rng.gen_bool(reply_p) {
        forward = matches!(kind, Kind::Personal | Kind::Sent) && rng.gen_bool(0.1);
        let (base, ids, last_from, last_to, last_date, lines, tl, last_subject) =
            match candidates.choose(rng) {
                Some(&i) => {
                    parent = Some(i);
                    let t = &st.threads[i];
                    (
                        t.base.clone(),
                        t.ids.clone(),
                        t.last_from.clone(),
                        t.last_to.clone(),
                        t.last_date,
                        t.last_lines.clone(),
                        t.lang,
                        t.last_subject.clone(),
                    )
                }
                None => {
                    // No earlier message (stateless use): invent a plausible parent.
                    let tl = Lang::pick(rng);
                    let base = subject(rng, tl);
                    let n = rng.gen_range(1..5);
                    let ids = (0..n)
                        .map(|_| Mailer::pick_personal(rng).message_id(rng, "example.net", sent))
                        .collect();
                    let p = person(rng, None);
                    let len = rng.gen_range(200..1500);
                    let text = Content::generate(rng, tl, len, None, None, None, true).plain();
                    (
                        base.clone(),
                        ids,
                        p,
                        owner.clone(),
                        sent - rng.gen_range(600..400_000),
                        text.lines().map(str::to_owned).collect(),
                        tl,
                        base,
                    )
                }
            };
        lang = tl;
        // Replies go to whoever wrote last; the owner's replies go back to them.
        match kind {
            Kind::Sent | Kind::Draft => {
                to = vec![if last_from.addr == owner.addr {
                    last_to.clone()
                } else {
                    last_from.clone()
                }]
            }
            // The counterpart answers the owner; otherwise someone else on the thread chimes in.
            Kind::Personal | Kind::Invite if last_from.addr == owner.addr => from = last_to.clone(),
            Kind::Personal | Kind::Invite => {
                let other = st.contact(rng);
                if other.addr != last_from.addr {
                    from = other;
                }
            }
            _ => {}
        }
        let (attr, top, prefixed) = if forward {
            (format!("---------- Forwarded message ---------\nFrom: {} <{}>\nDate: {}\nSubject: {last_subject}\nTo: {} <{}>\n", last_from.name, last_from.addr, rfc5322(last_date, LOCAL_ZONE, true, false), last_to.name, last_to.addr), true, false)
        } else {
            attribution(mailer, &last_from, last_date, &last_subject, &last_to)
        };
        quote = Some(Quote {
            attribution: attr,
            lines: lines
                .into_iter()
                .take(if kind == Kind::List(0) { 30 } else { 60 })
                .collect(),
            top_posted: top,
            prefixed,
        });
        subj = format!("{}{base}", reply_prefix(mailer, lang, forward));
        references = ids;
        if forward {
            // A forward starts a new conversation: the owner forwards to a contact, or a
            // contact forwards something to the owner.
            references.clear();
            to = if kind == Kind::Sent {
                vec![st.contact(rng)]
            } else {
                vec![owner.clone()]
            };
        }
    } else {
        subj = match kind {
            Kind::Notification => format!(
                "[acme/{}] {} (#{})",
                ["server", "client", "infra"][rng.gen_range(0..3)],
                subject(rng, Lang::En),
                rng.gen_range(100..9999)
            ),
            Kind::Spam => [
                "Your account has been suspended!!!",
                "Félicitations ! Vous avez gagné 1 000 000 €",
                "URGENT: payment confirmation required",
                "Ваш заказ готов к отправке",
                "Limited offer: 90% off today only",
            ][rng.gen_range(0..5)]
            .to_owned(),
            Kind::Invite => format!(
                "Invitation: {} @ {}",
                subject(rng, lang),
                rfc5322(sent + 86_400 * rng.gen_range(1..14), zone, true, false)
            ),
            Kind::Newsletter => format!(
                "{} – {}",
                [
                    "Weekly picks",
                    "Our best offers",
                    "Newsletter",
                    "Don't miss this"
                ][rng.gen_range(0..4)],
                subject(rng, lang)
            ),
            _ => subject(rng, lang),
        };
    }
    if let Some(l) = list_idx.and_then(|i| LISTS[i].prefix) {
        let (pre, rest) = split_reply_prefix(&subj);
        subj = format!("{pre}{l} {rest}");
    }
    if forward && kind == Kind::Personal {
        from = st.contact(rng);
    }
    let mut cc = Vec::new();
    if matches!(kind, Kind::Personal | Kind::Sent | Kind::Invite) && rng.gen_bool(0.25) {
        cc = (0..rng.gen_range(1..5)).map(|_| st.contact(rng)).collect();
    }
    if kind == Kind::Personal && rng.gen_bool(0.15) {
        to.extend((0..rng.gen_range(1..6)).map(|_| st.contact(rng)));
    }
    let group_to = match kind {
        Kind::Spam if rng.gen_bool(0.4) => Some("undisclosed-recipients:;".to_owned()),
        Kind::Personal if rng.gen_bool(0.03) => Some(format!(
            "Project Team: {};",
            to.iter()
                .map(|p| format!("{} <{}>", p.name, p.addr))
                .filter(|s| s.is_ascii())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        _ => None,
    };
    let domain = from
        .addr
        .rsplit('@')
        .next()
        .unwrap_or("example.com")
        .to_owned();
    let message_id = mailer.message_id(rng, &domain, sent);
    let sent_at = if matches!(kind, Kind::Sent | Kind::Draft) {
        delivered
    } else {
        sent
    };
    Draft {
        kind,
        mailer,
        from,
        to,
        cc,
        group_to,
        subject: subj,
        lang,
        sent: sent_at,
        zone,
        message_id,
        parent,
        references,
        quote,
        forward,
    }
}

/// A complete earlier message for forwarding as message/rfc822: lean trace, origin headers
/// and a simple body, of about `budget` bytes.
fn inner_message<R: Rng + ?Sized>(
    st: &State,
    rng: &mut R,
    budget: usize,
    before: i64,
    subject: &str,
) -> Vec<u8> {
    let mut sub = State {
        owner: st.owner.clone(),
        site: st.site.clone(),
        own_mailer: st.own_mailer,
        signature: String::new(),
        contacts: st.contacts.clone(),
        posters: Vec::new(),
        threads: VecDeque::new(),
        clock: before - rng.gen_range(3_600..2_000_000),
        mean_gap: 1.0,
        scale: 1.0,
    };
    let clock = sub.clock;
    let mut d = draft(&mut sub, rng, Kind::Personal, clock);
    d.subject = subject.to_owned();
    let mut head = String::new();
    let from_domain = d
        .from
        .addr
        .rsplit('@')
        .next()
        .unwrap_or("example.com")
        .to_owned();
    let t = Transit {
        owner: &sub.owner.addr,
        envelope_from: &d.from.addr,
        from_domain: &from_domain,
        mailer: d.mailer,
        sent: d.sent,
        delivered: sub.clock,
        sender_zone: d.zone,
        list: None,
        spam: false,
        lean: true,
    };
    head.push_str(&trace(rng, &sub.site, &t).0.buf);
    head.push_str(&origin_headers(rng, &sub, &d, None).buf);
    let shape = Shape {
        kind: Kind::Personal,
        mailer: d.mailer,
        lang: d.lang,
        budget: budget.saturating_sub(head.len()),
        list: None,
        from: &d.from,
        to: d.to.first().unwrap_or(&sub.owner),
        owner: &sub.owner,
        sent: d.sent,
        subject: &d.subject,
    };
    let (part, _) = shape_body(rng, &shape, None, None, "");
    let mut out = head.into_bytes();
    out.extend_from_slice(part.headers.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(&part.body);
    out
}

fn remember(st: &mut State, d: &Draft, list: Option<&ListDef>, plain: String) {
    if matches!(
        d.kind,
        Kind::Spam | Kind::Newsletter | Kind::Notification | Kind::Draft
    ) {
        return;
    }
    let lines: Vec<String> = plain.lines().take(40).map(str::to_owned).collect();
    let list_idx = list.and_then(|l| LISTS.iter().position(|x| x.local == l.local));
    let base = strip_decorations(&d.subject, list);
    let last_to = d.to.first().cloned().unwrap_or_else(|| st.owner.clone());
    match d.parent {
        Some(i) if i < st.threads.len() && !d.forward => {
            let t = &mut st.threads[i];
            t.ids.push(d.message_id.clone());
            t.last_from = d.from.clone();
            t.last_to = last_to;
            t.last_date = d.sent;
            t.last_lines = lines;
            t.last_subject = d.subject.clone();
        }
        _ => {
            let mut ids = d.references.clone();
            ids.push(d.message_id.clone());
            st.threads.push_back(Thread {
                base,
                ids,
                last_from: d.from.clone(),
                last_to,
                last_date: d.sent,
                last_lines: lines,
                lang: d.lang,
                list: list_idx,
                last_subject: d.subject.clone(),
            });
            if st.threads.len() > 64 {
                st.threads.pop_front();
            }
        }
    }
}

fn strip_decorations(subject: &str, list: Option<&ListDef>) -> String {
    let mut s = subject;
    loop {
        let before = s;
        for p in ["Re: ", "RE: ", "AW: ", "Fwd: ", "FW: ", "WG: "] {
            s = s.strip_prefix(p).unwrap_or(s);
        }
        if let Some(pre) = list.and_then(|l| l.prefix) {
            s = s.strip_prefix(pre).map(str::trim_start).unwrap_or(s);
        }
        if s == before {
            return s.to_owned();
        }
    }
}
