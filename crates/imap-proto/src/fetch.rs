//! FETCH arguments (RFC 3501 §6.4.5, RFC 3516 §4.2, RFC 7162 §3.1.4).

/// What FETCH asked for: the items with the macros (RFC 3501 §6.4.5 `ALL`,
/// `FAST`, `FULL`) already expanded, in the client's order, plus modifiers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchArgs {
    /// Items in request order; a macro is expanded to its items.
    pub items: Vec<FetchItem>,
    /// Which macro was used, if any (`ALL`, `FAST`, `FULL`).
    pub macro_used: Option<FetchMacro>,
    /// `(CHANGEDSINCE n)` (RFC 7162 §3.1.4.1).
    pub changed_since: Option<u64>,
    /// `(VANISHED)` modifier (RFC 7162 §3.2.6; UID FETCH only, with
    /// CHANGEDSINCE).
    pub vanished: bool,
}

/// RFC 3501 §6.4.5 fetch macros.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchMacro {
    /// `(FLAGS INTERNALDATE RFC822.SIZE ENVELOPE)`
    All,
    /// `(FLAGS INTERNALDATE RFC822.SIZE)`
    Fast,
    /// `(FLAGS INTERNALDATE RFC822.SIZE ENVELOPE BODY)`
    Full,
}

impl FetchMacro {
    /// The items the macro stands for (RFC 3501 §6.4.5).
    pub fn items(self) -> Vec<FetchItem> {
        let mut v = vec![
            FetchItem::Flags,
            FetchItem::InternalDate,
            FetchItem::Rfc822Size,
        ];
        match self {
            FetchMacro::Fast => {}
            FetchMacro::All => v.push(FetchItem::Envelope),
            FetchMacro::Full => {
                v.push(FetchItem::Envelope);
                v.push(FetchItem::Body);
            }
        }
        v
    }
}

/// One message data item (RFC 3501 §6.4.5 and §9 `fetch-att`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchItem {
    /// `ENVELOPE`
    Envelope,
    /// `FLAGS`
    Flags,
    /// `INTERNALDATE`
    InternalDate,
    /// `RFC822` (same as `BODY[]`, sets `\Seen`, answered as `RFC822`)
    Rfc822,
    /// `RFC822.HEADER` (like `BODY.PEEK[HEADER]`)
    Rfc822Header,
    /// `RFC822.SIZE`
    Rfc822Size,
    /// `RFC822.TEXT` (like `BODY[TEXT]`, sets `\Seen`)
    Rfc822Text,
    /// `BODY` (non-extensible BODYSTRUCTURE)
    Body,
    /// `BODYSTRUCTURE`
    BodyStructure,
    /// `UID`
    Uid,
    /// `BODY[section]<partial>` or `BODY.PEEK[...]` (RFC 3501 §6.4.5).
    BodySection {
        /// The section.
        section: Section,
        /// `<origin.count>`, if given.
        partial: Option<Partial>,
        /// `.PEEK`: do not set `\Seen`.
        peek: bool,
    },
    /// `BINARY[part]<partial>` or `BINARY.PEEK[...]` (RFC 3516 §4.2).
    Binary {
        /// Part numbers (empty: the whole message).
        part: Vec<u32>,
        /// `<origin.count>`, if given.
        partial: Option<Partial>,
        /// `.PEEK`
        peek: bool,
    },
    /// `BINARY.SIZE[part]` (RFC 3516 §4.2).
    BinarySize {
        /// Part numbers.
        part: Vec<u32>,
    },
    /// `MODSEQ` (RFC 7162 §3.1.4).
    ModSeq,
}

/// `<origin.count>` of a partial fetch (RFC 3501 §6.4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partial {
    /// First octet wanted (0-based).
    pub origin: u32,
    /// Number of octets wanted (non-zero, RFC 3501 §9 `nz-number`).
    pub count: u32,
}

/// A body section (RFC 3501 §6.4.5 and §9 `section`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// Part numbers (`1.2.3`); empty for the top-level message.
    pub part: Vec<u32>,
    /// What of that part.
    pub text: Option<SectionText>,
}

impl Section {
    /// `[]`: the whole message.
    pub fn full() -> Section {
        Section {
            part: Vec::new(),
            text: None,
        }
    }
}

/// The text specifier of a section (RFC 3501 §9 `section-msgtext` and
/// `section-text`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SectionText {
    /// `HEADER`
    Header,
    /// `HEADER.FIELDS (names)`: names as the client wrote them (printable
    /// ASCII; echo them back in the response), compare case-insensitively.
    HeaderFields(Vec<String>),
    /// `HEADER.FIELDS.NOT (names)`
    HeaderFieldsNot(Vec<String>),
    /// `TEXT`
    Text,
    /// `MIME` (only after a part number, RFC 3501 §9 `section-text`).
    Mime,
}
