//! SORT (RFC 5256 §3, RFC 5957 SORT=DISPLAY) over the keys the index stores, and its
//! answers: `* SORT` and, for `SORT RETURN (...)`, ESORT's `* ESEARCH` (RFC 5267 §3).
//!
//! Pure: the session loads the keys ([`maildex_store::UserStore::sort_keys`]) of the
//! messages SEARCH's evaluator matched and asks [`order`]. Ties are broken by sequence
//! number, ascending whatever REVERSE says, as Dovecot 2.3 does (`index_sort_node_cmp_type`
//! ends with the sequence).

use std::cmp::Ordering;

use maildex_imap_proto::{encode, SearchReturn, SortCriterion, SortKey, Tag};

use crate::search::wants;
use maildex_store::records::SortNeed;
use maildex_store::{ModSeq, SortEntry};

/// Compares two messages by one key (RFC 5256 §3): dates and sizes as numbers, the
/// others as the stored strings (already i;unicode-casemap'ed) byte by byte.
fn by_key(key: SortKey, a: &SortEntry, b: &SortEntry) -> Ordering {
    match key {
        SortKey::Arrival => a.internal_date.cmp(&b.internal_date),
        SortKey::Date => a.date().cmp(&b.date()),
        SortKey::Size => a.vsize.cmp(&b.vsize),
        SortKey::Subject => a.keys.subject.cmp(&b.keys.subject),
        SortKey::From => a.keys.from.cmp(&b.keys.from),
        SortKey::To => a.keys.to.cmp(&b.keys.to),
        SortKey::Cc => a.keys.cc.cmp(&b.keys.cc),
        SortKey::DisplayFrom => a.keys.display_from.cmp(&b.keys.display_from),
        SortKey::DisplayTo => a.keys.display_to.cmp(&b.keys.display_to),
    }
}

/// What of the stored keys `criteria` compare (ARRIVAL and SIZE come from the state).
pub fn need(criteria: &[SortCriterion]) -> SortNeed {
    criteria
        .iter()
        .map(|c| match c.key {
            SortKey::Arrival | SortKey::Size => SortNeed::NOTHING,
            SortKey::Date => SortNeed::SENT_DATE,
            SortKey::Subject => SortNeed::SUBJECT,
            SortKey::From => SortNeed::FROM,
            SortKey::To => SortNeed::TO,
            SortKey::Cc => SortNeed::CC,
            SortKey::DisplayFrom => SortNeed::DISPLAY_FROM,
            SortKey::DisplayTo => SortNeed::DISPLAY_TO,
        })
        .fold(SortNeed::NOTHING, SortNeed::union)
}

/// An 8-byte prefix of `e`'s key `key` whose order is the key's order where two
/// prefixes differ: numbers mapped to unsigned, strings' first 8 bytes big-endian (zero
/// padded, so a shorter string that is a prefix of a longer one stays first). Two equal
/// prefixes decide nothing and the whole keys are compared.
fn prefix(key: SortKey, e: &SortEntry) -> u64 {
    fn text(s: &str) -> u64 {
        let mut b = [0u8; 8];
        let n = s.len().min(8);
        b[..n].copy_from_slice(&s.as_bytes()[..n]);
        u64::from_be_bytes(b)
    }
    let signed = |v: i64| (v as u64) ^ (1 << 63);
    match key {
        SortKey::Arrival => signed(e.internal_date),
        SortKey::Date => signed(e.date()),
        SortKey::Size => e.vsize,
        SortKey::Subject => text(&e.keys.subject),
        SortKey::From => text(&e.keys.from),
        SortKey::To => text(&e.keys.to),
        SortKey::Cc => text(&e.keys.cc),
        SortKey::DisplayFrom => text(&e.keys.display_from),
        SortKey::DisplayTo => text(&e.keys.display_to),
    }
}

/// The order of `messages` under `criteria`: indexes into `messages`, of which `parts`
/// gives the sequence number and the keys (the session's `(sequence, entry)` pairs, or
/// the store's entries numbered by UID, without copying them into pairs).
///
/// Two passes, so that sorting a 30,000-message folder by subject mostly sorts integers:
/// first every message as one `u128` (the first criterion's 8-byte [`prefix`], inverted
/// for REVERSE, then the sequence number, then the index), which puts it in order
/// wherever prefixes differ; then each run of equal prefixes is sorted by the whole
/// criteria with a stable sort, which keeps the run's sequence order for ties (and sees
/// a run of equal keys, a thread's base subject, in one linear pass).
pub fn order<T>(
    messages: &[T],
    criteria: &[SortCriterion],
    parts: impl Fn(&T) -> (u32, &SortEntry),
) -> Vec<usize> {
    let first = criteria.first();
    let mut keyed: Vec<u128> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let (seq, e) = parts(m);
            let p = first.map_or(0, |c| {
                let p = prefix(c.key, e);
                if c.reverse {
                    !p
                } else {
                    p
                }
            });
            // indexes past u32 do not occur: a mailbox holds at most 2^32 - 1 UIDs
            (u128::from(p) << 64) | (u128::from(seq) << 32) | (i as u128 & 0xffff_ffff)
        })
        .collect();
    keyed.sort_unstable();
    let index = |k: &u128| (*k & 0xffff_ffff) as usize;
    let directed = |reverse: bool, o: Ordering| if reverse { o.reverse() } else { o };
    for run in keyed.chunk_by_mut(|a, b| a >> 64 == b >> 64) {
        if run.len() > 1 {
            run.sort_by(|a, b| {
                let (a, b) = (parts(&messages[index(a)]).1, parts(&messages[index(b)]).1);
                criteria
                    .iter()
                    .map(|c| directed(c.reverse, by_key(c.key, a, b)))
                    .find(|o| o.is_ne())
                    .unwrap_or(Ordering::Equal)
            });
        }
    }
    keyed.iter().map(index).collect()
}

/// The parts [`order`] reads of the session's `(sequence number, entry)` pairs.
pub fn pair(m: &(u32, SortEntry)) -> (u32, &SortEntry) {
    (m.0, &m.1)
}

/// Writes `* SORT 3 1 2\r\n` (RFC 5256 §4: the numbers in sort order; `* SORT\r\n` when
/// nothing matched); `modseq` adds `(MODSEQ n)` (RFC 7162 §3.1.5) when some matched.
pub fn sort_response(out: &mut Vec<u8>, numbers: &[u32], modseq: Option<ModSeq>) {
    crate::search::numbers(out, b"* SORT", numbers, modseq);
}

/// Writes the ESEARCH answer of `SORT RETURN (...)` (RFC 5267 §3.2): MIN and MAX are the
/// first and the last message in sort order, ALL lists them in sort order (ascending runs
/// joined as `a:b`), COUNT and MODSEQ as for SEARCH; items in Dovecot's order (MIN MAX ALL
/// COUNT MODSEQ). Nothing is written when SAVE is the only option (RFC 5182 §2.1).
pub fn esort(
    out: &mut Vec<u8>,
    tag: &Tag,
    uid: bool,
    returns: &[SearchReturn],
    numbers: &[u32],
    modseq: Option<ModSeq>,
) {
    if !returns.is_empty() && returns.iter().all(|r| *r == SearchReturn::Save) {
        return;
    }
    out.extend_from_slice(b"* ESEARCH (TAG ");
    encode::string(out, tag.as_str().as_bytes());
    out.push(b')');
    if uid {
        out.extend_from_slice(b" UID");
    }
    if let (Some(first), Some(last)) = (numbers.first(), numbers.last()) {
        if wants(returns, SearchReturn::Min) {
            out.extend_from_slice(format!(" MIN {first}").as_bytes());
        }
        if wants(returns, SearchReturn::Max) {
            out.extend_from_slice(format!(" MAX {last}").as_bytes());
        }
        if wants(returns, SearchReturn::All) {
            out.extend_from_slice(b" ALL ");
            ordered_set(out, numbers);
        }
    }
    if wants(returns, SearchReturn::Count) {
        out.extend_from_slice(format!(" COUNT {}", numbers.len()).as_bytes());
    }
    if let (false, Some(m)) = (numbers.is_empty(), modseq) {
        out.extend_from_slice(format!(" MODSEQ {m}").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

/// A sequence-set that keeps the given order: runs of consecutive ascending numbers as
/// `a:b`, joined by commas.
fn ordered_set(out: &mut Vec<u8>, numbers: &[u32]) {
    let mut i = 0;
    while i < numbers.len() {
        if i > 0 {
            out.push(b',');
        }
        let start = numbers[i];
        let mut end = start;
        while i + 1 < numbers.len() && end.checked_add(1) == Some(numbers[i + 1]) {
            end = numbers[i + 1];
            i += 1;
        }
        if start == end {
            out.extend_from_slice(start.to_string().as_bytes());
        } else {
            out.extend_from_slice(format!("{start}:{end}").as_bytes());
        }
        i += 1;
    }
}

/// What `SORT RETURN (... SAVE ...)` stores as `$` (RFC 5182 §2.1, RFC 5267 §3): the
/// whole result, or only the first and/or last in sort order when SAVE comes with MIN
/// and/or MAX alone. `uids` are in sort order; the saved set is sorted.
pub fn save_sorted<T: Copy + Ord>(returns: &[SearchReturn], uids: &[T]) -> Vec<T> {
    let min = returns.contains(&SearchReturn::Min);
    let max = returns.contains(&SearchReturn::Max);
    let all_or_count =
        returns.contains(&SearchReturn::All) || returns.contains(&SearchReturn::Count);
    let mut v: Vec<T> = if (min || max) && !all_or_count {
        let first = uids.first().filter(|_| min);
        let last = uids.last().filter(|_| max);
        first.into_iter().chain(last).copied().collect()
    } else {
        uids.to_vec()
    };
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use maildex_store::records::SortKeys;

    fn entry(date: i64, arrival: i64, size: u64, subject: &str) -> SortEntry {
        SortEntry {
            uid: maildex_store::Uid(0),
            internal_date: arrival,
            vsize: size,
            keys: SortKeys {
                sent_date: (date != 0).then_some(date),
                subject: subject.into(),
                ..Default::default()
            },
        }
    }

    fn c(reverse: bool, key: SortKey) -> SortCriterion {
        SortCriterion { reverse, key }
    }

    proptest::proptest! {
        /// The prefix shortcut never changes the order: [`order`] equals a plain stable
        /// sort on the whole keys, on strings that share long prefixes, hold NULs or
        /// differ only in length, and dates on both sides of the epoch.
        #[test]
        fn prefixes_keep_the_order_of_the_whole_keys(
            msgs in proptest::collection::vec(
                ("(ab|a\\x00|abcdefgh|é){0,4}", -3i64..3, 0u64..3, "[ab]{0,9}"),
                0..40,
            ),
            crit in proptest::collection::vec((proptest::bool::ANY, 0usize..5), 1..3),
        ) {
            let keys = [SortKey::Subject, SortKey::Date, SortKey::Size, SortKey::From, SortKey::Arrival];
            let msgs: Vec<(u32, SortEntry)> = msgs
                .into_iter()
                .enumerate()
                .map(|(i, (subject, date, size, from))| {
                    let mut e = entry(date * 1_000_000_000_000, -date, size, &subject);
                    e.keys.from = from;
                    (i as u32 + 1, e)
                })
                .collect();
            let criteria: Vec<SortCriterion> =
                crit.into_iter().map(|(r, k)| c(r, keys[k])).collect();
            let mut expected: Vec<usize> = (0..msgs.len()).collect();
            expected.sort_by(|&i, &j| {
                criteria
                    .iter()
                    .map(|c| {
                        let o = by_key(c.key, &msgs[i].1, &msgs[j].1);
                        if c.reverse { o.reverse() } else { o }
                    })
                    .find(|o| o.is_ne())
                    .unwrap_or(Ordering::Equal)
            });
            proptest::prop_assert_eq!(order(&msgs, &criteria, pair), expected);
        }
    }

    #[test]
    fn keys_in_precedence_then_sequence_ascending_even_when_reversed() {
        let msgs = vec![
            (1, entry(100, 5, 10, "B")),
            (2, entry(0, 50, 10, "A")),
            (3, entry(100, 1, 30, "A")),
            (4, entry(20, 9, 20, "B")),
        ];
        let nums = |o: Vec<usize>| o.into_iter().map(|i| msgs[i].0).collect::<Vec<_>>();
        // DATE: 4 (20), 2 (no date: arrival 50), then 1 and 3 tie at 100 (sequence order)
        assert_eq!(
            nums(order(&msgs, &[c(false, SortKey::Date)], pair)),
            [4, 2, 1, 3]
        );
        assert_eq!(
            nums(order(&msgs, &[c(true, SortKey::Date)], pair)),
            [1, 3, 2, 4]
        );
        assert_eq!(
            nums(order(&msgs, &[c(false, SortKey::Arrival)], pair)),
            [3, 1, 4, 2]
        );
        assert_eq!(
            nums(order(
                &msgs,
                &[c(false, SortKey::Subject), c(true, SortKey::Size)],
                pair
            )),
            [3, 2, 4, 1]
        );
        assert_eq!(
            nums(order(&msgs, &[c(true, SortKey::Size)], pair)),
            [3, 4, 1, 2]
        );
        let need_of = |cs: &[SortCriterion]| need(cs);
        assert_eq!(
            need_of(&[c(false, SortKey::Arrival), c(true, SortKey::Size)]),
            SortNeed::NOTHING
        );
        assert_eq!(
            need_of(&[c(false, SortKey::Size), c(true, SortKey::Date)]),
            SortNeed::SENT_DATE
        );
        assert_eq!(
            need_of(&[c(false, SortKey::Date), c(false, SortKey::DisplayTo)]),
            SortNeed::SENT_DATE.union(SortNeed::DISPLAY_TO)
        );
    }

    #[test]
    fn esort_answers_in_sort_order() {
        let tag = Tag::new("a1").unwrap();
        let mut out = Vec::new();
        esort(
            &mut out,
            &tag,
            true,
            &[
                SearchReturn::Min,
                SearchReturn::Max,
                SearchReturn::Count,
                SearchReturn::All,
            ],
            &[7, 3, 4, 5, 1, 9],
            None,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "* ESEARCH (TAG \"a1\") UID MIN 7 MAX 9 ALL 7,3:5,1,9 COUNT 6\r\n"
        );
        let mut out = Vec::new();
        esort(&mut out, &tag, false, &[SearchReturn::Count], &[], None);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "* ESEARCH (TAG \"a1\") COUNT 0\r\n"
        );
        let mut out = Vec::new();
        sort_response(&mut out, &[3, 1, 2], Some(ModSeq(9)));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "* SORT 3 1 2 (MODSEQ 9)\r\n"
        );
        assert_eq!(
            save_sorted(&[SearchReturn::Save, SearchReturn::Min], &[7, 3, 9]),
            [7]
        );
        assert_eq!(save_sorted(&[SearchReturn::Save], &[7, 3, 9]), [3, 7, 9]);
    }
}
