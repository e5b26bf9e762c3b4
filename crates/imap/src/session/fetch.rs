//! FETCH and UID FETCH (RFC 3501 §6.4.5, §7.4.2). Everything a listing asks for comes from
//! the index (flags, dates, sizes, ENVELOPE, BODYSTRUCTURE, header fields, MIME headers);
//! only body bytes open the message file, streamed in chunks. Index reads happen in short
//! batches, never across a socket write (the design brief's rule for LMDB readers).

use std::collections::HashSet;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;

use maildex_imap_proto::{FetchArgs, FetchItem, ResponseCode, SectionText, SequenceSet};
use maildex_store::records::CachedFields;
use maildex_store::Flags;
use maildex_store::{FlagOp, Loaded, Mailbox, MessageFile, ModSeq, Uid, UserStore};

use super::binary::binary_part;
use super::messages::resolve;
use super::render::{hot_section, want_of, Plan, Render, Rendered, NO_PLAN};
use super::{blocking, untagged, CmdError, Done, Session, State, FLUSH_AT};
use maildex_store::section::{locate, Located};

/// Messages read from the index per read transaction. Each batch is one hop to a blocking
/// thread and back; 512 (about 1-2 ms of decoding, a few hundred kB of listing data) made
/// `FETCH 1:* ENVELOPE` of 10,000 messages a quarter faster than 128.
const BATCH: usize = 512;
/// Batches read (and rendered) ahead of the one being written.
const IN_FLIGHT: usize = 2;
/// Most different items one FETCH may ask for; more is `BAD`, as Dovecot answers a
/// command over its limits. A client asks for a dozen; each item can cost a header
/// block per message.
const MAX_ITEMS: usize = 256;

/// The items with repeats dropped (an item asked for twice is answered once, as Dovecot
/// keeps one handler per item), or `BAD` over [`MAX_ITEMS`].
fn merge_items(items: Vec<FetchItem>) -> Result<Vec<FetchItem>, CmdError> {
    let mut seen = HashSet::new();
    let items: Vec<FetchItem> = items
        .into_iter()
        .filter(|item| seen.insert(format!("{item:?}")))
        .collect();
    if items.len() > MAX_ITEMS {
        return Err(CmdError::Bad(format!(
            "Too many FETCH items: {} different ones, at most {MAX_ITEMS}",
            items.len()
        )));
    }
    Ok(items)
}

/// What the items need from the index.
#[derive(Default, Clone, Copy)]
struct Needs {
    fields: CachedFields,
    headers: bool,
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

/// `1.2.3`.
fn write_part_path(out: &mut Vec<u8>, part: &[u32]) {
    for (i, n) in part.iter().enumerate() {
        if i > 0 {
            out.push(b'.');
        }
        out.extend_from_slice(n.to_string().as_bytes());
    }
}

impl Session {
    pub(super) async fn fetch(
        &mut self,
        uid_cmd: bool,
        set: SequenceSet,
        args: FetchArgs,
    ) -> Result<Done, CmdError> {
        let changed_since = args.changed_since.map(ModSeq);
        if args.vanished {
            // RFC 7162 §3.2.6: only UID FETCH, only with CHANGEDSINCE, only with QRESYNC
            if !uid_cmd || changed_since.is_none() || !self.enabled.qresync {
                return Err(CmdError::Bad(
                    "VANISHED needs UID FETCH, CHANGEDSINCE and ENABLE QRESYNC.".into(),
                ));
            }
        }
        let mut items = args.items;
        // RFC 7162 §3.1: FETCH MODSEQ or CHANGEDSINCE enables CONDSTORE; CHANGEDSINCE
        // answers with MODSEQ (§3.1.4.1), and once CONDSTORE is on so does any FETCH of
        // flags (as Dovecot does: a client keeps flags and their modseq together)
        if changed_since.is_some() || items.contains(&FetchItem::ModSeq) {
            self.enable_condstore();
        }
        let flags_told = items.contains(&FetchItem::Flags) || items.iter().any(sets_seen);
        if changed_since.is_some() || (self.enabled.condstore && flags_told) {
            items.push(FetchItem::ModSeq);
        }
        // RFC 3501 §6.4.8: UID FETCH always returns UID
        if uid_cmd && !items.contains(&FetchItem::Uid) {
            items.insert(0, FetchItem::Uid);
        }
        let items = merge_items(items)?;
        if let (true, Some(m)) = (args.vanished, changed_since) {
            self.fetch_vanished(&set, m).await?;
        }
        let State::Selected(authed, sel) = &mut self.state else {
            return Err(CmdError::Bad("no mailbox selected".into()));
        };
        let store = Arc::clone(&authed.store);
        let targets = resolve(sel, &set, uid_cmd)?;
        let need = needs(&items);
        let (mailbox, read_only) = (sel.mailbox.clone(), sel.read_only);
        // implicit \Seen, before anything is sent, so FLAGS in the answer are true
        let mut seen_now: HashSet<Uid> = HashSet::new();
        if !read_only && items.iter().any(sets_seen) && !targets.is_empty() {
            let uids: Vec<Uid> = targets.iter().map(|&(_, u)| u).collect();
            let (s, n) = (Arc::clone(&store), mailbox.name().to_string());
            let outcome =
                blocking(move || s.set_flags(&n, &uids, FlagOp::Add, Flags::SEEN, &[], None))
                    .await??;
            for m in outcome.messages.iter().filter(|m| m.changed) {
                seen_now.insert(m.uid);
                sel.own.insert(m.uid, m.modseq);
            }
        }
        let index_only = !items.iter().any(reads_file);
        let render = Arc::new(Render {
            name: mailbox.name().to_string(),
            plan: items.iter().map(Plan::of).collect(),
            items,
            keywords: sel.keywords.clone(),
            recent: sel.recent.clone(),
            seen_now,
        });
        let mut expunged = false;
        let spare = Spare::default();
        // Each batch is read (and, when no item needs the file, rendered) on a blocking
        // thread while earlier ones are written out.
        let start = |batch: &[(u32, Uid)]| {
            let targets = batch.to_vec();
            let (s, r, m) = (Arc::clone(&store), Arc::clone(&render), mailbox.clone());
            let spare = spare.clone();
            tokio::task::spawn_blocking(move || -> Result<Batch, CmdError> {
                let uids: Vec<Uid> = targets.iter().map(|&(_, u)| u).collect();
                let loaded = s.load(&m, &uids, need.fields, need.headers)?;
                // RFC 7162 §3.1.4.1: only messages changed since (a gone one still counts
                // as gone)
                let (targets, loaded): (Vec<_>, Vec<_>) = match changed_since {
                    Some(since) => targets
                        .into_iter()
                        .zip(loaded)
                        .filter(|(_, msg)| msg.as_ref().is_none_or(|m| m.state.modseq > since))
                        .unzip(),
                    None => (targets, loaded),
                };
                if index_only {
                    Ok(Batch::Rendered(r.batch(
                        targets.into_iter().zip(loaded).collect(),
                        spare.take(),
                    )?))
                } else {
                    Ok(Batch::Loaded(targets, loaded))
                }
            })
        };
        // two batches in flight: on two cores, one renders while the other is read
        let mut batches = targets.chunks(BATCH);
        let mut pending = std::collections::VecDeque::new();
        pending.extend(batches.by_ref().take(IN_FLIGHT).map(start));
        while let Some(next) = pending.pop_front() {
            let batch = next
                .await
                .map_err(|e| CmdError::Server(format!("blocking task failed: {e}")))??;
            pending.extend(batches.next().map(start));
            match batch {
                Batch::Rendered(Rendered { bytes, gone, rest }) => {
                    expunged |= gone;
                    if !rest.is_empty() {
                        // the rest of this batch comes next, rendered while this is written
                        let (r, spare) = (Arc::clone(&render), spare.clone());
                        pending.push_front(tokio::task::spawn_blocking(move || {
                            Ok(Batch::Rendered(r.batch(rest, spare.take())?))
                        }));
                    }
                    self.flush().await?;
                    self.write(&bytes).await?;
                    spare.give(bytes);
                }
                Batch::Loaded(targets, loaded) => {
                    for (&(seq, uid), msg) in targets.iter().zip(loaded) {
                        let shown = match msg {
                            Some(msg) => {
                                self.fetch_one(&store, &render, &mailbox, (seq, uid), msg)
                                    .await?
                            }
                            None => false,
                        };
                        expunged |= !shown;
                        if self.out.len() >= FLUSH_AT {
                            self.flush().await?;
                        }
                    }
                }
            }
        }
        // RFC 3501 §7.4.1: no EXPUNGE during FETCH; UID FETCH may carry them
        self.refresh_fast(uid_cmd).await?;
        // RFC 3501 §6.4.8: a UID that no longer exists is ignored, not an error. A
        // sequence number still names the message until EXPUNGE is sent: RFC 2180
        // §4.1.2 lets that FETCH answer NO, which we do (RFC 5530 EXPUNGEISSUED).
        if expunged && !uid_cmd {
            Ok(Done::NoCode(
                ResponseCode::ExpungeIssued,
                "Some of the requested messages no longer exist.".into(),
            ))
        } else {
            Ok(Done::ok("Fetch completed."))
        }
    }

    /// Writes one `* n FETCH (...)` of a message some of whose items read the file.
    /// Returns false when the message turned out to be gone.
    async fn fetch_one(
        &mut self,
        store: &Arc<UserStore>,
        r: &Render,
        mailbox: &Mailbox,
        (seq, uid): (u32, Uid),
        msg: Loaded,
    ) -> Result<bool, CmdError> {
        let (s, m, st) = (Arc::clone(store), mailbox.clone(), msg.state.clone());
        let opened = blocking(move || s.open_message(&m, uid, &st)).await??;
        let Some(MessageFile { file, path }) = opened else {
            return Ok(false);
        };
        let file = super::body::BodyFile::new(file);
        // the implicit \Seen was stored before this batch was read: the state has it
        untagged::fetch_start(&mut self.out, seq);
        let extra = r.flags_too(uid).then_some(&FetchItem::Flags);
        let all = r.items.iter().zip(&r.plan);
        for (i, (item, plan)) in all.chain(extra.map(|f| (f, &NO_PLAN))).enumerate() {
            if i > 0 {
                self.out.push(b' ');
            }
            if self.out.len() >= FLUSH_AT {
                // many items of one message (each a header block, say) go out as they come
                self.flush().await?;
            }
            if r.item(&mut self.out, (item, plan), uid, &msg)? {
                continue;
            }
            // what the index cannot answer: bytes of the file
            match item {
                FetchItem::BodySection {
                    section, partial, ..
                } => {
                    let loc = locate(&r.cached(&msg, uid)?.parts, &section.part, want_of(section));
                    self.out.extend_from_slice(&plan.label);
                    self.file_section(&file, &path, loc, *partial).await?;
                }
                FetchItem::Rfc822 | FetchItem::Rfc822Text | FetchItem::Rfc822Header => {
                    let Some(section) = &plan.section else {
                        return Err(CmdError::server("RFC822 item without its section"));
                    };
                    let loc = locate(&r.cached(&msg, uid)?.parts, &section.part, want_of(section));
                    self.out.extend_from_slice(&plan.label);
                    self.file_section(&file, &path, loc, None).await?;
                }
                FetchItem::Binary { part, partial, .. } => {
                    let loc = binary_part(r.cached(&msg, uid)?, msg.headers.as_deref(), part)?;
                    self.out.extend_from_slice(b"BINARY[");
                    write_part_path(&mut self.out, part);
                    self.out.push(b']');
                    if let Some(p) = partial {
                        let _ = write!(self.out, "<{}>", p.origin);
                    }
                    self.out.push(b' ');
                    self.write_binary(&file, &path, &loc, *partial).await?;
                }
                FetchItem::BinarySize { part } => {
                    let loc = binary_part(r.cached(&msg, uid)?, msg.headers.as_deref(), part)?;
                    let (size, _) = Session::binary_size(&file, &loc).await?;
                    self.out.extend_from_slice(b"BINARY.SIZE[");
                    write_part_path(&mut self.out, part);
                    let _ = write!(self.out, "] {size}");
                }
                _ => return Err(CmdError::server("a FETCH item the index should answer")),
            }
        }
        untagged::fetch_end(&mut self.out);
        Ok(true)
    }

    /// Writes the bytes of a section located in the file as a literal.
    async fn file_section(
        &mut self,
        file: &super::body::BodyFile,
        path: &Path,
        loc: Located<'_>,
        partial: Option<maildex_imap_proto::Partial>,
    ) -> Result<(), CmdError> {
        match loc {
            Located::File {
                start, end, vsize, ..
            } => {
                self.write_file_literal(file, path, (start, end, vsize), partial)
                    .await
            }
            _ => Err(CmdError::server("a section the index should answer")),
        }
    }
}

/// Output buffers of one FETCH's rendered batches, written out and kept for the next
/// batches to render into. A batch's output is hundreds of KiB: grown from empty and
/// freed after its write, each one was memory mapped afresh (the daemon's malloc maps
/// blocks of 128 KiB and more) and every page of it faulted in again, with copies at
/// each growth; about a tenth of a warm mutt listing's server CPU (`perf record`). Kept
/// per command, not per session, so an idle session holds none.
#[derive(Clone, Default)]
struct Spare(Arc<std::sync::Mutex<Vec<Vec<u8>>>>);

impl Spare {
    /// A buffer written out before, or a new one.
    fn take(&self) -> Vec<u8> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .unwrap_or_default()
    }

    /// Keeps `bytes`, written out, for a later batch (as many as are in flight at most).
    fn give(&self, bytes: Vec<u8>) {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() <= IN_FLIGHT {
            kept.push(bytes);
        }
    }
}

/// A batch as the blocking thread hands it back.
enum Batch {
    /// `* n FETCH` lines of the batch (or of its first part, the rest to follow).
    Rendered(Rendered),
    /// The messages, for items that read the file.
    Loaded(Vec<(u32, Uid)>, Vec<Option<Loaded>>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use maildex_imap_proto::Section;

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
