//! i;unicode-casemap (RFC 5051 §2) as Dovecot 2.3 computes it, the collation of SORT and
//! THREAD's base subject (RFC 5256 §2.1): each character is replaced by its titlecase, then
//! by its decomposition mapping, and the resulting UTF-8 strings compare by octet.
//!
//! The decomposition is the one step the Unicode Character Database gives (canonical or
//! compatibility: `Ａ` and `𝐀` are `A`, `ﬁ` is `fi`, `Ё` is `Е` U+0308, `Ⅻ` is `XII`), not
//! NFD or NFKD: a mapping that contains a decomposable character is not decomposed again
//! (`Å` U+212B is `Å` U+00C5, not `A` U+030A; `Ǖ` is `Ü` U+0304), which is what Dovecot's
//! table does (checked against Dovecot by `tests/it/imap/dovecot_sort.rs`). That rule is
//! why this is not the `unicode-normalization` crate, whose decompositions are recursive.
//! The table is `data/casemap.txt`, generated from UnicodeData.txt by
//! `scripts/gen-casemap.py`; Hangul syllables decompose by the algorithm of Unicode §3.12.

use std::sync::OnceLock;

/// The parsed table: titlecase mappings and decompositions, each sorted by code point.
struct Table {
    title: Vec<(u32, char)>,
    /// code point -> (start, length) in `chars`
    decomp: Vec<(u32, u32, u32)>,
    chars: Vec<char>,
}

static TABLE: OnceLock<Table> = OnceLock::new();

fn table() -> &'static Table {
    TABLE.get_or_init(|| parse(include_str!("../data/casemap.txt")))
}

/// Reads the generated table. It is a file of this crate, checked by the unit tests, so a
/// line that does not parse is skipped rather than reported.
fn parse(text: &str) -> Table {
    let mut t = Table {
        title: Vec::new(),
        decomp: Vec::new(),
        chars: Vec::new(),
    };
    let hex = |s: &str| u32::from_str_radix(s, 16).ok();
    for line in text.lines() {
        let mut it = line.split(' ');
        let (kind, key) = match (it.next(), it.next().and_then(hex)) {
            (Some(k), Some(key)) => (k, key),
            _ => continue,
        };
        let values: Vec<char> = it.filter_map(hex).filter_map(char::from_u32).collect();
        match (kind, values.as_slice()) {
            ("T", [c]) => t.title.push((key, *c)),
            ("D", [_, ..]) => {
                t.decomp
                    .push((key, t.chars.len() as u32, values.len() as u32));
                t.chars.extend_from_slice(&values);
            }
            _ => {}
        }
    }
    t.title.sort_unstable_by_key(|e| e.0);
    t.decomp.sort_unstable_by_key(|e| e.0);
    t
}

const HANGUL_FIRST: u32 = 0xAC00;
const HANGUL_LAST: u32 = 0xD7A3;

/// `s` under i;unicode-casemap: titlecase, then one step of decomposition.
pub fn casemap(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    if s.is_ascii() {
        out.push_str(s);
        out.make_ascii_uppercase();
        return out;
    }
    let t = table();
    for c in s.chars() {
        if c.is_ascii() {
            out.push(c.to_ascii_uppercase());
            continue;
        }
        let c = match t.title.binary_search_by_key(&(c as u32), |e| e.0) {
            Ok(i) => t.title[i].1,
            Err(_) => c,
        };
        let cp = c as u32;
        if (HANGUL_FIRST..=HANGUL_LAST).contains(&cp) {
            hangul(cp, &mut out);
            continue;
        }
        match t.decomp.binary_search_by_key(&cp, |e| e.0) {
            Ok(i) => {
                let (_, start, len) = t.decomp[i];
                out.extend(&t.chars[start as usize..(start + len) as usize]);
            }
            Err(_) => out.push(c),
        }
    }
    out
}

/// A precomposed Hangul syllable as its leading consonant, vowel and (if any) trailing
/// consonant jamo (Unicode §3.12, "Hangul Syllable Decomposition").
fn hangul(cp: u32, out: &mut String) {
    const L_BASE: u32 = 0x1100;
    const V_BASE: u32 = 0x1161;
    const T_BASE: u32 = 0x11A7;
    const T_COUNT: u32 = 28;
    const N_COUNT: u32 = 21 * T_COUNT;
    let s = cp - HANGUL_FIRST;
    let jamo = [
        L_BASE + s / N_COUNT,
        V_BASE + (s % N_COUNT) / T_COUNT,
        T_BASE + s % T_COUNT,
    ];
    let n = if jamo[2] == T_BASE { 2 } else { 3 };
    out.extend(jamo[..n].iter().filter_map(|&j| char::from_u32(j)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses_whole() {
        let text = include_str!("../data/casemap.txt");
        let lines = text.lines().filter(|l| !l.starts_with('#')).count();
        let t = table();
        assert_eq!(t.title.len() + t.decomp.len(), lines);
        assert!(t.title.len() > 1_000 && t.decomp.len() > 5_000);
    }

    #[test]
    fn titlecase_then_one_step_of_decomposition() {
        assert_eq!(casemap("straße é"), "STRAßE E\u{301}");
        assert_eq!(casemap("ǆ"), "ǅ");
        assert_eq!(casemap("ＡpＰle"), "APPLE");
        assert_eq!(casemap("ﬁsh"), "fiSH");
        assert_eq!(casemap("ёлка"), "Е\u{308}ЛКА");
        assert_eq!(casemap("ⅻ ² ½"), "XII 2 1\u{2044}2");
        assert_eq!(casemap("\u{212B}"), "\u{C5}");
        assert_eq!(casemap("ǖ"), "\u{DC}\u{304}");
        assert_eq!(casemap("µ"), "\u{39C}");
        assert_eq!(casemap("한"), "\u{1112}\u{1161}\u{11AB}");
        assert_eq!(casemap("가"), "\u{1100}\u{1161}");
        assert_eq!(casemap("x\u{A0}y"), "X Y");
    }
}
