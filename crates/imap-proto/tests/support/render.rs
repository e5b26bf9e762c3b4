//! Renders a typed command (our model) to wire bytes, for the
//! differential tests.

use maildex_imap_proto::encode::{astring, string};
use maildex_imap_proto::*;

fn seq(out: &mut Vec<u8>, s: &SequenceSet) {
    out.extend_from_slice(s.to_string().as_bytes());
}

fn date(out: &mut Vec<u8>, d: &Date) {
    out.extend_from_slice(d.to_string().as_bytes());
}

fn key(out: &mut Vec<u8>, k: &SearchKey) {
    use SearchKey as K;
    let w = |out: &mut Vec<u8>, s: &str| out.extend_from_slice(s.as_bytes());
    match k {
        K::All => w(out, "ALL"),
        K::Answered => w(out, "ANSWERED"),
        K::Deleted => w(out, "DELETED"),
        K::Draft => w(out, "DRAFT"),
        K::Flagged => w(out, "FLAGGED"),
        K::New => w(out, "NEW"),
        K::Old => w(out, "OLD"),
        K::Recent => w(out, "RECENT"),
        K::Seen => w(out, "SEEN"),
        K::Unanswered => w(out, "UNANSWERED"),
        K::Undeleted => w(out, "UNDELETED"),
        K::Undraft => w(out, "UNDRAFT"),
        K::Unflagged => w(out, "UNFLAGGED"),
        K::Unseen => w(out, "UNSEEN"),
        K::Bcc(s) | K::Body(s) | K::Cc(s) | K::From(s) | K::Subject(s) | K::Text(s) | K::To(s) => {
            let name = match k {
                K::Bcc(_) => "BCC ",
                K::Body(_) => "BODY ",
                K::Cc(_) => "CC ",
                K::From(_) => "FROM ",
                K::Subject(_) => "SUBJECT ",
                K::Text(_) => "TEXT ",
                _ => "TO ",
            };
            w(out, name);
            astring(out, s);
        }
        K::Header(n, v) => {
            w(out, "HEADER ");
            astring(out, n);
            out.push(b' ');
            astring(out, v);
        }
        K::Before(d)
        | K::On(d)
        | K::Since(d)
        | K::SentBefore(d)
        | K::SentOn(d)
        | K::SentSince(d) => {
            let name = match k {
                K::Before(_) => "BEFORE ",
                K::On(_) => "ON ",
                K::Since(_) => "SINCE ",
                K::SentBefore(_) => "SENTBEFORE ",
                K::SentOn(_) => "SENTON ",
                _ => "SENTSINCE ",
            };
            w(out, name);
            date(out, d);
        }
        K::Keyword(s) => w(out, &format!("KEYWORD {s}")),
        K::Unkeyword(s) => w(out, &format!("UNKEYWORD {s}")),
        K::Larger(n) => w(out, &format!("LARGER {n}")),
        K::Smaller(n) => w(out, &format!("SMALLER {n}")),
        K::Older(n) => w(out, &format!("OLDER {n}")),
        K::Younger(n) => w(out, &format!("YOUNGER {n}")),
        K::ModSeq(n) => w(out, &format!("MODSEQ {n}")),
        K::Uid(s) => {
            w(out, "UID ");
            seq(out, s);
        }
        K::SequenceSet(s) => seq(out, s),
        K::Not(k) => {
            w(out, "NOT ");
            key(out, k);
        }
        K::Or(a, b) => {
            w(out, "OR ");
            key(out, a);
            out.push(b' ');
            key(out, b);
        }
        K::And(ks) => {
            out.push(b'(');
            keys(out, ks);
            out.push(b')');
        }
    }
}

fn keys(out: &mut Vec<u8>, ks: &[SearchKey]) {
    for (i, k) in ks.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        key(out, k);
    }
}

fn section(out: &mut Vec<u8>, s: &Section) {
    out.push(b'[');
    let part: Vec<String> = s.part.iter().map(u32::to_string).collect();
    out.extend_from_slice(part.join(".").as_bytes());
    if let Some(t) = &s.text {
        if !s.part.is_empty() {
            out.push(b'.');
        }
        let names = |out: &mut Vec<u8>, w: &str, ns: &[String]| {
            out.extend_from_slice(w.as_bytes());
            out.extend_from_slice(b" (");
            out.extend_from_slice(ns.join(" ").as_bytes());
            out.push(b')');
        };
        match t {
            SectionText::Header => out.extend_from_slice(b"HEADER"),
            SectionText::Text => out.extend_from_slice(b"TEXT"),
            SectionText::Mime => out.extend_from_slice(b"MIME"),
            SectionText::HeaderFields(ns) => names(out, "HEADER.FIELDS", ns),
            SectionText::HeaderFieldsNot(ns) => names(out, "HEADER.FIELDS.NOT", ns),
        }
    }
    out.push(b']');
}

fn partial(out: &mut Vec<u8>, p: &Option<Partial>) {
    if let Some(p) = p {
        out.extend_from_slice(format!("<{}.{}>", p.origin, p.count).as_bytes());
    }
}

fn item(out: &mut Vec<u8>, i: &FetchItem) {
    let w = |out: &mut Vec<u8>, s: &str| out.extend_from_slice(s.as_bytes());
    match i {
        FetchItem::Envelope => w(out, "ENVELOPE"),
        FetchItem::Flags => w(out, "FLAGS"),
        FetchItem::InternalDate => w(out, "INTERNALDATE"),
        FetchItem::Rfc822 => w(out, "RFC822"),
        FetchItem::Rfc822Header => w(out, "RFC822.HEADER"),
        FetchItem::Rfc822Size => w(out, "RFC822.SIZE"),
        FetchItem::Rfc822Text => w(out, "RFC822.TEXT"),
        FetchItem::Body => w(out, "BODY"),
        FetchItem::BodyStructure => w(out, "BODYSTRUCTURE"),
        FetchItem::Uid => w(out, "UID"),
        FetchItem::ModSeq => w(out, "MODSEQ"),
        FetchItem::BodySection {
            section: s,
            partial: p,
            peek,
        } => {
            w(out, if *peek { "BODY.PEEK" } else { "BODY" });
            section(out, s);
            partial(out, p);
        }
        FetchItem::Binary {
            part,
            partial: p,
            peek,
        } => {
            w(out, if *peek { "BINARY.PEEK[" } else { "BINARY[" });
            let part: Vec<String> = part.iter().map(u32::to_string).collect();
            w(out, &part.join("."));
            out.push(b']');
            partial(out, p);
        }
        FetchItem::BinarySize { part } => {
            let part: Vec<String> = part.iter().map(u32::to_string).collect();
            w(out, &format!("BINARY.SIZE[{}]", part.join(".")));
        }
    }
}

/// `tag SP command CRLF` for a model command.
pub fn render(tag: &str, c: &Command) -> Vec<u8> {
    let mut o = format!("{tag} ").into_bytes();
    let sp = |o: &mut Vec<u8>| o.push(b' ');
    match c {
        Command::Login { username, password } => {
            o.extend_from_slice(b"LOGIN ");
            astring(&mut o, username);
            sp(&mut o);
            astring(&mut o, password);
        }
        Command::Authenticate {
            mechanism,
            initial_response,
        } => {
            o.extend_from_slice(format!("AUTHENTICATE {mechanism}").as_bytes());
            if let Some(r) = initial_response {
                sp(&mut o);
                o.extend_from_slice(if r.is_empty() { b"=" } else { r });
            }
        }
        Command::Select { mailbox, params } | Command::Examine { mailbox, params } => {
            o.extend_from_slice(c.name().as_bytes());
            sp(&mut o);
            encode::mailbox(&mut o, mailbox);
            if params.condstore {
                o.extend_from_slice(b" (CONDSTORE)");
            }
        }
        Command::Create { mailbox, .. }
        | Command::Delete { mailbox }
        | Command::Subscribe { mailbox }
        | Command::Unsubscribe { mailbox } => {
            o.extend_from_slice(c.name().as_bytes());
            sp(&mut o);
            encode::mailbox(&mut o, mailbox);
        }
        Command::Rename { from, to } => {
            o.extend_from_slice(b"RENAME ");
            encode::mailbox(&mut o, from);
            sp(&mut o);
            encode::mailbox(&mut o, to);
        }
        Command::List(l) => {
            o.extend_from_slice(b"LIST ");
            astring(&mut o, &l.reference);
            sp(&mut o);
            string(&mut o, &l.patterns[0]);
        }
        Command::Lsub { reference, pattern } => {
            o.extend_from_slice(b"LSUB ");
            astring(&mut o, reference);
            sp(&mut o);
            string(&mut o, pattern);
        }
        Command::Status { mailbox, items } => {
            o.extend_from_slice(b"STATUS ");
            encode::mailbox(&mut o, mailbox);
            let names: Vec<&str> = items.iter().map(|i| i.as_str()).collect();
            o.extend_from_slice(format!(" ({})", names.join(" ")).as_bytes());
        }
        Command::Expunge { uids: Some(s) } => {
            o.extend_from_slice(b"UID EXPUNGE ");
            seq(&mut o, s);
        }
        Command::Search { args, .. } => {
            o.extend_from_slice(c.name().as_bytes());
            if let Some(cs) = &args.charset {
                o.extend_from_slice(format!(" CHARSET {cs}").as_bytes());
            }
            sp(&mut o);
            keys(&mut o, &args.keys);
        }
        Command::Sort { args, .. } => {
            o.extend_from_slice(c.name().as_bytes());
            o.extend_from_slice(b" (");
            for (i, cr) in args.criteria.iter().enumerate() {
                if i > 0 {
                    sp(&mut o);
                }
                if cr.reverse {
                    o.extend_from_slice(b"REVERSE ");
                }
                o.extend_from_slice(cr.key.as_str().as_bytes());
            }
            o.extend_from_slice(format!(") {} ", args.charset).as_bytes());
            keys(&mut o, &args.keys);
        }
        Command::Thread { args, .. } => {
            o.extend_from_slice(c.name().as_bytes());
            o.extend_from_slice(
                format!(" {} {} ", args.algorithm.as_str(), args.charset).as_bytes(),
            );
            keys(&mut o, &args.keys);
        }
        Command::Fetch { set, args, .. } => {
            o.extend_from_slice(c.name().as_bytes());
            sp(&mut o);
            seq(&mut o, set);
            sp(&mut o);
            match args.macro_used {
                Some(FetchMacro::All) => o.extend_from_slice(b"ALL"),
                Some(FetchMacro::Fast) => o.extend_from_slice(b"FAST"),
                Some(FetchMacro::Full) => o.extend_from_slice(b"FULL"),
                None => {
                    o.push(b'(');
                    for (i, it) in args.items.iter().enumerate() {
                        if i > 0 {
                            sp(&mut o);
                        }
                        item(&mut o, it);
                    }
                    o.push(b')');
                }
            }
            if let Some(n) = args.changed_since {
                o.extend_from_slice(format!(" (CHANGEDSINCE {n})").as_bytes());
            }
        }
        Command::Store { set, args, .. } => {
            o.extend_from_slice(c.name().as_bytes());
            sp(&mut o);
            seq(&mut o, set);
            if let Some(n) = args.unchanged_since {
                o.extend_from_slice(format!(" (UNCHANGEDSINCE {n})").as_bytes());
            }
            let mode = match args.mode {
                StoreMode::Add => "+",
                StoreMode::Remove => "-",
                StoreMode::Replace => "",
            };
            let silent = if args.silent { ".SILENT" } else { "" };
            o.extend_from_slice(format!(" {mode}FLAGS{silent} ").as_bytes());
            encode::flag_list(&mut o, &args.flags, false);
        }
        Command::Copy { set, mailbox, .. } | Command::Move { set, mailbox, .. } => {
            o.extend_from_slice(c.name().as_bytes());
            sp(&mut o);
            seq(&mut o, set);
            sp(&mut o);
            encode::mailbox(&mut o, mailbox);
        }
        Command::GetQuota { root } => {
            o.extend_from_slice(b"GETQUOTA ");
            encode::astring(&mut o, root);
        }
        Command::GetQuotaRoot { mailbox } => {
            o.extend_from_slice(b"GETQUOTAROOT ");
            encode::mailbox(&mut o, mailbox);
        }
        Command::SetQuota { root, limits } => {
            o.extend_from_slice(b"SETQUOTA ");
            encode::astring(&mut o, root);
            o.extend_from_slice(b" (");
            let items: Vec<String> = limits.iter().map(|(r, n)| format!("{r} {n}")).collect();
            o.extend_from_slice(items.join(" ").as_bytes());
            o.push(b')');
        }
        Command::Enable { capabilities } => {
            o.extend_from_slice(format!("ENABLE {}", capabilities.join(" ")).as_bytes());
        }
        Command::Id { params } => {
            o.extend_from_slice(b"ID ");
            match params {
                None => o.extend_from_slice(b"NIL"),
                Some(ps) => {
                    o.push(b'(');
                    for (i, (k, v)) in ps.iter().enumerate() {
                        if i > 0 {
                            sp(&mut o);
                        }
                        string(&mut o, k);
                        sp(&mut o);
                        encode::nstring(&mut o, v.as_deref());
                    }
                    o.push(b')');
                }
            }
        }
        other => o.extend_from_slice(other.name().as_bytes()),
    }
    o.extend_from_slice(b"\r\n");
    o
}
