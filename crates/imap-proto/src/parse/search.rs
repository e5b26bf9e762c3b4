//! SEARCH (RFC 3501 §6.4.4 and §9 `search-key`; RFC 4731 §3.1 RETURN;
//! RFC 5032 §3 OLDER/YOUNGER; RFC 5182 `$`; RFC 7162 §3.1.5 MODSEQ), and SORT and
//! THREAD (RFC 5256 §5, RFC 5267 §3 ESORT, RFC 5957 §4), which share its criteria.

use super::core::Parser;
use super::{fail, PErr, PResult};
use crate::error::ParseError;
use crate::search::{
    SearchArgs, SearchKey, SearchReturn, SortArgs, SortCriterion, SortKey, ThreadAlgorithm,
    ThreadArgs,
};

/// Everything after `SEARCH`:
/// `[SP "RETURN" SP "(" opts ")"] [SP "CHARSET" SP astring] 1*(SP key)`.
pub(crate) fn search(p: &mut Parser<'_>) -> PResult<SearchArgs> {
    p.sp()?;
    let returns = return_opts(p)?;
    let mut charset = None;
    if p.eat_word(b"CHARSET") {
        p.sp()?;
        charset = Some(charset_arg(p)?);
        p.sp()?;
    }
    Ok(SearchArgs {
        charset,
        returns,
        keys: keys(p)?,
    })
}

/// `"RETURN" SP "(" [opt *(SP opt)] ")" SP` when it comes next (RFC 4731 §3.1).
fn return_opts(p: &mut Parser<'_>) -> PResult<Option<Vec<SearchReturn>>> {
    if !p.eat_word(b"RETURN") {
        return Ok(None);
    }
    p.sp()?;
    p.expect(b'(', "RETURN options")?;
    let mut opts = Vec::new();
    if !p.eat(b')') {
        loop {
            let o = match p.word()?.as_str() {
                "MIN" => SearchReturn::Min,
                "MAX" => SearchReturn::Max,
                "ALL" => SearchReturn::All,
                "COUNT" => SearchReturn::Count,
                "SAVE" => SearchReturn::Save,
                other => return fail(format!("Unknown SEARCH return option {other}")),
            };
            if !opts.contains(&o) {
                opts.push(o);
            }
            if p.eat(b')') {
                break;
            }
            p.sp()?;
        }
    }
    p.sp()?;
    Ok(Some(opts))
}

fn charset_arg(p: &mut Parser<'_>) -> PResult<String> {
    let cs = p.astring()?;
    Ok(String::from_utf8_lossy(&cs).to_ascii_uppercase())
}

/// `search-key *(SP search-key)` to the end of the command.
fn keys(p: &mut Parser<'_>) -> PResult<Vec<SearchKey>> {
    let mut out = Vec::new();
    let mut count = 0usize;
    loop {
        out.push(key(p, &mut count)?);
        if p.at_end() {
            return Ok(out);
        }
        p.sp()?;
    }
}

/// Everything after `SORT` (RFC 5256 §5, RFC 5267 §3):
/// `[SP "RETURN" SP "(" opts ")"] SP sort-criteria SP charset 1*(SP search-key)`.
pub(crate) fn sort(p: &mut Parser<'_>) -> PResult<SortArgs> {
    p.sp()?;
    let returns = return_opts(p)?;
    p.expect(b'(', "sort criteria")?;
    let mut criteria = Vec::new();
    loop {
        let mut word = p.word()?;
        let reverse = word == "REVERSE";
        if reverse {
            p.sp()?;
            word = p.word()?;
        }
        let key = match word.as_str() {
            "ARRIVAL" => SortKey::Arrival,
            "CC" => SortKey::Cc,
            "DATE" => SortKey::Date,
            "FROM" => SortKey::From,
            "SIZE" => SortKey::Size,
            "SUBJECT" => SortKey::Subject,
            "TO" => SortKey::To,
            "DISPLAYFROM" => SortKey::DisplayFrom,
            "DISPLAYTO" => SortKey::DisplayTo,
            other => {
                let shown: String = other.chars().take(32).collect();
                return fail(format!("Unknown sort key {shown}"));
            }
        };
        criteria.push(SortCriterion { reverse, key });
        p.check_items(criteria.len())?;
        if p.eat(b')') {
            break;
        }
        p.sp()?;
    }
    p.sp()?;
    let charset = charset_arg(p)?;
    p.sp()?;
    Ok(SortArgs {
        returns,
        criteria,
        charset,
        keys: keys(p)?,
    })
}

/// Everything after `THREAD` (RFC 5256 §5): `SP thread-alg SP charset 1*(SP search-key)`.
pub(crate) fn thread(p: &mut Parser<'_>) -> PResult<ThreadArgs> {
    p.sp()?;
    let algorithm = match p.word()?.as_str() {
        "ORDEREDSUBJECT" => ThreadAlgorithm::OrderedSubject,
        "REFERENCES" => ThreadAlgorithm::References,
        "REFS" => ThreadAlgorithm::Refs,
        other => {
            let shown: String = other.chars().take(32).collect();
            return fail(format!("Unknown thread algorithm {shown}"));
        }
    };
    p.sp()?;
    let charset = charset_arg(p)?;
    p.sp()?;
    Ok(ThreadArgs {
        algorithm,
        charset,
        keys: keys(p)?,
    })
}

/// Deepest NOT/OR/parenthesis recursion of one search key. Parentheses
/// also count against `max_depth`; NOT and OR chains (`OR OR OR ...` from
/// real clients) get this larger, fixed bound, which keeps the recursion
/// within a small stack.
const MAX_KEY_RECURSION: usize = 128;

/// One `search-key`. Every key, including each NOT and OR, counts towards
/// `max_items`, so neither a long program nor `NOT NOT NOT ...` can exhaust
/// memory or stack.
fn key(p: &mut Parser<'_>, count: &mut usize) -> PResult<SearchKey> {
    *count += 1;
    p.check_items(*count)?;
    p.rec_depth += 1;
    if p.rec_depth > MAX_KEY_RECURSION {
        return Err(PErr::Fail(ParseError::Limit(
            "Search key too deeply nested".into(),
        )));
    }
    let k = key_inner(p, count)?;
    p.rec_depth -= 1;
    Ok(k)
}

fn key_inner(p: &mut Parser<'_>, count: &mut usize) -> PResult<SearchKey> {
    use SearchKey as K;
    match p.peek() {
        Some(b'(') => {
            p.eat(b'(');
            p.enter()?;
            let mut keys = Vec::new();
            loop {
                keys.push(key(p, count)?);
                if p.eat(b')') {
                    p.leave();
                    return Ok(K::And(keys));
                }
                p.sp()?;
            }
        }
        Some(b'0'..=b'9' | b'*' | b'$') => return Ok(K::SequenceSet(p.sequence_set()?)),
        _ => {}
    }
    let word = p.word().or_else(|e| {
        if p.at_end() {
            Err(e)
        } else {
            fail("Invalid search key")
        }
    })?;
    let k = match word.as_str() {
        "ALL" => K::All,
        "ANSWERED" => K::Answered,
        "DELETED" => K::Deleted,
        "DRAFT" => K::Draft,
        "FLAGGED" => K::Flagged,
        "NEW" => K::New,
        "OLD" => K::Old,
        "RECENT" => K::Recent,
        "SEEN" => K::Seen,
        "UNANSWERED" => K::Unanswered,
        "UNDELETED" => K::Undeleted,
        "UNDRAFT" => K::Undraft,
        "UNFLAGGED" => K::Unflagged,
        "UNSEEN" => K::Unseen,
        "BCC" => K::Bcc(arg_astring(p)?),
        "BODY" => K::Body(arg_astring(p)?),
        "CC" => K::Cc(arg_astring(p)?),
        "FROM" => K::From(arg_astring(p)?),
        "SUBJECT" => K::Subject(arg_astring(p)?),
        "TEXT" => K::Text(arg_astring(p)?),
        "TO" => K::To(arg_astring(p)?),
        "HEADER" => {
            let name = arg_astring(p)?;
            K::Header(name, arg_astring(p)?)
        }
        "BEFORE" => K::Before(arg_date(p)?),
        "ON" => K::On(arg_date(p)?),
        "SINCE" => K::Since(arg_date(p)?),
        "SENTBEFORE" => K::SentBefore(arg_date(p)?),
        "SENTON" => K::SentOn(arg_date(p)?),
        "SENTSINCE" => K::SentSince(arg_date(p)?),
        "KEYWORD" | "UNKEYWORD" => {
            p.sp()?;
            let kw = String::from_utf8_lossy(p.atom()?).into_owned();
            if word == "KEYWORD" {
                K::Keyword(kw)
            } else {
                K::Unkeyword(kw)
            }
        }
        "LARGER" => {
            p.sp()?;
            K::Larger(p.number()?)
        }
        "SMALLER" => {
            p.sp()?;
            K::Smaller(p.number()?)
        }
        "OLDER" => {
            p.sp()?;
            K::Older(p.nz_number()?)
        }
        "YOUNGER" => {
            p.sp()?;
            K::Younger(p.nz_number()?)
        }
        "UID" => {
            p.sp()?;
            K::Uid(p.sequence_set()?)
        }
        "NOT" => {
            p.sp()?;
            K::Not(Box::new(key(p, count)?))
        }
        "OR" => {
            p.sp()?;
            let a = key(p, count)?;
            p.sp()?;
            K::Or(Box::new(a), Box::new(key(p, count)?))
        }
        "MODSEQ" => {
            p.sp()?;
            // RFC 7162 §3.1.5: [entry-name SP entry-type-req SP] modseq
            if p.peek() == Some(b'"') {
                p.string()?;
                p.sp()?;
                let t = p.word()?;
                if !matches!(t.as_str(), "PRIV" | "SHARED" | "ALL") {
                    return fail("Invalid MODSEQ entry type");
                }
                p.sp()?;
            }
            K::ModSeq(p.number64()?)
        }
        other => {
            let shown: String = other.chars().take(32).collect();
            return fail(format!("Unknown search key {shown}"));
        }
    };
    Ok(k)
}

fn arg_astring(p: &mut Parser<'_>) -> PResult<Vec<u8>> {
    p.sp()?;
    p.astring()
}

fn arg_date(p: &mut Parser<'_>) -> PResult<crate::types::Date> {
    p.sp()?;
    p.date()
}
