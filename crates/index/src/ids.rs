//! The three numbers that name things in the index, as types of their own: a message's
//! [`Uid`], a change's [`ModSeq`] and a [`MailboxId`]. They used to be bare `u32`/`u64`
//! side by side in signatures (`state(mailbox, uid)`, a modseq beside sizes and dates);
//! as newtypes a swapped pair, or a UID added to a modseq, no longer compiles.
//!
//! Each is `#[repr(transparent)]` and serialises as the bare number (`#[serde(transparent)]`),
//! so records and keys are encoded exactly as before (big-endian bytes in keys, postcard
//! varints in records). `Display` writes the bare number, as IMAP does. There is no
//! arithmetic beyond what a real use needs ([`Uid::next`], [`ModSeq::next`]).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A message's UID in its mailbox (RFC 3501 §2.3.1.1): 1 and up, ascending in the order
/// messages were added; 0 is no UID (a key bound, never a message).
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[serde(transparent)]
#[repr(transparent)]
pub struct Uid(pub u32);

impl Uid {
    /// The lowest UID a message can have.
    pub const MIN: Uid = Uid(1);
    /// The highest UID.
    pub const MAX: Uid = Uid(u32::MAX);

    /// The UID after this one (UIDNEXT after a message of this UID); stays at
    /// [`Uid::MAX`].
    pub const fn next(self) -> Uid {
        Uid(self.0.saturating_add(1))
    }
}

/// A modification sequence number (RFC 7162 §3.1.1): every change to a mailbox gets a
/// higher one; a mailbox's highest never goes back.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[serde(transparent)]
#[repr(transparent)]
pub struct ModSeq(pub u64);

impl ModSeq {
    /// The highest modseq (a key bound).
    pub const MAX: ModSeq = ModSeq(u64::MAX);

    /// The modseq after this one (stays at [`ModSeq::MAX`]).
    pub const fn next(self) -> ModSeq {
        ModSeq(self.0.saturating_add(1))
    }
}

/// A mailbox's id in one user's index: given once at creation, kept across RENAME, never
/// reused for another mailbox of the env.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[serde(transparent)]
#[repr(transparent)]
pub struct MailboxId(pub u32);

/// What the three share: the bare number (`get`), its big-endian bytes (as keys hold
/// it) and `Display` as the bare number (as IMAP writes it).
macro_rules! bare_number {
    ($($t:ident($n:ty)),*) => {$(
        impl $t {
            /// The number.
            pub const fn get(self) -> $n {
                self.0
            }

            /// Big-endian bytes, as keys (and change-log values) hold it.
            pub const fn to_be_bytes(self) -> [u8; std::mem::size_of::<$n>()] {
                self.0.to_be_bytes()
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    )*};
}

bare_number!(Uid(u32), ModSeq(u64), MailboxId(u32));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_the_bare_number() {
        assert_eq!(Uid(42).to_string(), "42");
        assert_eq!(
            ModSeq(1_700_000_000_000_001).to_string(),
            "1700000000000001"
        );
        assert_eq!(MailboxId(7).to_string(), "7");
        assert_eq!(format!("{:>4}", Uid(5)), "   5");
    }

    #[test]
    fn records_encode_as_the_bare_numbers() {
        let bare = postcard::to_allocvec(&(7u32, 42u32, 1_700_000_000_000_001u64)).unwrap();
        let typed =
            postcard::to_allocvec(&(MailboxId(7), Uid(42), ModSeq(1_700_000_000_000_001))).unwrap();
        assert_eq!(bare, typed);
        let back: (MailboxId, Uid, ModSeq) = postcard::from_bytes(&bare).unwrap();
        assert_eq!(back, (MailboxId(7), Uid(42), ModSeq(1_700_000_000_000_001)));
    }

    #[test]
    fn next_saturates() {
        assert_eq!(Uid(1).next(), Uid(2));
        assert_eq!(Uid::MAX.next(), Uid::MAX);
        assert_eq!(ModSeq(9).next(), ModSeq(10));
        assert_eq!(ModSeq::MAX.next(), ModSeq::MAX);
    }
}
