//! SEARCH answers: `* SEARCH` (RFC 3501 §7.2.5), `* ESEARCH` (RFC 4731 §3.1)
//! and the SEARCHRES saved result (RFC 5182 §2.1).

use maildex_imap_proto::{encode, SearchReturn, Tag};
use maildex_store::ModSeq;

/// Sorted, duplicate-free copy of `results` (no copy when already so).
fn sorted<T: Copy + Ord>(results: &[T]) -> std::borrow::Cow<'_, [T]> {
    if results.windows(2).all(|w| w[0] < w[1]) {
        std::borrow::Cow::Borrowed(results)
    } else {
        let mut v = results.to_vec();
        v.sort_unstable();
        v.dedup();
        std::borrow::Cow::Owned(v)
    }
}

/// Writes `* SEARCH 1 2 3\r\n` (RFC 3501 §7.2.5; `* SEARCH\r\n` when
/// nothing matched). `results` are sequence numbers or UIDs, written in
/// ascending order; `modseq` adds `(MODSEQ n)` (RFC 7162 §3.1.5) when some matched.
pub fn search(out: &mut Vec<u8>, results: &[u32], modseq: Option<ModSeq>) {
    numbers(out, b"* SEARCH", &sorted(results), modseq);
}

/// Writes `name` then ` n` for each of `numbers` in the order given, ` (MODSEQ m)` when
/// some are there and `modseq` is given, and CRLF: `* SEARCH` (RFC 3501 §7.2.5) and
/// `* SORT` (RFC 5256 §4) share the shape.
pub(crate) fn numbers(out: &mut Vec<u8>, name: &[u8], numbers: &[u32], modseq: Option<ModSeq>) {
    out.extend_from_slice(name);
    for n in numbers {
        out.push(b' ');
        out.extend_from_slice(n.to_string().as_bytes());
    }
    if let (false, Some(m)) = (numbers.is_empty(), modseq) {
        out.extend_from_slice(format!(" (MODSEQ {m})").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

/// True when `returns` asks for `r`; `RETURN ()` means `RETURN (ALL)`
/// (RFC 4731 §3.1).
pub(crate) fn wants(returns: &[SearchReturn], r: SearchReturn) -> bool {
    if returns.is_empty() {
        return r == SearchReturn::All;
    }
    returns.contains(&r)
}

/// Writes the ESEARCH answer of a `SEARCH RETURN (...)` (RFC 4731 §3.1):
/// `* ESEARCH (TAG "a1") UID MIN 1 MAX 9 COUNT 3 ALL 1:3,9\r\n`, items in
/// that order. MIN, MAX and ALL are left out when nothing matched, COUNT is
/// always written when asked (RFC 4731 §3.1). `RETURN ()` is ALL. When SAVE
/// is the only option nothing is written (RFC 5182 §2.1: the untagged
/// ESEARCH is not returned then). `results` need not be sorted. `modseq` adds `MODSEQ n`
/// (RFC 7162 §3.1.5, the highest modseq of the messages reported) when some matched.
pub fn esearch(
    out: &mut Vec<u8>,
    tag: &Tag,
    uid: bool,
    returns: &[SearchReturn],
    results: &[u32],
    modseq: Option<ModSeq>,
) {
    if !returns.is_empty() && returns.iter().all(|r| *r == SearchReturn::Save) {
        return;
    }
    let results = sorted(results);
    // Tag characters never need quoting inside a quoted string (RFC 3501
    // §9 tag: no `"` or `\`).
    out.extend_from_slice(b"* ESEARCH (TAG \"");
    out.extend_from_slice(tag.as_str().as_bytes());
    out.extend_from_slice(b"\")");
    if uid {
        out.extend_from_slice(b" UID");
    }
    if let (Some(first), Some(last)) = (results.first(), results.last()) {
        if wants(returns, SearchReturn::Min) {
            out.extend_from_slice(format!(" MIN {first}").as_bytes());
        }
        if wants(returns, SearchReturn::Max) {
            out.extend_from_slice(format!(" MAX {last}").as_bytes());
        }
    }
    if wants(returns, SearchReturn::Count) {
        out.extend_from_slice(format!(" COUNT {}", results.len()).as_bytes());
    }
    if !results.is_empty() && wants(returns, SearchReturn::All) {
        out.extend_from_slice(b" ALL ");
        encode::compact_sorted(out, &results);
    }
    if let (false, Some(m)) = (results.is_empty(), modseq) {
        out.extend_from_slice(format!(" MODSEQ {m}").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

/// What `RETURN (... SAVE ...)` stores as `$` (RFC 5182 §2.1): the whole
/// result, except that SAVE with only MIN and/or MAX (no ALL, no COUNT)
/// saves just those messages. `results` are UIDs (the session saves UIDs
/// so `$` survives expunges); returns them sorted.
pub fn save_result<T: Copy + Ord>(returns: &[SearchReturn], results: &[T]) -> Vec<T> {
    let results = sorted(results);
    let min = returns.contains(&SearchReturn::Min);
    let max = returns.contains(&SearchReturn::Max);
    let all_or_count =
        returns.contains(&SearchReturn::All) || returns.contains(&SearchReturn::Count);
    if (min || max) && !all_or_count {
        let mut v = Vec::with_capacity(2);
        if let (true, Some(&first)) = (min, results.first()) {
            v.push(first);
        }
        if let (true, Some(&last)) = (max, results.last()) {
            if v.last() != Some(&last) {
                v.push(last);
            }
        }
        return v;
    }
    results.into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use SearchReturn::*;

    fn es(uid: bool, returns: &[SearchReturn], results: &[u32]) -> String {
        let mut out = Vec::new();
        let tag = Tag::new("x").expect("tag");
        esearch(&mut out, &tag, uid, returns, results, None);
        String::from_utf8(out).expect("ascii")
    }

    #[test]
    fn esearch_items_in_order() {
        assert_eq!(
            es(true, &[All, Count, Max, Min], &[9, 1, 2, 3]),
            "* ESEARCH (TAG \"x\") UID MIN 1 MAX 9 COUNT 4 ALL 1:3,9\r\n"
        );
        assert_eq!(
            es(false, &[Min], &[5, 4]),
            "* ESEARCH (TAG \"x\") MIN 4\r\n"
        );
    }

    #[test]
    fn esearch_empty_result_keeps_count_only() {
        assert_eq!(
            es(false, &[Min, Max, All, Count], &[]),
            "* ESEARCH (TAG \"x\") COUNT 0\r\n"
        );
        assert_eq!(es(true, &[Min, All], &[]), "* ESEARCH (TAG \"x\") UID\r\n");
    }

    #[test]
    fn return_empty_means_all_and_save_alone_writes_nothing() {
        assert_eq!(
            es(false, &[], &[1, 2, 4]),
            "* ESEARCH (TAG \"x\") ALL 1:2,4\r\n"
        );
        assert_eq!(es(false, &[Save], &[1]), "");
        assert_eq!(
            es(false, &[Save, Count], &[1]),
            "* ESEARCH (TAG \"x\") COUNT 1\r\n"
        );
    }

    #[test]
    fn classic_search_line() {
        let mut out = Vec::new();
        search(&mut out, &[3, 1, 2], None);
        assert_eq!(out, b"* SEARCH 1 2 3\r\n");
        out.clear();
        search(&mut out, &[], Some(ModSeq(7)));
        assert_eq!(out, b"* SEARCH\r\n");
        out.clear();
        search(&mut out, &[4], Some(ModSeq(7)));
        assert_eq!(out, b"* SEARCH 4 (MODSEQ 7)\r\n");
    }

    #[test]
    fn saved_result_follows_min_max() {
        assert_eq!(save_result(&[Save], &[5, 1, 3]), vec![1, 3, 5]);
        assert_eq!(save_result(&[Save, Min], &[5, 1, 3]), vec![1]);
        assert_eq!(save_result(&[Save, Min, Max], &[5, 1, 3]), vec![1, 5]);
        assert_eq!(save_result(&[Save, Min, Max], &[7]), vec![7]);
        assert_eq!(save_result(&[Save, Min, Count], &[5, 1]), vec![1, 5]);
        assert_eq!(save_result::<u32>(&[Save, Max], &[]), Vec::<u32>::new());
    }
}
