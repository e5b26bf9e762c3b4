//! Property tests: summarize never panics and its offsets and sizes are
//! consistent on arbitrary bytes, and on generated MIME it finds exactly the
//! parts and bodies the generator wrote.

use maildex_mime::{
    crlf_len, find_part, header_fields, part_content, summarize, write_body_structure,
    write_envelope, CrlfWriter, Part, PartKind,
};
use proptest::prelude::*;

/// Checks the offset and size invariants of `p` and its descendants, and that
/// [`part_content`] reads each header block as the summary did (`in_multipart`: `p` is a
/// body part of a multipart).
fn check_part(msg: &[u8], p: &Part, in_multipart: bool) -> Result<(), TestCaseError> {
    let (hs, bs, end) = (p.header_start, p.body_start, p.end);
    prop_assert!(hs <= bs && bs <= end && end <= msg.len() as u64);
    let header = &msg[hs as usize..bs as usize];
    let body = &msg[bs as usize..end as usize];
    prop_assert_eq!(p.header_vsize, crlf_len(header));
    prop_assert_eq!(p.body_vsize, crlf_len(body));
    prop_assert_eq!(
        p.header_vsize + p.body_vsize,
        crlf_len(&msg[hs as usize..end as usize])
    );
    prop_assert_eq!(
        p.body_lines as usize,
        body.iter().filter(|&&c| c == b'\n').count()
    );
    prop_assert_eq!(&part_content(header, in_multipart), &p.content);
    match &p.kind {
        PartKind::Single => {}
        PartKind::Multipart(children) => {
            let mut prev = bs;
            for c in children {
                prop_assert!(c.header_start >= prev, "children in order");
                prop_assert!(c.end <= end, "child inside parent");
                check_part(msg, c, true)?;
                prev = c.end;
            }
        }
        PartKind::Message { root, .. } => {
            prop_assert_eq!(root.header_start, bs);
            prop_assert!(root.end <= end);
            check_part(msg, root, false)?;
        }
    }
    Ok(())
}

/// Every path that names a part resolves to one inside the message.
fn check_paths(msg: &[u8], root: &Part) -> Result<(), TestCaseError> {
    let mut paths = vec![vec![1u32]];
    let mut seen = 0;
    while let Some(path) = paths.pop() {
        seen += 1;
        if seen > 500 {
            break;
        }
        if let Some(p) = find_part(root, &path) {
            prop_assert!(p.end <= msg.len() as u64);
            for n in 1..=3 {
                let mut next = path.clone();
                next.push(n);
                paths.push(next);
            }
        }
    }
    Ok(())
}

fn check_message(msg: &[u8]) -> Result<(), TestCaseError> {
    let s = summarize(msg);
    prop_assert_eq!(s.size, msg.len() as u64);
    prop_assert_eq!(s.vsize, crlf_len(msg));
    prop_assert_eq!(s.root.header_start, 0);
    prop_assert_eq!(s.root.end, msg.len() as u64);
    check_part(msg, &s.root, false)?;
    check_paths(msg, &s.root)?;
    let mut out = Vec::new();
    write_envelope(&s.envelope, &mut out);
    write_body_structure(&s.root, true, &mut out);
    write_body_structure(&s.root, false, &mut out);
    let bytes = postcard::to_allocvec(&s).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let back: maildex_mime::Summary =
        postcard::from_bytes(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&back, &s);
    let header = &msg[..s.root.body_start as usize];
    header_fields(header, &[&b"subject"[..], b"from"], false, &mut out);
    header_fields(header, &[b"subject"], true, &mut out);
    Ok(())
}

/// Bytes that look a little like mail: header-ish lines, boundaries,
/// CR/LF, NUL, 8-bit.
fn mailish() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"--b".to_vec()),
        Just(b"--b--".to_vec()),
        Just(b"--a".to_vec()),
        Just(b"Content-Type: multipart/mixed; boundary=b\n".to_vec()),
        Just(b"Content-Type: multipart/digest; boundary=a\n".to_vec()),
        Just(b"Content-Type: message/rfc822\n".to_vec()),
        Just(b"MIME-Version: 1.0\n".to_vec()),
        Just(b"From: \"x\" <a@b>, g: c@d;\n".to_vec()),
        Just(b"Subject: =?utf-8?q?x?= \"\\\t\n".to_vec()),
        Just(b" folded\n".to_vec()),
        Just(b"Content-Disposition: a; f*0*=x; f*1=y\n".to_vec()),
        Just(b"\0".to_vec()),
        Just(vec![0xff, 0xe9]),
        "[a-z :;=\"()<>@,]{0,12}".prop_map(String::into_bytes),
    ];
    prop::collection::vec(piece, 0..60).prop_map(|v| v.concat())
}

/// A generated MIME tree.
#[derive(Debug, Clone)]
enum Node {
    Leaf(Vec<u8>),
    Multi(Vec<Node>),
    Message(Box<Node>),
}

fn text_lines() -> impl Strategy<Value = Vec<u8>> {
    // Lines that never start with "--" and never hold a boundary.
    prop::collection::vec("[a-z0-9 .,:-]{0,30}", 0..5).prop_map(|lines| {
        let mut out = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            if i > 0 {
                out.push(b'\n');
            }
            out.extend_from_slice(l.trim_start_matches('-').as_bytes());
        }
        out
    })
}

fn tree() -> impl Strategy<Value = Node> {
    let leaf = text_lines().prop_map(Node::Leaf);
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..4).prop_map(Node::Multi),
            inner.prop_map(|n| Node::Message(Box::new(n))),
        ]
    })
}

struct Gen {
    counter: usize,
}

impl Gen {
    /// Writes `node` as a MIME part (header and body) into `out`.
    fn part(&mut self, node: &Node, out: &mut Vec<u8>) {
        match node {
            Node::Leaf(body) => {
                out.extend_from_slice(b"Content-Type: text/plain\n\n");
                out.extend_from_slice(body);
            }
            Node::Multi(children) => {
                self.counter += 1;
                // same length, distinct: never a prefix of another
                let b = format!("=_b{:06}", self.counter);
                out.extend_from_slice(
                    format!("Content-Type: multipart/mixed;\n boundary=\"{b}\"\n\npreamble\n")
                        .as_bytes(),
                );
                for c in children {
                    out.extend_from_slice(format!("--{b}\n").as_bytes());
                    self.part(c, out);
                    out.push(b'\n');
                }
                out.extend_from_slice(format!("--{b}--\nepilogue\n").as_bytes());
            }
            Node::Message(inner) => {
                out.extend_from_slice(b"Content-Type: message/rfc822\n\n");
                out.extend_from_slice(b"Subject: inner\nMIME-Version: 1.0\n");
                self.part(inner, out);
            }
        }
    }
}

/// Checks that the parsed `p` has the generated shape and leaf bodies.
fn same_shape(msg: &[u8], node: &Node, p: &Part, crlf: bool) -> Result<(), TestCaseError> {
    match (node, &p.kind) {
        (Node::Leaf(body), PartKind::Single) => {
            let want = if crlf {
                String::from_utf8_lossy(body)
                    .replace('\n', "\r\n")
                    .into_bytes()
            } else {
                body.clone()
            };
            prop_assert_eq!(&msg[p.body_start as usize..p.end as usize], &want[..]);
        }
        (Node::Multi(children), PartKind::Multipart(parts)) => {
            prop_assert_eq!(children.len(), parts.len());
            for (c, q) in children.iter().zip(parts) {
                same_shape(msg, c, q, crlf)?;
            }
        }
        (Node::Message(inner), PartKind::Message { root, .. }) => {
            same_shape(msg, inner, root, crlf)?;
        }
        (n, k) => prop_assert!(false, "shape differs: {:?} vs {:?}", n, k),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes(msg in prop::collection::vec(any::<u8>(), 0..400)) {
        check_message(&msg)?;
    }

    #[test]
    fn mail_like_bytes(msg in mailish()) {
        check_message(&msg)?;
    }

    #[test]
    fn generated_mime(node in tree(), crlf in any::<bool>(), cut in any::<prop::sample::Index>()) {
        let mut msg = b"From: a@example.org\nSubject: generated\nMIME-Version: 1.0\n".to_vec();
        Gen { counter: 0 }.part(&node, &mut msg);
        if crlf {
            msg = String::from_utf8_lossy(&msg).replace('\n', "\r\n").into_bytes();
        }
        let s = summarize(&msg);
        check_message(&msg)?;
        same_shape(&msg, &node, &s.root, crlf)?;
        // any truncation is still summarized consistently
        let cut = cut.index(msg.len() + 1);
        check_message(&msg[..cut])?;
    }

    #[test]
    fn crlf_writer_matches_crlf_len(
        data in prop::collection::vec(prop_oneof![Just(b'\r'), Just(b'\n'), Just(0u8), any::<u8>()], 0..200),
        split in any::<prop::sample::Index>(),
    ) {
        let at = split.index(data.len() + 1);
        let mut w = CrlfWriter::new();
        let mut out = Vec::new();
        w.write(&data[..at], &mut out);
        w.write(&data[at..], &mut out);
        prop_assert_eq!(out.len() as u64, crlf_len(&data));
        let mut whole = Vec::new();
        CrlfWriter::new().write(&data, &mut whole);
        prop_assert_eq!(out, whole);
    }
}
