//! The cached listing, sort and search data of messages, as columns: segments for the
//! listing data and the sort keys, a packed column for the search fields.
//!
//! Why columns: a full segment is zstd-compressed, and decompressing it was the largest cost
//! of a listing (a third of `FETCH 1:* ENVELOPE` on 10,000 messages) when one segment held
//! every cached field. A client lists either header fields, or ENVELOPE, or BODYSTRUCTURE;
//! with one column each, a listing decompresses only the bytes it sends. The columns are
//! written together in the same transaction, so a message has all four or none. The fourth,
//! `cache-search`, holds what SEARCH's header criteria compare ([`SearchFields`]): a
//! SEARCH SUBJECT decompresses only those strings, about a tenth of the hot header bytes.

use std::ops::{ControlFlow, RangeInclusive};

use heed::{RoTxn, RwTxn, WithoutTls};
use serde::Deserialize;

#[cfg(doc)]
use crate::schema::Structure;
use crate::schema::{self, Cached, CachedFields, PartRecord, SearchFields, SortKeys};
use crate::search_column::SearchColumn;
use crate::segment::Segments;
use crate::IndexError;

/// The column databases.
#[derive(Clone, Copy)]
pub(crate) struct Columns<'e> {
    pub hot: Segments<'e>,
    pub envelope: Segments<'e>,
    pub structure: Segments<'e>,
    pub sort: Segments<'e>,
    pub search: SearchColumn<'e>,
    /// `fts-text` ([`crate::TextRecord`], postcard, in segments as the listing columns),
    /// not a listing column but written and removed with them.
    pub text: Segments<'e>,
    /// `fts-sig` (the text's candidate signature, in segments), written and removed with
    /// `fts-text`.
    pub sig: Segments<'e>,
}

/// A [`Structure`] borrowed from its encoding, with the part tree as `P` (`()` skips it:
/// postcard leaves trailing bytes alone). Field order and types must match [`Structure`].
#[derive(Deserialize)]
struct StructureView<'a, P> {
    body: &'a [u8],
    body_structure: &'a [u8],
    parts: P,
}

/// A [`Structure`] encoded from the fields of a [`Cached`] it borrows: the same postcard
/// (field order and types must match [`Structure`]).
#[derive(serde::Serialize)]
struct StructureRef<'a> {
    #[serde(with = "serde_bytes")]
    body: &'a [u8],
    #[serde(with = "serde_bytes")]
    body_structure: &'a [u8],
    parts: &'a PartRecord,
}

/// Puts one column's data (of the message with the UID) into its record.
type Fill<'a> = dyn FnMut(&mut Cached, u32, Vec<u8>) -> Result<(), IndexError> + 'a;

/// Called with each (uid, data) of a column.
type Visit<'a> = dyn FnMut(u32, Vec<u8>) -> Result<ControlFlow<()>, IndexError> + 'a;

/// Walks one column over the UIDs asked for, calling the visitor.
type Walk<'a> = dyn Fn(&mut Visit<'_>) -> Result<(), IndexError> + 'a;

/// Names a record of the `cache-structure` column in a decoding error.
struct What(u32, u32);

impl std::fmt::Display for What {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", schema::DB_CACHE_STRUCTURE, self.0, self.1)
    }
}

/// Decodes a `cache-search` entry.
fn decode_sort(raw: &[u8], mailbox: u32, uid: u32) -> Result<SortKeys, IndexError> {
    schema::decode(
        raw,
        &format_args!("{} {mailbox}/{uid}", schema::DB_CACHE_SORT),
    )
}

fn decode_search(raw: &[u8], mailbox: u32, uid: u32) -> Result<SearchFields, IndexError> {
    schema::decode(
        raw,
        &format_args!("{} {mailbox}/{uid}", schema::DB_CACHE_SEARCH),
    )
}

/// Fills the structure fields of `c` that `fields` asks for from an encoded [`Structure`].
fn fill_structure(
    c: &mut Cached,
    raw: &[u8],
    fields: CachedFields,
    what: What,
) -> Result<(), IndexError> {
    let (body, body_structure) = if fields.parts {
        let v: StructureView<'_, PartRecord> = schema::decode(raw, &what)?;
        c.parts = v.parts;
        (v.body, v.body_structure)
    } else {
        let v: StructureView<'_, ()> = schema::decode(raw, &what)?;
        (v.body, v.body_structure)
    };
    if fields.body {
        c.body = body.to_vec();
    }
    if fields.body_structure {
        c.body_structure = body_structure.to_vec();
    }
    Ok(())
}

fn wants_structure(fields: CachedFields) -> bool {
    fields.body || fields.body_structure || fields.parts
}

impl Columns<'_> {
    /// Stores the cached data of many messages of `mailbox`.
    pub fn put_many(
        &self,
        txn: &mut RwTxn,
        mailbox: u32,
        items: Vec<(u32, &Cached)>,
    ) -> Result<(), IndexError> {
        let n = items.len();
        let (mut text, mut sig) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let (mut hot, mut env, mut st, mut sort, mut search) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for (uid, c) in items {
            let structure = StructureRef {
                body: &c.body,
                body_structure: &c.body_structure,
                parts: &c.parts,
            };
            st.push((uid, schema::encode(&structure)?));
            sort.push((uid, schema::encode(&c.sort)?));
            search.push((uid, schema::encode(&c.search)?));
            if !c.text.is_empty() {
                text.push((uid, &c.text[..]));
            }
            if !c.text_sig.is_empty() {
                sig.push((uid, &c.text_sig[..]));
            }
            hot.push((uid, &c.hot_headers[..]));
            env.push((uid, &c.envelope[..]));
        }
        self.hot.put_many(txn, mailbox, hot)?;
        self.envelope.put_many(txn, mailbox, env)?;
        self.structure.put_many(txn, mailbox, st)?;
        self.sort.put_many(txn, mailbox, sort)?;
        self.search.put_many(txn, mailbox, search)?;
        self.text.put_many(txn, mailbox, text)?;
        self.sig.put_many(txn, mailbox, sig)
    }

    /// Removes one message's data.
    pub fn remove(&self, txn: &mut RwTxn, mailbox: u32, uid: u32) -> Result<(), IndexError> {
        self.hot.remove(txn, mailbox, uid)?;
        self.envelope.remove(txn, mailbox, uid)?;
        self.structure.remove(txn, mailbox, uid)?;
        self.sort.remove(txn, mailbox, uid)?;
        self.search.remove(txn, mailbox, uid)?;
        self.text.remove(txn, mailbox, uid)?;
        self.sig.remove(txn, mailbox, uid)?;
        Ok(())
    }

    /// Removes every message's data of `mailbox`.
    pub fn clear(&self, txn: &mut RwTxn, mailbox: u32) -> Result<(), IndexError> {
        self.hot.clear(txn, mailbox)?;
        self.envelope.clear(txn, mailbox)?;
        self.structure.clear(txn, mailbox)?;
        self.sort.clear(txn, mailbox)?;
        self.search.clear(txn, mailbox)?;
        self.text.clear(txn, mailbox)?;
        self.sig.clear(txn, mailbox)
    }

    /// The `fields` of one message's data (the others empty); `None` when the message has
    /// none (or no field is asked for).
    pub fn get(
        &self,
        txn: &RoTxn<WithoutTls>,
        mailbox: u32,
        uid: u32,
        fields: CachedFields,
    ) -> Result<Option<Cached>, IndexError> {
        let mut c = Cached::default();
        let mut found = false;
        if fields.hot_headers {
            let Some(h) = self.hot.get(txn, mailbox, uid)? else {
                return Ok(None);
            };
            c.hot_headers = h;
            found = true;
        }
        if fields.envelope {
            let Some(e) = self.envelope.get(txn, mailbox, uid)? else {
                return Ok(None);
            };
            c.envelope = e;
            found = true;
        }
        if wants_structure(fields) {
            let Some(raw) = self.structure.get(txn, mailbox, uid)? else {
                return Ok(None);
            };
            fill_structure(&mut c, &raw, fields, What(mailbox, uid))?;
            found = true;
        }
        if fields.sort {
            let Some(raw) = self.sort.get(txn, mailbox, uid)? else {
                return Ok(None);
            };
            c.sort = decode_sort(&raw, mailbox, uid)?;
            found = true;
        }
        if fields.search {
            let Some(raw) = self.search.get(txn, mailbox, uid)? else {
                return Ok(None);
            };
            c.search = decode_search(raw, mailbox, uid)?;
            found = true;
        }
        // a message without a text record (drift `index check` reports) keeps its other
        // columns
        if fields.text {
            if let Some(t) = self.text.get(txn, mailbox, uid)? {
                c.text = t;
                found = true;
            }
            if let Some(t) = self.sig.get(txn, mailbox, uid)? {
                c.text_sig = t;
                found = true;
            }
        }
        Ok(found.then_some(c))
    }

    /// Calls `f` with the `fields` of the data of each message of `mailbox` in `uids`, in
    /// UID order. Each wanted column is walked once; the records are assembled first, so
    /// keep `uids` to a batch when the mailbox is large.
    ///
    /// Each record is boxed when it is made and handed on in its box: a `Cached` is about
    /// 600 bytes, and a vector of them grown by doubling copied every record again at each
    /// growth into memory touched for the first time (a warm `FETCH 1:* BODYSTRUCTURE`
    /// spent a fifth of its server CPU in those copies' page faults, `perf record`), then
    /// the caller boxed each one, a third copy.
    pub fn for_each(
        &self,
        txn: &RoTxn<WithoutTls>,
        mailbox: u32,
        uids: RangeInclusive<u32>,
        fields: CachedFields,
        mut f: impl FnMut(u32, Box<Cached>) -> Result<ControlFlow<()>, IndexError>,
    ) -> Result<(), IndexError> {
        let mut out: Vec<(u32, Box<Cached>)> = Vec::new();
        let mut first = true;
        // One pass per wanted column: the first column makes the entries, the others fill
        // them in (both sides in UID order; a UID missing from the first column is skipped).
        let mut merge = |walk: &Walk<'_>, fill: &mut Fill<'_>| -> Result<(), IndexError> {
            let mut at = 0;
            let make = first;
            walk(&mut |uid, data| {
                if make {
                    out.push((uid, Box::default()));
                    at = out.len() - 1;
                } else {
                    while at < out.len() && out[at].0 < uid {
                        at += 1;
                    }
                    if at == out.len() || out[at].0 != uid {
                        return Ok(ControlFlow::Continue(()));
                    }
                }
                fill(&mut out[at].1, uid, data)?;
                Ok(ControlFlow::Continue(()))
            })?;
            first = false;
            Ok(())
        };
        if fields.hot_headers {
            merge(
                &|f| self.hot.for_each(txn, mailbox, uids.clone(), f),
                &mut |c, _, d| {
                    c.hot_headers = d;
                    Ok(())
                },
            )?;
        }
        if fields.envelope {
            merge(
                &|f| self.envelope.for_each(txn, mailbox, uids.clone(), f),
                &mut |c, _, d| {
                    c.envelope = d;
                    Ok(())
                },
            )?;
        }
        if wants_structure(fields) {
            merge(
                &|f| self.structure.for_each(txn, mailbox, uids.clone(), f),
                &mut |c, uid, d| fill_structure(c, &d, fields, What(mailbox, uid)),
            )?;
        }
        if fields.sort {
            merge(
                &|f| self.sort.for_each(txn, mailbox, uids.clone(), f),
                &mut |c, uid, d| {
                    c.sort = decode_sort(&d, mailbox, uid)?;
                    Ok(())
                },
            )?;
        }
        if fields.search {
            let walk = |f: &mut Visit<'_>| {
                self.search
                    .for_each(txn, mailbox, uids.clone(), |uid, d| f(uid, d.to_vec()))
            };
            merge(&walk, &mut |c, uid, d| {
                c.search = decode_search(&d, mailbox, uid)?;
                Ok(())
            })?;
        }
        if fields.text {
            let walk = |f: &mut Visit<'_>| self.text.for_each(txn, mailbox, uids.clone(), f);
            merge(&walk, &mut |c, _, d| {
                c.text = d;
                Ok(())
            })?;
            let walk = |f: &mut Visit<'_>| self.sig.for_each(txn, mailbox, uids.clone(), f);
            merge(&walk, &mut |c, _, d| {
                c.text_sig = d;
                Ok(())
            })?;
        }
        for (uid, c) in out {
            if f(uid, c)?.is_break() {
                break;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Structure;

    #[test]
    fn structure_views_read_the_structure_encoding() {
        let s = Structure {
            body: b"(\"text\")".to_vec(),
            body_structure: b"(\"text\" x)".to_vec(),
            parts: PartRecord {
                body_vsize: 42,
                ..PartRecord::default()
            },
        };
        let raw = schema::encode(&s).unwrap();
        // what a batch of new messages writes, from the records it borrows
        let borrowed = StructureRef {
            body: &s.body,
            body_structure: &s.body_structure,
            parts: &s.parts,
        };
        assert_eq!(schema::encode(&borrowed).unwrap(), raw);
        let mut c = Cached::default();
        fill_structure(&mut c, &raw, CachedFields::ALL, What(1, 1)).unwrap();
        assert_eq!(
            (c.body, c.body_structure, c.parts),
            (s.body.clone(), s.body_structure.clone(), s.parts.clone())
        );
        let only_bs = CachedFields {
            body_structure: true,
            ..CachedFields::default()
        };
        let mut c = Cached::default();
        fill_structure(&mut c, &raw, only_bs, What(1, 1)).unwrap();
        assert_eq!(c.body_structure, s.body_structure);
        assert!(c.body.is_empty());
        assert_eq!(c.parts, PartRecord::default());
        let err = fill_structure(&mut c, &raw[..3], CachedFields::ALL, What(7, 9)).unwrap_err();
        assert!(err.to_string().contains("cache-structure 7/9"), "{err}");
    }
}
