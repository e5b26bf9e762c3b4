//! FETCH and UID FETCH (RFC 3501 §6.4.5, §7.4.2). Everything a listing asks for comes from
//! the index (flags, dates, sizes, ENVELOPE, BODYSTRUCTURE, header fields, MIME headers);
//! only body bytes open the message file, streamed in chunks. Index reads happen in short
//! batches, never across a socket write (the design brief's rule for LMDB readers).

use std::collections::HashSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use maildex_index::{Cached, CachedFields, MessageState, HOT_HEADERS};
use maildex_maildir::Flags;
use maildex_proto::{
    encode, FetchArgs, FetchItem, Partial, ResponseCode, Section, SectionText, SequenceSet,
};
use maildex_store::{FlagOp, UserStore};

use super::binary::locate_binary;
use super::body::{message_path, partial_window};
use super::messages::{load_batch, resolve, Loaded};
use super::selected::write_flags;
use super::{blocking, CmdError, Done, Session, State, FLUSH_AT};
use crate::section::{header_block, locate, Located, Want};

/// Messages read from the index per read transaction. Each batch is one hop to a blocking
/// thread and back; 512 (about 1-2 ms of decoding, a few hundred kB of listing data) made
/// `FETCH 1:* ENVELOPE` of 10,000 messages a quarter faster than 128.
const BATCH: usize = 512;

/// What the items need from the index.
#[derive(Default, Clone, Copy)]
struct Needs {
    fields: CachedFields,
    headers: bool,
}

fn is_hot(names: &[String]) -> bool {
    names.iter().all(|n| {
        HOT_HEADERS
            .iter()
            .any(|h| h.eq_ignore_ascii_case(n.as_bytes()))
    })
}

/// Whether a section is answered from the hot header fields alone.
fn hot_section(section: &Section) -> bool {
    match &section.text {
        Some(SectionText::HeaderFields(names)) => section.part.is_empty() && is_hot(names),
        _ => false,
    }
}

fn needs(items: &[FetchItem]) -> Needs {
    let mut n = Needs::default();
    for item in items {
        let f = &mut n.fields;
        match item {
            FetchItem::Flags
            | FetchItem::Uid
            | FetchItem::InternalDate
            | FetchItem::Rfc822Size
            | FetchItem::ModSeq => {}
            FetchItem::Envelope => f.envelope = true,
            FetchItem::Body => f.body = true,
            FetchItem::BodyStructure => f.body_structure = true,
            FetchItem::Rfc822 | FetchItem::Rfc822Text => f.parts = true,
            FetchItem::Rfc822Header => {
                f.parts = true;
                n.headers = true;
            }
            FetchItem::BodySection { section, .. } if hot_section(section) => {
                f.hot_headers = true;
            }
            FetchItem::BodySection { section, .. } => {
                f.parts = true;
                n.headers |= matches!(
                    section.text,
                    Some(
                        SectionText::Header
                            | SectionText::HeaderFields(_)
                            | SectionText::HeaderFieldsNot(_)
                            | SectionText::Mime
                    )
                );
            }
            FetchItem::Binary { part, .. } | FetchItem::BinarySize { part } => {
                f.parts = true;
                n.headers |= !part.is_empty();
            }
        }
    }
    n
}

/// What is worked out once per command for each item, not once per message.
struct Plan {
    /// A section answered from the hot header fields ([`hot_section`]).
    hot: bool,
    /// `BODY[...]<o> ` of a section item, echoed before each value.
    label: Vec<u8>,
}

/// The plan of an item that needs none (the FLAGS added after an implicit `\Seen`).
static NO_PLAN: Plan = Plan {
    hot: false,
    label: Vec::new(),
};

impl Plan {
    fn of(item: &FetchItem) -> Plan {
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
                }
            }
            _ => Plan {
                hot: false,
                label: Vec::new(),
            },
        }
    }
}

/// Whether an item sets `\Seen` (RFC 3501 §6.4.5: BODY[...] without .PEEK, RFC822, RFC822.TEXT).
fn sets_seen(item: &FetchItem) -> bool {
    matches!(
        item,
        FetchItem::Rfc822
            | FetchItem::Rfc822Text
            | FetchItem::BodySection { peek: false, .. }
            | FetchItem::Binary { peek: false, .. }
    )
}

/// Whether an item reads the message file.
fn reads_file(item: &FetchItem) -> bool {
    match item {
        FetchItem::Rfc822
        | FetchItem::Rfc822Text
        | FetchItem::Binary { .. }
        | FetchItem::BinarySize { .. } => true,
        FetchItem::BodySection { section, .. } => {
            matches!(section.text, None | Some(SectionText::Text))
        }
        _ => false,
    }
}

/// `BODY[1.2.HEADER.FIELDS (A B)]<0>`.
fn section_label(out: &mut Vec<u8>, section: &Section, partial: Option<Partial>) {
    out.extend_from_slice(b"BODY[");
    let mut first = true;
    for n in &section.part {
        if !first {
            out.push(b'.');
        }
        first = false;
        out.extend_from_slice(n.to_string().as_bytes());
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
        out.extend_from_slice(format!("<{}>", p.origin).as_bytes());
    }
}

/// `1.2.3`.
fn write_part_path(out: &mut Vec<u8>, part: &[u32]) {
    for (i, n) in part.iter().enumerate() {
        if i > 0 {
            out.push(b'.');
        }
        out.extend_from_slice(n.to_string().as_bytes());
    }
}

/// Writes `data` (already CRLF) cut to `partial` as a literal.
fn literal_cut(out: &mut Vec<u8>, data: &[u8], partial: Option<Partial>) {
    let (skip, take) = partial_window(data.len() as u64, partial);
    let (skip, take) = (skip as usize, take as usize);
    encode::literal(out, &data[skip..skip + take]);
}

fn cached_of<'m>(msg: &'m Loaded, name: &str, uid: u32) -> Result<&'m Cached, CmdError> {
    msg.cached
        .as_ref()
        .ok_or_else(|| CmdError::server(format!("mailbox {name:?} uid {uid}: no cached record")))
}

fn load(
    store: &UserStore,
    id: u32,
    uids: &[u32],
    n: Needs,
) -> Result<Vec<Option<Loaded>>, CmdError> {
    Ok(store
        .index()
        .read(|r| load_batch(r, id, uids, n.fields, n.headers))?)
}

impl Session {
    pub(super) async fn fetch(
        &mut self,
        uid_cmd: bool,
        set: SequenceSet,
        args: FetchArgs,
    ) -> Result<Done, CmdError> {
        let State::Selected(authed, sel) = &mut self.state else {
            return Err(CmdError::Bad("no mailbox selected".into()));
        };
        let store = Arc::clone(&authed.store);
        let targets = resolve(sel, &set, uid_cmd)?;
        let mut items = args.items;
        // RFC 3501 §6.4.8: UID FETCH always returns UID
        if uid_cmd && !items.contains(&FetchItem::Uid) {
            items.insert(0, FetchItem::Uid);
        }
        let need = needs(&items);
        let plan: Vec<Plan> = items.iter().map(Plan::of).collect();
        let (id, name, read_only) = (sel.id, sel.name.clone(), sel.read_only);
        // implicit \Seen, before anything is sent, so FLAGS in the answer are true
        let mut seen_now: HashSet<u32> = HashSet::new();
        if !read_only && items.iter().any(sets_seen) && !targets.is_empty() {
            let uids: Vec<u32> = targets.iter().map(|&(_, u)| u).collect();
            let (s, n) = (Arc::clone(&store), name.clone());
            let outcome =
                blocking(move || s.set_flags(&n, &uids, FlagOp::Add, Flags::SEEN, &[], None))
                    .await??;
            for m in outcome.messages.iter().filter(|m| m.changed) {
                seen_now.insert(m.uid);
                sel.own.insert(m.uid, m.modseq);
            }
        }
        let keywords = sel.keywords.clone();
        let recent: Vec<std::ops::Range<u32>> = sel.recent.clone();
        let mailbox_dir = store.mailbox_path(&name)?;
        let mut expunged = false;
        // the next batch is read on a blocking thread while this one is written out
        let start = |batch: &[(u32, u32)]| {
            let uids: Vec<u32> = batch.iter().map(|&(_, u)| u).collect();
            let s = Arc::clone(&store);
            tokio::task::spawn_blocking(move || load(&s, id, &uids, need))
        };
        let batches: Vec<&[(u32, u32)]> = targets.chunks(BATCH).collect();
        let mut next = batches.first().map(|b| start(b));
        for (i, batch) in batches.iter().enumerate() {
            let Some(pending) = next.take() else { break };
            let loaded = pending
                .await
                .map_err(|e| CmdError::Server(format!("blocking task failed: {e}")))??;
            next = batches.get(i + 1).map(|b| start(b));
            for (&(seq, uid), msg) in batch.iter().zip(loaded) {
                let Some(msg) = msg else {
                    expunged = true;
                    continue;
                };
                let is_recent = recent.iter().any(|r| r.contains(&uid));
                let flags_too = seen_now.contains(&uid) && !items.contains(&FetchItem::Flags);
                if !self
                    .fetch_one(
                        &store,
                        &name,
                        &mailbox_dir,
                        (seq, uid),
                        msg,
                        (&items, &plan),
                        (&keywords, is_recent, flags_too),
                    )
                    .await?
                {
                    expunged = true;
                }
                // a listing of thousands of messages goes out as it is made, not all at once
                if self.out.len() >= FLUSH_AT {
                    self.flush().await?;
                }
            }
        }
        // RFC 3501 §7.4.1: no EXPUNGE during FETCH; UID FETCH may carry them
        self.refresh(uid_cmd).await?;
        if expunged {
            Ok(Done::NoCode(
                ResponseCode::ExpungeIssued,
                "Some messages were also expunged.".into(),
            ))
        } else {
            Ok(Done::ok("Fetch completed."))
        }
    }

    /// Opens a message file, following a rename by another Maildir tool (flag change) by
    /// syncing and looking the UID up again. `None` when the message is gone.
    async fn open_message(
        &self,
        store: &Arc<UserStore>,
        name: &str,
        dir: &Path,
        uid: u32,
        st: &MessageState,
    ) -> Result<Option<(tokio::fs::File, PathBuf)>, CmdError> {
        let path = message_path(dir, st);
        match tokio::fs::File::open(&path).await {
            Ok(f) => return Ok(Some((f, path))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(CmdError::server(format!("{}: {e}", path.display()))),
        }
        let (s, n) = (Arc::clone(store), name.to_string());
        let again = blocking(move || -> Result<Option<MessageState>, CmdError> {
            s.sync_mailbox(&n)?;
            let index = s.index();
            Ok(index.read(|r| match r.mailbox_id(&n)? {
                Some(id) => r.state(id, uid),
                None => Ok(None),
            })?)
        })
        .await??;
        let Some(st) = again else { return Ok(None) };
        let path = message_path(dir, &st);
        match tokio::fs::File::open(&path).await {
            Ok(f) => Ok(Some((f, path))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(CmdError::server(format!("{}: {e}", path.display()))),
        }
    }

    /// Writes one `* n FETCH (...)`. Returns false when the message turned out to be gone.
    #[allow(clippy::too_many_arguments)]
    async fn fetch_one(
        &mut self,
        store: &Arc<UserStore>,
        name: &str,
        dir: &Path,
        (seq, uid): (u32, u32),
        msg: Loaded,
        (items, plan): (&[FetchItem], &[Plan]),
        (keywords, recent, flags_too): (&[String], bool, bool),
    ) -> Result<bool, CmdError> {
        let mut file = None;
        if items.iter().any(reads_file) {
            match self.open_message(store, name, dir, uid, &msg.state).await? {
                Some(f) => file = Some(f),
                None => return Ok(false),
            }
        }
        // the implicit \Seen was stored before this batch was read: the state has it
        let st = &msg.state;
        let _ = write!(self.out, "* {seq} FETCH (");
        let mut first = true;
        let extra = flags_too.then_some(&FetchItem::Flags);
        let all = items.iter().zip(plan);
        for (item, plan) in all.chain(extra.map(|f| (f, &NO_PLAN))) {
            if !first {
                self.out.push(b' ');
            }
            first = false;
            match item {
                FetchItem::Uid => {
                    let _ = write!(self.out, "UID {uid}");
                }
                FetchItem::Flags => {
                    self.out.extend_from_slice(b"FLAGS ");
                    write_flags(&mut self.out, st, keywords, recent);
                }
                FetchItem::InternalDate => {
                    self.out.extend_from_slice(b"INTERNALDATE ");
                    let dt = maildex_proto::DateTime::from_unix(st.internal_date, 0)
                        .or_else(|| maildex_proto::DateTime::from_unix(0, 0))
                        .ok_or_else(|| CmdError::server("date out of range"))?;
                    encode::date_time(&mut self.out, &dt);
                }
                FetchItem::Rfc822Size => {
                    let _ = write!(self.out, "RFC822.SIZE {}", st.vsize);
                }
                FetchItem::ModSeq => {
                    let _ = write!(self.out, "MODSEQ ({})", st.modseq);
                }
                FetchItem::Envelope => {
                    self.out.extend_from_slice(b"ENVELOPE ");
                    self.out
                        .extend_from_slice(&cached_of(&msg, name, uid)?.envelope);
                }
                FetchItem::Body => {
                    self.out.extend_from_slice(b"BODY ");
                    self.out
                        .extend_from_slice(&cached_of(&msg, name, uid)?.body);
                }
                FetchItem::BodyStructure => {
                    self.out.extend_from_slice(b"BODYSTRUCTURE ");
                    self.out
                        .extend_from_slice(&cached_of(&msg, name, uid)?.body_structure);
                }
                FetchItem::Rfc822Header => {
                    self.out.extend_from_slice(b"RFC822.HEADER ");
                    let section = Section {
                        part: vec![],
                        text: Some(SectionText::Header),
                    };
                    self.section(
                        &msg,
                        (&section, false),
                        None,
                        &mut file,
                        cached_of(&msg, name, uid)?,
                    )
                    .await?;
                }
                FetchItem::Rfc822Text => {
                    self.out.extend_from_slice(b"RFC822.TEXT ");
                    let section = Section {
                        part: vec![],
                        text: Some(SectionText::Text),
                    };
                    self.section(
                        &msg,
                        (&section, false),
                        None,
                        &mut file,
                        cached_of(&msg, name, uid)?,
                    )
                    .await?;
                }
                FetchItem::Rfc822 => {
                    self.out.extend_from_slice(b"RFC822 ");
                    let section = Section {
                        part: vec![],
                        text: None,
                    };
                    self.section(
                        &msg,
                        (&section, false),
                        None,
                        &mut file,
                        cached_of(&msg, name, uid)?,
                    )
                    .await?;
                }
                FetchItem::BodySection {
                    section, partial, ..
                } => {
                    self.out.extend_from_slice(&plan.label);
                    self.section(
                        &msg,
                        (section, plan.hot),
                        *partial,
                        &mut file,
                        cached_of(&msg, name, uid)?,
                    )
                    .await?;
                }
                FetchItem::Binary { part, partial, .. } => {
                    let loc = locate_binary(
                        cached_of(&msg, name, uid)?,
                        msg.headers.as_deref().unwrap_or(&[]),
                        part,
                    )?;
                    self.out.extend_from_slice(b"BINARY[");
                    write_part_path(&mut self.out, part);
                    self.out.push(b']');
                    if let Some(p) = partial {
                        self.out
                            .extend_from_slice(format!("<{}>", p.origin).as_bytes());
                    }
                    self.out.push(b' ');
                    let Some((f, path)) = file.as_mut() else {
                        return Err(CmdError::server("message file not opened"));
                    };
                    let path = path.clone();
                    self.write_binary(f, &path, &loc, *partial).await?;
                }
                FetchItem::BinarySize { part } => {
                    let loc = locate_binary(
                        cached_of(&msg, name, uid)?,
                        msg.headers.as_deref().unwrap_or(&[]),
                        part,
                    )?;
                    let Some((f, _)) = file.as_mut() else {
                        return Err(CmdError::server("message file not opened"));
                    };
                    let (size, _) = Session::binary_size(f, &loc).await?;
                    self.out.extend_from_slice(b"BINARY.SIZE[");
                    write_part_path(&mut self.out, part);
                    self.out.extend_from_slice(format!("] {size}").as_bytes());
                }
            }
        }
        self.out.extend_from_slice(b")\r\n");
        Ok(true)
    }

    /// Writes one body section's value (a literal, or `""` for a part that does not exist).
    /// `hot`: the section is HEADER.FIELDS of the message with hot fields only
    /// ([`hot_section`]), answered from the cached hot headers.
    async fn section(
        &mut self,
        msg: &Loaded,
        (section, hot): (&Section, bool),
        partial: Option<Partial>,
        file: &mut Option<(tokio::fs::File, PathBuf)>,
        cached: &Cached,
    ) -> Result<(), CmdError> {
        let root = &cached.parts;
        let want = match &section.text {
            None => Want::All,
            Some(
                SectionText::Header
                | SectionText::HeaderFields(_)
                | SectionText::HeaderFieldsNot(_),
            ) => Want::Header,
            Some(SectionText::Text) => Want::Text,
            Some(SectionText::Mime) => Want::Mime,
        };
        // HEADER.FIELDS of the message itself from the hot fields, when they cover the names
        if let (Some(SectionText::HeaderFields(names)), true) = (&section.text, hot) {
            let mut data = Vec::with_capacity(cached.hot_headers.len());
            maildex_mime::header_fields(&cached.hot_headers, names, false, &mut data);
            literal_cut(&mut self.out, &data, partial);
            return Ok(());
        }
        match locate(root, &section.part, want) {
            Located::Missing => self.out.extend_from_slice(b"\"\""),
            Located::HeaderBlock { block, .. } => {
                let blocks = msg.headers.as_deref().unwrap_or(&[]);
                let Some(raw) = header_block(root, blocks, block) else {
                    return Err(CmdError::server("header block missing from the index"));
                };
                let mut data = Vec::with_capacity(raw.len() + raw.len() / 16);
                match &section.text {
                    Some(SectionText::HeaderFields(names))
                    | Some(SectionText::HeaderFieldsNot(names)) => {
                        let not = matches!(section.text, Some(SectionText::HeaderFieldsNot(_)));
                        if section.part.is_empty() {
                            maildex_mime::header_fields(raw, names, not, &mut data);
                        } else {
                            maildex_mime::header_fields_of_part(raw, names, not, &mut data);
                        }
                    }
                    _ => maildex_mime::to_crlf(raw, &mut data),
                }
                literal_cut(&mut self.out, &data, partial);
            }
            Located::File {
                start, end, vsize, ..
            } => {
                let Some((f, path)) = file.as_mut() else {
                    return Err(CmdError::server("message file not opened"));
                };
                let path = path.clone();
                self.write_file_literal(f, &path, (start, end, vsize), partial)
                    .await?;
            }
        }
        Ok(())
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

    #[test]
    fn only_non_hot_or_not_fields_need_header_blocks() {
        let hot = FetchItem::BodySection {
            section: Section {
                part: vec![],
                text: Some(SectionText::HeaderFields(vec![
                    "FROM".into(),
                    "subject".into(),
                ])),
            },
            partial: None,
            peek: true,
        };
        assert!(!needs(&[hot]).headers);
        let cold = FetchItem::BodySection {
            section: Section {
                part: vec![],
                text: Some(SectionText::HeaderFields(vec!["X-Spam".into()])),
            },
            partial: None,
            peek: true,
        };
        assert!(needs(&[cold]).headers);
        assert!(!needs(&[FetchItem::Flags, FetchItem::Uid]).fields.any());
    }
}
