//! The concurrency checker's bookkeeping: what one session was told about its selected
//! mailbox (sequence numbers -> UIDs, flags, `\Recent`), and what all sessions must agree
//! on (the immutable facts of each message, who got `\Recent`, who last set which keyword,
//! which UIDs were added and removed). Every check returns the reason as an `Err(String)`;
//! the session turns it into a failure report with its history and the seed.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};

use imap_codec::imap_types::fetch::MessageDataItem;
use imap_codec::imap_types::flag::FlagFetch;
use imap_codec::imap_types::response::{Data, Response};

use crate::support::imap::Resp;

/// A message: (mailbox index, UID). UIDVALIDITY never changes in a run.
pub type Key = (usize, u32);

/// What never changes about a message (RFC 3501 §2.3: UID, INTERNALDATE, RFC822.SIZE,
/// ENVELOPE and BODYSTRUCTURE are fixed for the life of the message), as first told to
/// any session; COPY and MOVE carry them over to the new UID (RFC 3501 §6.4.7, RFC 6851).
#[derive(Default, Clone, Debug, PartialEq)]
pub struct Facts {
    pub envelope: Option<String>,
    pub bodystructure: Option<String>,
    pub size: Option<u32>,
    /// Seconds since 1970 (the instant, whatever zone the server writes it in).
    pub internaldate: Option<i64>,
    /// `BODY[]`: length and a hash of the bytes.
    pub body: Option<(usize, u64)>,
}

fn merge_field<T: PartialEq + Clone + std::fmt::Debug>(
    name: &str,
    old: &mut Option<T>,
    new: &Option<T>,
) -> Result<(), String> {
    match (old.as_ref(), new) {
        (Some(a), Some(b)) if a != b => Err(format!("{name} changed: was {a:?}, now {b:?}")),
        (None, Some(b)) => {
            *old = Some(b.clone());
            Ok(())
        }
        _ => Ok(()),
    }
}

impl Facts {
    /// Takes the fields of `new` that are not known yet; a known one that differs is the error.
    pub fn merge(&mut self, new: &Facts) -> Result<(), String> {
        merge_field("ENVELOPE", &mut self.envelope, &new.envelope)?;
        merge_field("BODYSTRUCTURE", &mut self.bodystructure, &new.bodystructure)?;
        merge_field("RFC822.SIZE", &mut self.size, &new.size)?;
        merge_field("INTERNALDATE", &mut self.internaldate, &new.internaldate)?;
        merge_field("BODY[]", &mut self.body, &new.body)?;
        if let (Some(size), Some((len, _))) = (self.size, self.body) {
            if size as usize != len {
                return Err(format!("RFC822.SIZE {size} but BODY[] has {len} octets"));
            }
        }
        Ok(())
    }
}

/// Facts per message, with copies joined to their source (a union-find: a copy's facts are
/// its source's).
#[derive(Default)]
pub struct FactStore {
    parent: HashMap<Key, Key>,
    facts: HashMap<Key, Facts>,
}

impl FactStore {
    fn root(&self, mut k: Key) -> Key {
        while let Some(&p) = self.parent.get(&k) {
            k = p;
        }
        k
    }

    /// Records what a session was told about `k`.
    pub fn record(&mut self, k: Key, new: &Facts) -> Result<(), String> {
        let r = self.root(k);
        self.facts.entry(r).or_default().merge(new)
    }

    /// `dst` is a copy of `src` (COPYUID): from now on they must show the same facts.
    pub fn link(&mut self, src: Key, dst: Key) -> Result<(), String> {
        let (rs, rd) = (self.root(src), self.root(dst));
        if rs == rd {
            return Ok(());
        }
        let moved = self.facts.remove(&rd).unwrap_or_default();
        self.parent.insert(rd, rs);
        self.facts
            .entry(rs)
            .or_default()
            .merge(&moved)
            .map_err(|e| format!("copy {dst:?} of {src:?}: {e}"))
    }
}

/// One FETCH FLAGS: (uid, flags without `\Recent`, `\Recent`).
pub type FlagsSeen = (u32, BTreeSet<String>, bool);

/// What a session's responses to one command added up to.
#[derive(Default, Debug)]
pub struct Effects {
    /// UIDs whose EXPUNGE arrived (0 when the slot's UID was not known yet).
    pub expunged: Vec<u32>,
    /// An EXISTS raised the message count.
    pub grew: bool,
    /// `* SEARCH` numbers.
    pub search: Option<Vec<u32>>,
    /// (uid, flags without `\Recent`, `\Recent`) of every FETCH with FLAGS.
    pub flags: Vec<FlagsSeen>,
    /// UIDs of every FETCH response whose slot's UID is known.
    pub fetched: Vec<u32>,
    /// `[COPYUID v src dst]` anywhere in the responses, expanded.
    pub copyuid: Option<(Vec<u32>, Vec<u32>)>,
    pub appenduid: Option<u32>,
    pub recent_count: Option<u32>,
    pub capability: Option<String>,
}

/// Expands an IMAP set of numbers (`1:3,7`) in the order written.
pub fn expand(set: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for r in set.split(',') {
        let mut it = r.split(':').filter_map(|n| n.parse::<u32>().ok());
        let Some(a) = it.next() else { continue };
        let b = it.next().unwrap_or(a);
        if a <= b {
            out.extend(a..=b);
        } else {
            out.extend((b..=a).rev());
        }
    }
    out
}

/// The words after `[NAME ` in `text`, up to `]`.
fn code_words(text: &str, name: &str) -> Option<Vec<String>> {
    let i = text.find(&format!("[{name} "))?;
    let rest = &text[i + name.len() + 2..];
    let rest = &rest[..rest.find(']')?];
    Some(rest.split(' ').map(str::to_string).collect())
}

pub fn hash_bytes(b: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    b.hash(&mut h);
    h.finish()
}

/// Flags as comparable strings (keywords are case-insensitive, RFC 3501 §2.3.2).
fn flag_set(items: &[FlagFetch<'_>]) -> (BTreeSet<String>, bool) {
    let mut set = BTreeSet::new();
    let mut recent = false;
    for f in items {
        match f {
            FlagFetch::Recent => recent = true,
            FlagFetch::Flag(f) => {
                set.insert(f.to_string().to_ascii_lowercase());
            }
        }
    }
    (set, recent)
}

/// State shared by all sessions that the model reads and writes while applying responses.
pub struct Common<'a> {
    pub facts: &'a std::sync::Mutex<FactStore>,
    /// Who got `\Recent` for each message.
    pub recent: &'a std::sync::Mutex<HashMap<Key, usize>>,
    /// Messages some session saw expunged.
    pub removed: &'a std::sync::Mutex<HashSet<Key>>,
}

/// One session's view of its selected mailbox, changed only by what the server told it.
#[derive(Clone, Debug, Default)]
pub struct Model {
    /// The session.
    pub id: usize,
    /// The selected mailbox (index into the run's mailbox list).
    pub mbox: usize,
    /// Sequence number - 1 -> UID; 0 while only an EXISTS announced the slot.
    pub uids: Vec<u32>,
    /// Flags as last told (lower case, without `\Recent`).
    pub flags: HashMap<u32, BTreeSet<String>>,
    /// UIDs this session was told are `\Recent` in this selection.
    pub recent: HashSet<u32>,
    /// Highest MODSEQ told per UID (only when the server sends MODSEQ).
    pub modseq: HashMap<u32, u64>,
}

impl Model {
    pub fn known(&self) -> Vec<u32> {
        self.uids.iter().copied().filter(|&u| u != 0).collect()
    }

    pub fn seq_of(&self, uid: u32) -> Option<u32> {
        self.uids
            .iter()
            .position(|&u| u == uid)
            .map(|i| i as u32 + 1)
    }

    /// Starts a new selection of `mbox`.
    pub fn reset(&mut self, mbox: usize) {
        *self = Model {
            id: self.id,
            mbox,
            ..Model::default()
        };
    }

    /// `uid` at sequence number `seq` (1-based): fills a slot only EXISTS announced, or checks
    /// that a known slot still holds the same UID.
    fn place(&mut self, seq: usize, uid: u32) -> Result<(), String> {
        let have = self.uids[seq - 1];
        if have == uid {
            return Ok(());
        }
        if have != 0 {
            return Err(format!(
                "UID map changed without EXPUNGE: seq {seq} was UID {have}, now UID {uid}"
            ));
        }
        let before = self.uids[..seq - 1].iter().rev().find(|&&u| u != 0);
        let after = self.uids[seq..].iter().find(|&&u| u != 0);
        if before.is_some_and(|&b| b >= uid) || after.is_some_and(|&a| a <= uid) {
            return Err(format!(
                "UID {uid} at seq {seq} breaks ascending order (neighbours {before:?}, {after:?})"
            ));
        }
        self.uids[seq - 1] = uid;
        Ok(())
    }

    /// Applies one untagged response in the order it arrived.
    pub fn apply(&mut self, sh: &Common<'_>, resp: &Resp, ef: &mut Effects) -> Result<(), String> {
        let text = resp.text();
        if let Some(w) = code_words(&text, "COPYUID") {
            if w.len() == 3 {
                ef.copyuid = Some((expand(&w[1]), expand(&w[2])));
            }
        }
        if let Some(w) = code_words(&text, "APPENDUID") {
            ef.appenduid = w.get(1).and_then(|u| u.parse().ok());
        }
        let Some(Response::Data(data)) = &resp.parsed else {
            return Ok(());
        };
        match data {
            Data::Exists(n) => {
                let n = *n as usize;
                if n < self.uids.len() {
                    // RFC 3501 §7.3.1: only EXPUNGE lowers the count
                    return Err(format!(
                        "EXISTS {n} below the {} announced",
                        self.uids.len()
                    ));
                }
                ef.grew |= n > self.uids.len();
                self.uids.resize(n, 0);
            }
            Data::Recent(n) => {
                if *n as usize > self.uids.len() {
                    return Err(format!("RECENT {n} above EXISTS {}", self.uids.len()));
                }
                ef.recent_count = Some(*n);
            }
            Data::Expunge(n) => {
                let seq = n.get() as usize;
                if seq > self.uids.len() {
                    return Err(format!(
                        "EXPUNGE {seq}: a sequence number never announced (EXISTS {})",
                        self.uids.len()
                    ));
                }
                let uid = self.uids.remove(seq - 1);
                if uid != 0 {
                    self.flags.remove(&uid);
                    self.recent.remove(&uid);
                    sh.removed.lock().unwrap().insert((self.mbox, uid));
                }
                ef.expunged.push(uid);
            }
            Data::Search(v, ..) => {
                ef.search = Some(v.iter().map(|n| n.get()).collect());
            }
            Data::Vanished { .. } => {
                return Err("VANISHED without QRESYNC enabled (RFC 7162 §3.2.10)".into());
            }
            Data::Capability(_) => ef.capability = Some(text.clone()),
            Data::Fetch { seq, items } => self.fetch(sh, seq.get() as usize, items.as_ref(), ef)?,
            _ => {}
        }
        Ok(())
    }

    fn fetch(
        &mut self,
        sh: &Common<'_>,
        seq: usize,
        items: &[MessageDataItem<'static>],
        ef: &mut Effects,
    ) -> Result<(), String> {
        if seq > self.uids.len() {
            return Err(format!(
                "FETCH for seq {seq}, a sequence number never announced (EXISTS {})",
                self.uids.len()
            ));
        }
        let mut facts = Facts::default();
        let mut flags = None;
        let mut modseq = None;
        for item in items {
            match item {
                MessageDataItem::Uid(u) => self.place(seq, u.get())?,
                MessageDataItem::Flags(f) => flags = Some(flag_set(f)),
                MessageDataItem::Envelope(e) => facts.envelope = Some(format!("{e:?}")),
                MessageDataItem::BodyStructure(b) => {
                    facts.bodystructure = Some(format!("{b:?}"));
                }
                MessageDataItem::Rfc822Size(n) => facts.size = Some(*n),
                MessageDataItem::InternalDate(d) => {
                    facts.internaldate = Some(d.as_ref().timestamp());
                }
                MessageDataItem::BodyExt {
                    section: None,
                    origin: None,
                    data,
                } => {
                    if let Some(b) = data.clone().into_option() {
                        facts.body = Some((b.len(), hash_bytes(&b)));
                    }
                }
                MessageDataItem::ModSeq(m) => modseq = Some(m.get()),
                _ => {}
            }
        }
        let uid = self.uids[seq - 1];
        if uid == 0 {
            // nothing to attribute it to; every FETCH the checker sends asks for UID
            return Ok(());
        }
        ef.fetched.push(uid);
        if facts != Facts::default() {
            sh.facts
                .lock()
                .unwrap()
                .record((self.mbox, uid), &facts)
                .map_err(|e| format!("UID {uid}: {e}"))?;
        }
        if let Some(m) = modseq {
            // RFC 7162 §3.1.1: a message's mod-sequence only goes up
            let old = self.modseq.entry(uid).or_insert(m);
            if m < *old {
                return Err(format!("UID {uid}: MODSEQ went back from {old} to {m}"));
            }
            *old = m;
        }
        if let Some((set, recent)) = flags {
            if recent {
                self.claim_recent(sh, uid)?;
            } else if self.recent.contains(&uid) {
                // RFC 3501 §2.3.2: \Recent stays with the session for its selection
                return Err(format!("UID {uid} was \\Recent and lost it"));
            }
            self.flags.insert(uid, set.clone());
            ef.flags.push((uid, set, recent));
        }
        Ok(())
    }

    /// This session was told `uid` is `\Recent`; no other session may have been
    /// (RFC 3501 §2.3.2).
    pub fn claim_recent(&mut self, sh: &Common<'_>, uid: u32) -> Result<(), String> {
        self.recent.insert(uid);
        let mut r = sh.recent.lock().unwrap();
        let owner = *r.entry((self.mbox, uid)).or_insert(self.id);
        if owner != self.id {
            return Err(format!(
                "UID {uid} is \\Recent for session {} and for session {owner}",
                self.id
            ));
        }
        Ok(())
    }
}
