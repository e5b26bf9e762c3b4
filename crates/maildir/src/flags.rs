//! System flags and keyword letters as stored in a Maildir file name's `:2,` info.
//!
//! Maildir spec (cr.yp.to/proto/maildir.html): `P` passed, `R` replied, `S` seen,
//! `T` trashed, `D` draft, `F` flagged. Dovecot stores IMAP keywords as the
//! lowercase letters `a`..`z`, letter `a + i` meaning index `i` of `dovecot-keywords`.

use std::fmt;
use std::ops::{BitOr, BitOrAssign};

/// A set of Maildir system flags.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Flags(pub u8);

/// Letters in ASCII order with their bits; file names list them in this order.
const FLAG_LETTERS: [(u8, Flags); 6] = [
    (b'D', Flags::DRAFT),
    (b'F', Flags::FLAGGED),
    (b'P', Flags::PASSED),
    (b'R', Flags::ANSWERED),
    (b'S', Flags::SEEN),
    (b'T', Flags::DELETED),
];

impl Flags {
    /// No flags.
    pub const EMPTY: Flags = Flags(0);
    /// `\Seen` — letter `S`.
    pub const SEEN: Flags = Flags(1 << 0);
    /// `\Answered` — letter `R` (replied).
    pub const ANSWERED: Flags = Flags(1 << 1);
    /// `\Flagged` — letter `F`.
    pub const FLAGGED: Flags = Flags(1 << 2);
    /// `\Deleted` — letter `T` (trashed).
    pub const DELETED: Flags = Flags(1 << 3);
    /// `\Draft` — letter `D`.
    pub const DRAFT: Flags = Flags(1 << 4);
    /// Passed (bounced/forwarded) — letter `P`; no IMAP system flag.
    pub const PASSED: Flags = Flags(1 << 5);
    /// Every flag this type knows.
    pub const ALL: Flags = Flags(0b11_1111);

    /// True when no flag is set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// True when every flag of `other` is set in `self`.
    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Sets the flags of `other`.
    pub fn insert(&mut self, other: Flags) {
        self.0 |= other.0;
    }

    /// Clears the flags of `other`.
    pub fn remove(&mut self, other: Flags) {
        self.0 &= !other.0;
    }

    /// The flag a Maildir info letter stands for.
    pub fn from_letter(letter: u8) -> Option<Flags> {
        FLAG_LETTERS
            .iter()
            .find(|(l, _)| *l == letter)
            .map(|(_, f)| *f)
    }

    /// The info letter of a single flag (None for zero or several flags).
    pub fn letter(self) -> Option<u8> {
        FLAG_LETTERS
            .iter()
            .find(|(_, f)| *f == self)
            .map(|(l, _)| *l)
    }

    /// Each set flag as a single-flag value, in the ASCII order of their letters.
    pub fn iter(self) -> impl Iterator<Item = Flags> {
        FLAG_LETTERS
            .iter()
            .map(|(_, f)| *f)
            .filter(move |f| self.contains(*f))
    }

    /// The letters of the set flags in ASCII order (`"FS"` for flagged+seen).
    pub fn letters(self) -> String {
        FLAG_LETTERS
            .iter()
            .filter(|(_, f)| self.contains(*f))
            .map(|(l, _)| char::from(*l))
            .collect()
    }
}

impl BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}

impl BitOrAssign for Flags {
    fn bitor_assign(&mut self, rhs: Flags) {
        self.0 |= rhs.0;
    }
}

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Flags({:?})", self.letters())
    }
}

/// A set of keyword letters `a`..`z`: bit `i` is letter `b'a' + i`, which is index `i`
/// of `dovecot-keywords` (Dovecot's `MAILDIR_KEYWORD_FIRST`..`MAILDIR_KEYWORD_LAST`).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Keywords(pub u32);

impl Keywords {
    /// No keywords.
    pub const EMPTY: Keywords = Keywords(0);
    /// How many keyword letters a file name can carry (Dovecot's `MAILDIR_MAX_KEYWORDS`).
    pub const MAX: u8 = 26;
    const MASK: u32 = (1 << 26) - 1;

    /// True when no keyword is set.
    pub fn is_empty(self) -> bool {
        self.0 & Self::MASK == 0
    }

    /// True when keyword index `index` (0 = `a`) is set. Out-of-range indexes are never set.
    pub fn contains(self, index: u8) -> bool {
        index < Self::MAX && self.0 & (1 << index) != 0
    }

    /// Sets keyword index `index`; returns false (and changes nothing) when `index >= 26`.
    pub fn insert(&mut self, index: u8) -> bool {
        if index >= Self::MAX {
            return false;
        }
        self.0 |= 1 << index;
        true
    }

    /// Clears keyword index `index` (no-op when out of range).
    pub fn remove(&mut self, index: u8) {
        if index < Self::MAX {
            self.0 &= !(1 << index);
        }
    }

    /// Set indexes in increasing order.
    pub fn iter(self) -> impl Iterator<Item = u8> {
        (0..Self::MAX).filter(move |i| self.contains(*i))
    }

    /// The index of a keyword letter (`b'a'` -> 0), or None for other bytes.
    pub fn index_of_letter(letter: u8) -> Option<u8> {
        letter.is_ascii_lowercase().then(|| letter - b'a')
    }

    /// The letter of a keyword index (0 -> `b'a'`), or None when out of range.
    pub fn letter_of_index(index: u8) -> Option<u8> {
        (index < Self::MAX).then(|| b'a' + index)
    }

    /// The letters of the set keywords in ASCII order.
    pub fn letters(self) -> String {
        self.iter().map(|i| char::from(b'a' + i)).collect()
    }
}

impl fmt::Debug for Keywords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Keywords({:?})", self.letters())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_letters_follow_maildir_spec() {
        let cases = [
            (b'S', Flags::SEEN),
            (b'R', Flags::ANSWERED),
            (b'F', Flags::FLAGGED),
            (b'T', Flags::DELETED),
            (b'D', Flags::DRAFT),
            (b'P', Flags::PASSED),
        ];
        for (letter, flag) in cases {
            assert_eq!(Flags::from_letter(letter), Some(flag));
            assert_eq!(flag.letter(), Some(letter));
        }
        assert_eq!(Flags::from_letter(b's'), None);
        assert_eq!(Flags::from_letter(b'X'), None);
        assert_eq!((Flags::SEEN | Flags::FLAGGED).letter(), None);
    }

    #[test]
    fn flags_set_operations() {
        let mut f = Flags::EMPTY;
        assert!(f.is_empty());
        f.insert(Flags::SEEN | Flags::DELETED);
        assert!(f.contains(Flags::SEEN));
        assert!(!f.contains(Flags::SEEN | Flags::DRAFT));
        f.remove(Flags::SEEN);
        assert_eq!(f, Flags::DELETED);
        let all: Vec<Flags> = Flags::ALL.iter().collect();
        assert_eq!(all.len(), 6);
        assert_eq!(Flags::ALL.letters(), "DFPRST");
        assert_eq!((Flags::SEEN | Flags::ANSWERED).letters(), "RS");
    }

    #[test]
    fn keyword_bits() {
        let mut k = Keywords::EMPTY;
        assert!(k.insert(0));
        assert!(k.insert(25));
        assert!(!k.insert(26));
        assert!(k.contains(0) && k.contains(25) && !k.contains(26));
        assert_eq!(k.letters(), "az");
        k.remove(0);
        k.remove(200);
        assert_eq!(k.iter().collect::<Vec<_>>(), vec![25]);
        assert_eq!(Keywords::index_of_letter(b'c'), Some(2));
        assert_eq!(Keywords::index_of_letter(b'C'), None);
        assert_eq!(Keywords::letter_of_index(2), Some(b'c'));
        assert_eq!(Keywords::letter_of_index(26), None);
        assert!(Keywords(1 << 30).is_empty());
    }
}
