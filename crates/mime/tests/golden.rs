//! Golden tests: maildex-mime against Dovecot 2.3.19's own answers.
//!
//! For every `tests/golden/NAME.eml`, `NAME.expected` holds what Dovecot
//! answered over IMAP (written by `tests/golden/dovecot_oracle.py`). This
//! test summarizes the file, renders ENVELOPE / BODY / BODYSTRUCTURE,
//! compares RFC822.SIZE, and for each section slices the file with the part
//! offsets, converts to CRLF and compares the bytes. Deliberate differences
//! from Dovecot are listed in `tests/golden/DEVIATIONS.md` and in
//! [`deviation`] below.

use std::fs;
use std::path::{Path, PathBuf};

use maildex_mime::{
    find_part, header_fields, header_fields_of_part, summarize, to_crlf, write_body_structure,
    write_envelope, Part, PartKind, Summary,
};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// One record of a `.expected` file.
struct Record {
    key: String,
    value: Vec<u8>,
}

fn parse_expected(data: &[u8]) -> Vec<Record> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let nl = pos
            + data[pos..]
                .iter()
                .position(|&c| c == b'\n')
                .expect("header line");
        let head = std::str::from_utf8(&data[pos..nl]).expect("ascii header");
        let head = head.strip_prefix("== ").expect("record marker");
        let (key, len) = head.rsplit_once(' ').expect("length");
        let len: usize = len.parse().expect("length number");
        let value = data[nl + 1..nl + 1 + len].to_vec();
        assert_eq!(data[nl + 1 + len], b'\n', "record end");
        out.push(Record {
            key: key.to_string(),
            value,
        });
        pos = nl + 1 + len + 1;
    }
    out
}

/// Our answer for a deliberate deviation from Dovecot (see DEVIATIONS.md),
/// or None to expect Dovecot's. `records` are the file's Dovecot records.
fn deviation(name: &str, key: &str, records: &[Record]) -> Option<Vec<u8>> {
    let record = |k: &str| {
        records
            .iter()
            .find(|r| r.key == k)
            .map(|r| r.value.clone())
            .expect("record named by a deviation")
    };
    match (name, key) {
        // Deviation 1: Dovecot's header filter reads past the end of the
        // encapsulated header of part 2 into the close delimiter; we stop
        // at the end of the header: the whole header (no field is named
        // Subject), which is what 2.HEADER holds.
        (
            "message_rfc822_base64" | "message_rfc822_base64_crlf",
            "SECTION 2.HEADER.FIELDS.NOT (Subject)",
        ) => Some(record("SECTION 2.HEADER")),
        // Deviation 1 again: the encapsulated message of part 1 is empty
        // (1.HEADER is empty); Dovecot reads the line break after it and
        // answers a blank line.
        (
            "digest_inner_boundary_header",
            "SECTION 1.HEADER.FIELDS (Subject From)" | "SECTION 1.HEADER.FIELDS.NOT (Subject)",
        ) => Some(Vec::new()),
        _ => None,
    }
}

fn crlf(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    to_crlf(bytes, &mut out);
    out
}

fn range(msg: &[u8], start: u64, end: u64) -> &[u8] {
    &msg[start as usize..end as usize]
}

fn header_of<'a>(msg: &'a [u8], p: &Part) -> &'a [u8] {
    range(msg, p.header_start, p.body_start)
}

fn body_of<'a>(msg: &'a [u8], p: &Part) -> &'a [u8] {
    range(msg, p.body_start, p.end)
}

/// `(a b c)` -> [a, b, c]
fn field_names(list: &str) -> Vec<Vec<u8>> {
    list.trim_start_matches('(')
        .trim_end_matches(')')
        .split(' ')
        .map(|s| s.as_bytes().to_vec())
        .collect()
}

/// The bytes we answer for BODY[spec].
fn section(msg: &[u8], s: &Summary, spec: &str) -> Vec<u8> {
    let (path, rest) = split_spec(spec);
    if path.is_empty() {
        return text_section(msg, &s.root, rest, true);
    }
    let Some(part) = find_part(&s.root, &path) else {
        return Vec::new();
    };
    match rest {
        "" => crlf(body_of(msg, part)),
        "MIME" => crlf(header_of(msg, part)),
        _ => match &part.kind {
            PartKind::Message { root, .. } => text_section(msg, root, rest, false),
            _ => Vec::new(),
        },
    }
}

/// HEADER, TEXT, HEADER.FIELDS[.NOT] (...) of a message whose root is `m`.
fn text_section(msg: &[u8], m: &Part, what: &str, top: bool) -> Vec<u8> {
    match what {
        "HEADER" => crlf(header_of(msg, m)),
        "TEXT" => crlf(body_of(msg, m)),
        _ => {
            let (not, list) = if let Some(l) = what.strip_prefix("HEADER.FIELDS.NOT ") {
                (true, l)
            } else if let Some(l) = what.strip_prefix("HEADER.FIELDS ") {
                (false, l)
            } else {
                panic!("unknown section {what}");
            };
            let names = field_names(list);
            let names: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
            let mut out = Vec::new();
            if top {
                header_fields(header_of(msg, m), &names, not, &mut out);
            } else {
                header_fields_of_part(header_of(msg, m), &names, not, &mut out);
            }
            out
        }
    }
}

/// "1.2.HEADER.FIELDS (A B)" -> ([1, 2], "HEADER.FIELDS (A B)")
fn split_spec(spec: &str) -> (Vec<u32>, &str) {
    let mut path = Vec::new();
    let mut rest = spec;
    loop {
        let (head, tail) = match rest.find('.') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        match head.parse::<u32>() {
            Ok(n) if !head.is_empty() => {
                path.push(n);
                rest = tail;
                if tail.is_empty() {
                    return (path, "");
                }
            }
            _ => return (path, rest),
        }
    }
}

fn show(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    if s.len() > 600 {
        format!(
            "{}...[{} bytes]...{}",
            &s[..300],
            s.len(),
            &s[s.len() - 200..]
        )
    } else {
        s.into_owned()
    }
}

fn check_file(name: &str, failures: &mut Vec<String>) {
    let dir = golden_dir();
    let msg = fs::read(dir.join(format!("{name}.eml"))).expect("eml");
    let expected = fs::read(dir.join(format!("{name}.expected"))).expect("expected");
    let s = summarize(&msg);
    assert_eq!(s.size, msg.len() as u64);
    let records = parse_expected(&expected);
    for rec in &records {
        let want = deviation(name, &rec.key, &records).unwrap_or_else(|| rec.value.clone());
        let got = match rec.key.as_str() {
            "RFC822.SIZE" => s.vsize.to_string().into_bytes(),
            "ENVELOPE" => {
                let mut out = Vec::new();
                write_envelope(&s.envelope, &mut out);
                out
            }
            "BODY" | "BODYSTRUCTURE" => {
                let mut out = Vec::new();
                write_body_structure(&s.root, rec.key == "BODYSTRUCTURE", &mut out);
                out
            }
            key => {
                let spec = key
                    .strip_prefix("SECTION ")
                    .or_else(|| key.strip_prefix("NIL "))
                    .expect("section key");
                section(&msg, &s, spec)
            }
        };
        if got != want {
            failures.push(format!(
                "{name}: {}\n  want: {}\n  got:  {}",
                rec.key,
                show(&want),
                show(&got)
            ));
        }
    }
}

#[test]
fn golden_messages_match_dovecot() {
    let mut names: Vec<String> = fs::read_dir(golden_dir())
        .expect("golden dir")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".eml").map(str::to_string)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 40, "only {} golden messages", names.len());
    let mut failures = Vec::new();
    for name in &names {
        check_file(name, &mut failures);
    }
    if !failures.is_empty() {
        panic!(
            "{} mismatches with Dovecot:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}

/// Every part's Content-* values, read again from its header block alone by
/// [`maildex_mime::part_content`] (what search text extraction does with the index's part
/// tree), equal what the summary read in its pass over the whole message.
#[test]
fn part_content_reads_each_golden_part_as_the_summary() {
    fn check(msg: &[u8], p: &Part, in_multipart: bool, name: &str) {
        let got = maildex_mime::part_content(header_of(msg, p), in_multipart);
        assert_eq!(got, p.content, "{name}: part at {}", p.header_start);
        match &p.kind {
            PartKind::Single => {}
            PartKind::Multipart(children) => {
                children.iter().for_each(|c| check(msg, c, true, name))
            }
            PartKind::Message { root, .. } => check(msg, root, false, name),
        }
    }
    let mut n = 0;
    for e in fs::read_dir(golden_dir()).expect("golden dir") {
        let path = e.expect("entry").path();
        if path.extension().is_some_and(|x| x == "eml") {
            let msg = fs::read(&path).expect("read");
            check(
                &msg,
                &summarize(&msg).root,
                false,
                &path.display().to_string(),
            );
            n += 1;
        }
    }
    assert!(n >= 40, "only {n} golden messages");
}

#[test]
fn spec_splitting() {
    assert_eq!(split_spec("1.2.MIME"), (vec![1, 2], "MIME"));
    assert_eq!(split_spec("HEADER"), (vec![], "HEADER"));
    assert_eq!(split_spec("3"), (vec![3], ""));
    assert_eq!(
        split_spec("2.HEADER.FIELDS (Subject From)"),
        (vec![2], "HEADER.FIELDS (Subject From)")
    );
}
