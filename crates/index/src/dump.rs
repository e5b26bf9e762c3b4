//! Human-readable rendering of index contents for `maildex index dump` (in the spirit of
//! `doveadm dump`): the mailbox header, then each record with its cached fields and part tree.

use std::fmt::Write as _;

use crate::schema::{flag, MailboxRecord, MessageRecord, PartKindRecord, PartRecord};
use crate::{MailboxId, Uid};

/// Renders a mailbox header record.
pub fn mailbox(id: MailboxId, m: &MailboxRecord) -> String {
    let mut s = String::new();
    let c = &m.counts;
    let _ = writeln!(s, "mailbox {id} {:?}", m.name);
    let _ = writeln!(s, "  uidvalidity      {}", m.uidvalidity);
    let _ = writeln!(s, "  uid_next         {}", m.uid_next);
    let _ = writeln!(s, "  highest_modseq   {}", m.highest_modseq);
    let _ = writeln!(s, "  first_recent_uid {}", m.first_recent_uid);
    let _ = writeln!(
        s,
        "  counts           messages={} unseen={} recent={} deleted={} vsize={}",
        c.messages, c.unseen, c.recent, c.deleted, c.vsize
    );
    let _ = writeln!(
        s,
        "  new/ stamp       mtime_ns={} ino={}",
        m.new_stamp.mtime_ns, m.new_stamp.ino
    );
    let _ = writeln!(
        s,
        "  cur/ stamp       mtime_ns={} ino={}",
        m.cur_stamp.mtime_ns, m.cur_stamp.ino
    );
    let _ = writeln!(
        s,
        "  uidlist stamp    mtime_ns={} ino={} size={}",
        m.uidlist_stamp.mtime_ns, m.uidlist_stamp.ino, m.uidlist_stamp.size
    );
    let _ = writeln!(s, "  keywords         {:?}", m.keywords);
    let _ = writeln!(s, "  learned headers  {:?}", m.learned_headers);
    let _ = writeln!(
        s,
        "  expunge log      {} tombstones above modseq {}",
        m.tombstones, m.expunge_floor
    );
    s
}

/// IMAP names of the system flags in `bits`.
pub fn flag_names(bits: u8) -> Vec<&'static str> {
    [
        (flag::SEEN, "\\Seen"),
        (flag::ANSWERED, "\\Answered"),
        (flag::FLAGGED, "\\Flagged"),
        (flag::DELETED, "\\Deleted"),
        (flag::DRAFT, "\\Draft"),
        (flag::PASSED, "$Forwarded(P)"),
    ]
    .into_iter()
    .filter(|(b, _)| bits & b != 0)
    .map(|(_, n)| n)
    .collect()
}

/// Names of the keywords in `bits`, through the mailbox's keyword table.
pub fn keyword_names(bits: u32, table: &[String]) -> Vec<String> {
    (0..32)
        .filter(|i| bits & (1 << i) != 0)
        .map(|i| {
            table
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("?{}", (b'a' + i as u8) as char))
        })
        .collect()
}

fn show_bytes(b: &[u8]) -> String {
    String::from_utf8_lossy(b)
        .replace('\r', "")
        .trim_end()
        .replace('\n', "\n      ")
}

fn part_tree(s: &mut String, p: &PartRecord, number: &str, depth: usize) {
    let pad = "  ".repeat(depth + 2);
    let kind = match &p.kind {
        PartKindRecord::Single => "single",
        PartKindRecord::Multipart(_) => "multipart",
        PartKindRecord::Message(_) => "message/rfc822",
    };
    let _ = writeln!(
        s,
        "{pad}[{}] {kind} header={}..{} body={}..{} header_vsize={} body_vsize={} lines={}",
        if number.is_empty() { "root" } else { number },
        p.header_start,
        p.body_start,
        p.body_start,
        p.end,
        p.header_vsize,
        p.body_vsize,
        p.lines
    );
    let sub = |i: usize| {
        if number.is_empty() {
            format!("{}", i + 1)
        } else {
            format!("{number}.{}", i + 1)
        }
    };
    match &p.kind {
        PartKindRecord::Single => {}
        PartKindRecord::Multipart(children) => {
            for (i, c) in children.iter().enumerate() {
                part_tree(s, c, &sub(i), depth + 1);
            }
        }
        PartKindRecord::Message(inner) => part_tree(s, inner, number, depth + 1),
    }
}

/// Renders one message record; `header_blocks` is the size of its stored header blocks.
pub fn message(uid: Uid, rec: &MessageRecord, keywords: &[String], header_blocks: usize) -> String {
    let (m, c) = (&rec.state, &rec.cached);
    let mut s = String::new();
    let _ = writeln!(s, "  uid {uid}");
    let _ = writeln!(
        s,
        "    file           {}{}",
        if m.in_new { "new/" } else { "cur/" },
        m.file_name
    );
    let _ = writeln!(s, "    flags          {:?}", flag_names(m.flags));
    let _ = writeln!(
        s,
        "    keywords       {:?}",
        keyword_names(m.keywords, keywords)
    );
    let _ = writeln!(s, "    modseq         {}", m.modseq);
    let _ = writeln!(s, "    internal_date  {}", m.internal_date);
    let _ = writeln!(s, "    save_date      {}", m.save_date);
    let _ = writeln!(s, "    size           {} (RFC822.SIZE {})", m.size, m.vsize);
    let _ = writeln!(s, "    header blocks  {header_blocks} bytes");
    let _ = writeln!(s, "    hot headers    {}", show_bytes(&c.hot_headers));
    let _ = writeln!(
        s,
        "    envelope       {}",
        String::from_utf8_lossy(&c.envelope)
    );
    let _ = writeln!(
        s,
        "    bodystructure  {}",
        String::from_utf8_lossy(&c.body_structure)
    );
    let _ = writeln!(s, "    parts");
    part_tree(&mut s, &c.parts, "", 0);
    s
}

/// The page use of each database of the index (`index dump`'s last block): entries, pages
/// by kind, and their bytes with pages of `page` bytes.
pub fn page_stats(stats: &[crate::PageStats], page: usize) -> String {
    let mut out = format!("databases (pages of {page} bytes)\n");
    for s in stats {
        let pages = s.leaf_pages + s.overflow_pages + s.branch_pages;
        let _ = writeln!(
            out,
            "  {:<16} {} entries, {pages} pages ({} leaf, {} overflow, {} branch), {} bytes",
            s.name,
            s.entries,
            s.leaf_pages,
            s.overflow_pages,
            s.branch_pages,
            pages * page
        );
    }
    out
}

/// The `fts-text` line of a mailbox: how many messages have a full-text record, and
/// their bytes uncompressed (stored in zstd segments of sixteen: the database's pages are
/// in `index dump`'s last block, [`page_stats`]).
pub fn text_stats(r: &crate::Reader<'_>, id: MailboxId) -> Result<String, crate::IndexError> {
    let (mut n, mut plain) = (0u64, 0u64);
    r.for_each_fts(crate::Fts::Text, id, Uid::MIN..=Uid::MAX, |_, t| {
        n += 1;
        plain += t.len() as u64;
        Ok(std::ops::ControlFlow::Continue(()))
    })?;
    let (covered, overflow) = (r.words_covered(id)?.len(), r.words_overflow(id)?.len());
    // (distinct words, postings) of a kind
    let count = |kind| -> Result<(u64, u64), crate::IndexError> {
        let (mut words, mut postings) = (0u64, 0u64);
        let mut last: Vec<u8> = Vec::new();
        r.for_each_word(id, kind, |word, list| {
            if word != last.as_slice() {
                words += 1;
                last = word.to_vec();
            }
            crate::words::for_each_posting(list, |_| postings += 1);
            std::ops::ControlFlow::Continue(())
        })?;
        Ok((words, postings))
    };
    let (words, postings) = count(crate::WordKind::Body)?;
    let (header, header_postings) = count(crate::WordKind::Header)?;
    let mut recent = 0;
    r.for_each_recent_words(id, crate::WordKind::Body, |_, _| recent += 1)?;
    Ok(format!(
        "  fts-text         {n} records, {plain} bytes uncompressed\n\
         \x20 fts-words        {words} words, {postings} postings; {covered} messages covered, {overflow} of them without words, {recent} waiting to be merged; header words {header}, {header_postings} postings\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_flags_and_keywords() {
        assert_eq!(
            flag_names(flag::SEEN | flag::DELETED),
            vec!["\\Seen", "\\Deleted"]
        );
        let table = vec!["$Junk".to_string(), "work".to_string()];
        assert_eq!(keyword_names(0b11, &table), vec!["$Junk", "work"]);
        assert_eq!(keyword_names(0b100, &table), vec!["?c"]);
    }
}
