//! Rendering FETCH items from the index alone (RFC 3501 §7.4.2): everything except bytes
//! of the message file. Synchronous and owning what it needs, so that a listing's batches
//! are rendered on the blocking thread that read them while the session task writes the
//! previous batch to the socket (rendering was two thirds of a listing's CPU, all of it on
//! the session's task before).

use std::collections::HashSet;
use std::io::Write as _;
use std::ops::Range;

use maildex_imap_proto::{encode, FetchItem, Partial, Section, SectionText};
use maildex_store::records::{Cached, HOT_HEADERS};

use super::body::partial_window;
use super::{untagged, CmdError};
use maildex_store::section::{header_block, header_section, locate, Fields, Located, Want};
use maildex_store::{Loaded, Uid};

fn is_hot(names: &[String]) -> bool {
    names.iter().all(|n| {
        HOT_HEADERS
            .iter()
            .any(|h| h.eq_ignore_ascii_case(n.as_bytes()))
    })
}

/// Whether a section is answered from the hot header fields alone.
pub(super) fn hot_section(section: &Section) -> bool {
    match &section.text {
        Some(SectionText::HeaderFields(names)) => section.part.is_empty() && is_hot(names),
        _ => false,
    }
}

/// What is worked out once per command for each item, not once per message.
pub(super) struct Plan {
    /// A section answered from the hot header fields ([`hot_section`]).
    pub hot: bool,
    /// `BODY[...]<o> `, `RFC822 `... of a section item, echoed before each value.
    pub label: Vec<u8>,
    /// The section an RFC822* item stands for (RFC 3501 §6.4.5: RFC822 is BODY[],
    /// RFC822.HEADER is BODY.PEEK[HEADER], RFC822.TEXT is BODY[TEXT]).
    pub section: Option<Section>,
}

/// The plan of an item that needs none (the FLAGS added after an implicit `\Seen`).
pub(super) static NO_PLAN: Plan = Plan {
    hot: false,
    label: Vec::new(),
    section: None,
};

impl Plan {
    pub(super) fn of(item: &FetchItem) -> Plan {
        let fixed = |label: &[u8], text: Option<SectionText>| Plan {
            hot: false,
            label: label.to_vec(),
            section: Some(Section { part: vec![], text }),
        };
        match item {
            FetchItem::BodySection {
                section, partial, ..
            } => {
                let mut label = Vec::new();
                section_label(&mut label, section, *partial);
                label.push(b' ');
                Plan {
                    hot: hot_section(section),
                    label,
                    section: None,
                }
            }
            FetchItem::Rfc822 => fixed(b"RFC822 ", None),
            FetchItem::Rfc822Header => fixed(b"RFC822.HEADER ", Some(SectionText::Header)),
            FetchItem::Rfc822Text => fixed(b"RFC822.TEXT ", Some(SectionText::Text)),
            _ => Plan {
                hot: false,
                label: Vec::new(),
                section: None,
            },
        }
    }
}

/// `BODY[1.2.HEADER.FIELDS (A B)]<0>`.
pub(super) fn section_label(out: &mut Vec<u8>, section: &Section, partial: Option<Partial>) {
    out.extend_from_slice(b"BODY[");
    let mut first = true;
    for n in &section.part {
        if !first {
            out.push(b'.');
        }
        first = false;
        let _ = write!(out, "{n}");
    }
    if let Some(text) = &section.text {
        if !first {
            out.push(b'.');
        }
        let (word, names): (&[u8], Option<&Vec<String>>) = match text {
            SectionText::Header => (b"HEADER", None),
            SectionText::HeaderFields(n) => (b"HEADER.FIELDS", Some(n)),
            SectionText::HeaderFieldsNot(n) => (b"HEADER.FIELDS.NOT", Some(n)),
            SectionText::Text => (b"TEXT", None),
            SectionText::Mime => (b"MIME", None),
        };
        out.extend_from_slice(word);
        if let Some(names) = names {
            out.extend_from_slice(b" (");
            for (i, name) in names.iter().enumerate() {
                if i > 0 {
                    out.push(b' ');
                }
                encode::astring(out, name.as_bytes());
            }
            out.push(b')');
        }
    }
    out.push(b']');
    if let Some(p) = partial {
        let _ = write!(out, "<{}>", p.origin);
    }
}

/// What a section wants from the part tree.
pub(super) fn want_of(section: &Section) -> Want {
    match &section.text {
        None => Want::All,
        Some(
            SectionText::Header | SectionText::HeaderFields(_) | SectionText::HeaderFieldsNot(_),
        ) => Want::Header,
        Some(SectionText::Text) => Want::Text,
        Some(SectionText::Mime) => Want::Mime,
    }
}

/// Writes `data` (already CRLF) cut to `partial` as a literal.
fn literal_cut(out: &mut Vec<u8>, data: &[u8], partial: Option<Partial>) {
    let (skip, take) = partial_window(data.len() as u64, partial);
    let (skip, take) = (skip as usize, take as usize);
    encode::literal(out, &data[skip..skip + take]);
}

/// Bytes of `* n FETCH` lines a blocking thread renders before it hands them to the
/// session: the rest of its batch is rendered after, while these are written. With two
/// batches in flight a session holds a few MiB of unsent output at most, whatever the
/// items (a batch of 512 messages with thousands of header items was gigabytes).
pub(super) const RENDER_BUDGET: usize = 1 << 20;

/// Messages of a batch with what the index gave for each (`None`: expunged meanwhile).
pub(super) type Messages = Vec<((u32, Uid), Option<Loaded>)>;

/// What a blocking thread rendered of a batch.
pub(super) struct Rendered {
    /// `* n FETCH` lines, about [`RENDER_BUDGET`] bytes at most (one message more).
    pub bytes: Vec<u8>,
    /// Whether a message was gone (expunged since the view was made).
    pub gone: bool,
    /// The messages not rendered yet, in order.
    pub rest: Messages,
}

/// What rendering needs besides the message: the same for every message of one command.
pub(super) struct Render {
    /// The selected mailbox's name, for error messages.
    pub name: String,
    /// The items asked for (with UID added for UID FETCH).
    pub items: Vec<FetchItem>,
    /// Their plans, index by index.
    pub plan: Vec<Plan>,
    /// The mailbox's keyword names (bit i of a state's keywords is `keywords[i]`).
    pub keywords: Vec<String>,
    /// UIDs `\Recent` in this session.
    pub recent: Vec<Range<Uid>>,
    /// UIDs this FETCH just set `\Seen` on: their FLAGS go out even when not asked for
    /// (RFC 3501 §6.4.5).
    pub seen_now: HashSet<Uid>,
}

impl Render {
    /// The cached record of a message, which every non-state item needs.
    pub(super) fn cached<'m>(&self, msg: &'m Loaded, uid: Uid) -> Result<&'m Cached, CmdError> {
        msg.cached.as_deref().ok_or_else(|| {
            CmdError::server(format!(
                "mailbox {:?} uid {uid}: no cached record",
                self.name
            ))
        })
    }

    /// Whether FLAGS is sent for `uid` although not asked for.
    pub(super) fn flags_too(&self, uid: Uid) -> bool {
        self.seen_now.contains(&uid) && !self.items.contains(&FetchItem::Flags)
    }

    /// Whether `uid` is `\Recent` in this session.
    pub(super) fn is_recent(&self, uid: Uid) -> bool {
        self.recent.iter().any(|r| r.contains(&uid))
    }

    /// Writes one item from the index. Returns false, having written nothing, when the
    /// item needs the message file (body bytes, BINARY).
    pub(super) fn item(
        &self,
        out: &mut Vec<u8>,
        (item, plan): (&FetchItem, &Plan),
        uid: Uid,
        msg: &Loaded,
    ) -> Result<bool, CmdError> {
        let st = &msg.state;
        match item {
            FetchItem::Uid => {
                let _ = write!(out, "UID {uid}");
            }
            FetchItem::Flags => {
                out.extend_from_slice(b"FLAGS ");
                let recent = self.is_recent(uid);
                untagged::flag_list(
                    out,
                    untagged::flags_of(st.flags, st.keywords, &self.keywords, recent),
                );
            }
            FetchItem::InternalDate => {
                out.extend_from_slice(b"INTERNALDATE ");
                let dt = maildex_imap_proto::DateTime::from_unix(st.internal_date, 0)
                    .or_else(|| maildex_imap_proto::DateTime::from_unix(0, 0))
                    .ok_or_else(|| CmdError::server("date out of range"))?;
                encode::date_time(out, &dt);
            }
            FetchItem::Rfc822Size => {
                let _ = write!(out, "RFC822.SIZE {}", st.vsize);
            }
            FetchItem::ModSeq => {
                let _ = write!(out, "MODSEQ ({})", st.modseq);
            }
            FetchItem::Envelope => {
                out.extend_from_slice(b"ENVELOPE ");
                out.extend_from_slice(&self.cached(msg, uid)?.envelope);
            }
            FetchItem::Body => {
                out.extend_from_slice(b"BODY ");
                out.extend_from_slice(&self.cached(msg, uid)?.body);
            }
            FetchItem::BodyStructure => {
                out.extend_from_slice(b"BODYSTRUCTURE ");
                out.extend_from_slice(&self.cached(msg, uid)?.body_structure);
            }
            FetchItem::BodySection {
                section, partial, ..
            } => return self.section(out, plan, section, *partial, uid, msg),
            FetchItem::Rfc822 | FetchItem::Rfc822Header | FetchItem::Rfc822Text => {
                let Some(section) = &plan.section else {
                    return Err(CmdError::server("RFC822 item without its section"));
                };
                return self.section(out, plan, section, None, uid, msg);
            }
            FetchItem::Binary { .. } | FetchItem::BinarySize { .. } => return Ok(false),
        }
        Ok(true)
    }

    /// Writes a section's label and value when the index has it: hot header fields, a
    /// header block, or `""` for a part that does not exist (RFC 3501 §6.4.5). False, with
    /// nothing written, for bytes of the file.
    fn section(
        &self,
        out: &mut Vec<u8>,
        plan: &Plan,
        section: &Section,
        partial: Option<Partial>,
        uid: Uid,
        msg: &Loaded,
    ) -> Result<bool, CmdError> {
        let cached = self.cached(msg, uid)?;
        // HEADER.FIELDS of the message itself from the hot fields, when they cover the names
        if let (Some(SectionText::HeaderFields(names)), true) = (&section.text, plan.hot) {
            out.extend_from_slice(&plan.label);
            let mut data = Vec::with_capacity(cached.hot_headers.len());
            header_section(&cached.hot_headers, Fields::Only(names), false, &mut data);
            literal_cut(out, &data, partial);
            return Ok(true);
        }
        let root = &cached.parts;
        match locate(root, &section.part, want_of(section)) {
            Located::File { .. } => return Ok(false),
            Located::Missing => {
                out.extend_from_slice(&plan.label);
                out.extend_from_slice(b"\"\"");
            }
            Located::HeaderBlock { block, .. } => {
                let blocks = msg.headers.as_deref().unwrap_or(&[]);
                let Some(raw) = header_block(root, blocks, block) else {
                    return Err(CmdError::server("header block missing from the index"));
                };
                let mut data = Vec::with_capacity(raw.len() + raw.len() / 16);
                let fields = match &section.text {
                    Some(SectionText::HeaderFields(names)) => Fields::Only(names),
                    Some(SectionText::HeaderFieldsNot(names)) => Fields::Not(names),
                    _ => Fields::All,
                };
                header_section(raw, fields, !section.part.is_empty(), &mut data);
                out.extend_from_slice(&plan.label);
                literal_cut(out, &data, partial);
            }
        }
        Ok(true)
    }

    /// Writes `* seq FETCH (...)\r\n` of a message none of whose items needs the file.
    fn message(
        &self,
        out: &mut Vec<u8>,
        (seq, uid): (u32, Uid),
        msg: &Loaded,
    ) -> Result<(), CmdError> {
        untagged::fetch_start(out, seq);
        let extra = self.flags_too(uid).then_some(&FetchItem::Flags);
        let all = self.items.iter().zip(&self.plan);
        for (i, item) in all.chain(extra.map(|f| (f, &NO_PLAN))).enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            if !self.item(out, item, uid, msg)? {
                return Err(CmdError::server("an index-only FETCH item needs the file"));
            }
        }
        untagged::fetch_end(out);
        Ok(())
    }

    /// Renders messages none of whose items needs the file, until [`RENDER_BUDGET`]
    /// bytes; what is left is handed back to be rendered next.
    /// `out` is a buffer an earlier batch of the same command wrote out (cleared), or a
    /// new one.
    pub(super) fn batch(&self, messages: Messages, mut out: Vec<u8>) -> Result<Rendered, CmdError> {
        out.clear();
        let mut gone = false;
        let mut messages = messages.into_iter();
        for ((seq, uid), msg) in messages.by_ref() {
            match msg {
                Some(msg) => self.message(&mut out, (seq, uid), &msg)?,
                None => gone = true,
            }
            if out.len() >= RENDER_BUDGET {
                break;
            }
        }
        Ok(Rendered {
            bytes: out,
            gone,
            rest: messages.collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_echo_the_section() {
        let mut out = Vec::new();
        let s = Section {
            part: vec![1, 2],
            text: Some(SectionText::HeaderFields(vec!["From".into(), "X-A".into()])),
        };
        section_label(
            &mut out,
            &s,
            Some(Partial {
                origin: 5,
                count: 10,
            }),
        );
        assert_eq!(out, b"BODY[1.2.HEADER.FIELDS (From X-A)]<5>");
        out.clear();
        section_label(
            &mut out,
            &Section {
                part: vec![],
                text: None,
            },
            None,
        );
        assert_eq!(out, b"BODY[]");
    }
}
