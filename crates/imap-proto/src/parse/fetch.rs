//! FETCH items (RFC 3501 §6.4.5, §9 `fetch-att`; RFC 3516 §4.2;
//! RFC 7162 §3.1.4, §3.2.6).

use super::core::Parser;
use super::{fail, PResult};
use crate::fetch::{FetchArgs, FetchItem, FetchMacro, Partial, Section, SectionText};

/// `("ALL" / "FULL" / "FAST" / fetch-att / "(" fetch-att *(SP fetch-att)
/// ")") [SP fetch-modifiers]`.
pub(crate) fn fetch(p: &mut Parser<'_>) -> PResult<FetchArgs> {
    let mut args = FetchArgs {
        items: Vec::new(),
        macro_used: None,
        changed_since: None,
        vanished: false,
    };
    if p.eat(b'(') {
        p.enter()?;
        loop {
            args.items.push(item(p)?);
            p.check_items(args.items.len())?;
            if p.eat(b')') {
                break;
            }
            p.sp()?;
        }
        p.leave();
    } else if p.eat_word(b"ALL") {
        args.macro_used = Some(FetchMacro::All);
    } else if p.eat_word(b"FAST") {
        args.macro_used = Some(FetchMacro::Fast);
    } else if p.eat_word(b"FULL") {
        args.macro_used = Some(FetchMacro::Full);
    } else {
        args.items.push(item(p)?);
    }
    if let Some(m) = args.macro_used {
        args.items = m.items();
    }
    if !p.at_end() {
        modifiers(p, &mut args)?;
    }
    Ok(args)
}

/// `SP "(" fetch-modifier *(SP fetch-modifier) ")"` (RFC 4466 §2.4,
/// RFC 7162 §3.1.4.1 CHANGEDSINCE, §3.2.6 VANISHED).
fn modifiers(p: &mut Parser<'_>, args: &mut FetchArgs) -> PResult<()> {
    p.sp()?;
    p.expect(b'(', "fetch modifiers")?;
    p.enter()?;
    loop {
        let name = p.word()?;
        match name.as_str() {
            "CHANGEDSINCE" if args.changed_since.is_none() => {
                p.sp()?;
                args.changed_since = Some(p.number64()?);
            }
            "VANISHED" if !args.vanished => args.vanished = true,
            "CHANGEDSINCE" | "VANISHED" => return fail(format!("Duplicate FETCH modifier {name}")),
            _ => return fail(format!("Unknown FETCH modifier {name}")),
        }
        if p.eat(b')') {
            break;
        }
        p.sp()?;
    }
    p.leave();
    Ok(())
}

/// One `fetch-att`.
fn item(p: &mut Parser<'_>) -> PResult<FetchItem> {
    // Item names contain `.` and end before `[`, SP or `)`.
    let name = p.take_while(
        |b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-',
        "fetch attribute",
    )?;
    let name = String::from_utf8_lossy(name).to_ascii_uppercase();
    let it = match name.as_str() {
        "ENVELOPE" => FetchItem::Envelope,
        "FLAGS" => FetchItem::Flags,
        "INTERNALDATE" => FetchItem::InternalDate,
        "RFC822" => FetchItem::Rfc822,
        "RFC822.HEADER" => FetchItem::Rfc822Header,
        "RFC822.SIZE" => FetchItem::Rfc822Size,
        "RFC822.TEXT" => FetchItem::Rfc822Text,
        "BODYSTRUCTURE" => FetchItem::BodyStructure,
        "UID" => FetchItem::Uid,
        "MODSEQ" => FetchItem::ModSeq,
        "BODY" if p.peek() != Some(b'[') => FetchItem::Body,
        "BODY" | "BODY.PEEK" => {
            let section = section(p)?;
            let partial = partial(p)?;
            FetchItem::BodySection {
                section,
                partial,
                peek: name == "BODY.PEEK",
            }
        }
        "BINARY" | "BINARY.PEEK" => {
            let part = binary_section(p)?;
            let partial = partial(p)?;
            FetchItem::Binary {
                part,
                partial,
                peek: name == "BINARY.PEEK",
            }
        }
        "BINARY.SIZE" => FetchItem::BinarySize {
            part: binary_section(p)?,
        },
        "ALL" | "FAST" | "FULL" => return fail(format!("Macro {name} not allowed in a list")),
        _ => return fail(format!("Unknown FETCH attribute {name}")),
    };
    Ok(it)
}

/// `"[" [section-spec] "]"` (RFC 3501 §9 `section`).
fn section(p: &mut Parser<'_>) -> PResult<Section> {
    p.expect(b'[', "[")?;
    let mut sec = Section::full();
    if p.eat(b']') {
        return Ok(sec);
    }
    // section-part = nz-number *("." nz-number)
    let mut dot = false;
    while p.peek().is_some_and(|b| b.is_ascii_digit()) {
        sec.part
            .push(p.nz_number().or_else(|_| fail("Invalid section part"))?);
        p.check_items(sec.part.len())?;
        dot = p.eat(b'.');
        if !dot {
            break;
        }
    }
    if !dot && p.eat(b']') {
        return Ok(sec);
    }
    if !sec.part.is_empty() && !dot {
        return fail("Invalid section part");
    }
    let word = p.take_while(|b| b.is_ascii_alphabetic() || b == b'.', "section")?;
    let word = String::from_utf8_lossy(word).to_ascii_uppercase();
    let text = match word.as_str() {
        "HEADER" => SectionText::Header,
        "TEXT" => SectionText::Text,
        // RFC 3501 §9: MIME only after a part number.
        "MIME" if !sec.part.is_empty() => SectionText::Mime,
        "HEADER.FIELDS" | "HEADER.FIELDS.NOT" => {
            p.sp()?;
            let names = header_list(p)?;
            if word == "HEADER.FIELDS" {
                SectionText::HeaderFields(names)
            } else {
                SectionText::HeaderFieldsNot(names)
            }
        }
        _ => return fail(format!("Invalid section {word}")),
    };
    sec.text = Some(text);
    p.expect(b']', "]")?;
    Ok(sec)
}

/// `header-list = "(" header-fld-name *(SP header-fld-name) ")"`
/// (RFC 3501 §9); names must be RFC 5322 §3.6.8 field names.
fn header_list(p: &mut Parser<'_>) -> PResult<Vec<String>> {
    p.expect(b'(', "header list")?;
    let mut names = Vec::new();
    loop {
        let n = p.astring()?;
        if n.is_empty() || !n.iter().all(|&b| (33..=126).contains(&b) && b != b':') {
            return fail("Invalid header field name");
        }
        names.push(String::from_utf8_lossy(&n).into_owned());
        p.check_items(names.len())?;
        if p.eat(b')') {
            return Ok(names);
        }
        p.sp()?;
    }
}

/// `section-binary = "[" [section-part] "]"` (RFC 3516 §6).
fn binary_section(p: &mut Parser<'_>) -> PResult<Vec<u32>> {
    p.expect(b'[', "[")?;
    let mut part = Vec::new();
    if p.eat(b']') {
        return Ok(part);
    }
    loop {
        part.push(p.nz_number().or_else(|_| fail("Invalid section part"))?);
        p.check_items(part.len())?;
        if p.eat(b']') {
            return Ok(part);
        }
        if !p.eat(b'.') {
            return fail("Invalid section part");
        }
    }
}

/// `["<" number "." nz-number ">"]` (RFC 3501 §9 `partial`).
fn partial(p: &mut Parser<'_>) -> PResult<Option<Partial>> {
    if !p.eat(b'<') {
        return Ok(None);
    }
    let origin = p.number().or_else(|_| fail("Invalid partial"))?;
    if !p.eat(b'.') {
        return fail("Invalid partial");
    }
    let count = p.nz_number().or_else(|_| fail("Invalid partial"))?;
    if !p.eat(b'>') {
        return fail("Invalid partial");
    }
    Ok(Some(Partial { origin, count }))
}
