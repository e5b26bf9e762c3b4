//! FETCH of bodies larger than the server's read chunk (256 KiB): BODY[] and partials
//! whose windows start, end and straddle chunk boundaries are the file's bytes as CRLF,
//! and BINARY of a base64 part that spans several chunks is its decoded octets, whole and
//! cut, with BINARY.SIZE the decoded length (RFC 3501 §6.4.5, RFC 3516 §4.2). Expected
//! bytes are made here from the file, not by our own converter.

use base64::Engine;

use crate::support::daemon::Server;
use crate::support::imap::crlf;

const CHUNK: usize = 256 * 1024;

/// Deterministic pseudo-random octets (NUL and CR/LF included).
fn octets(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A message with a long text part (LF line ends: each grows by one octet as CRLF, so
/// file offsets and answer offsets drift apart) and a base64 part of `binary` octets.
fn message(binary: &[u8]) -> String {
    let text: String = (0..9000)
        .map(|i| format!("line {i} of the long text part, padded to some width\n"))
        .collect();
    let b64 = base64::engine::general_purpose::STANDARD.encode(binary);
    let b64: String = b64
        .as_bytes()
        .chunks(76)
        .map(|l| format!("{}\n", std::str::from_utf8(l).unwrap()))
        .collect();
    format!(
        "From: a@example.org\nTo: alice@example.org\nSubject: large\nMIME-Version: 1.0\n\
         Content-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Type: text/plain\n\n\
         {text}--b\nContent-Type: application/octet-stream\nContent-Transfer-Encoding: base64\n\n\
         {b64}--b--\n"
    )
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The octets of the literal that follows `label` in a FETCH answer.
fn literal_after<'a>(raw: &'a [u8], label: &[u8]) -> &'a [u8] {
    let at =
        find(raw, label).unwrap_or_else(|| panic!("{} missing", String::from_utf8_lossy(label)));
    let rest = &raw[at + label.len()..];
    let open = rest.iter().position(|&b| b == b'{').unwrap();
    let close = rest.iter().position(|&b| b == b'}').unwrap();
    let n: usize = std::str::from_utf8(&rest[open + 1..close])
        .unwrap()
        .parse()
        .unwrap();
    &rest[close + 3..close + 3 + n]
}

#[test]
fn bodies_and_partials_across_read_chunks() {
    let binary = octets(700_000);
    let s = Server::start();
    s.deliver("alice", &message(&binary));
    let file = std::fs::read(&s.files("alice", "INBOX")[0]).unwrap();
    let full = crlf(&String::from_utf8(file).unwrap());
    assert!(full.len() > 4 * CHUNK, "{} octets", full.len());
    let mut c = s.login("alice");
    c.ok("EXAMINE INBOX");

    let got = c.ok("FETCH 1 BODY.PEEK[]").fetches()[0].1.body_sections();
    assert!(got[0].as_deref() == Some(&full[..]), "BODY[] differs");

    let windows = [
        (0, 1),
        (CHUNK - 3, 10),
        (CHUNK, CHUNK),
        (CHUNK - 1, 2 * CHUNK + 2),
        (3 * CHUNK + 17, 100_000),
        (full.len() - 5, 100),
        (full.len(), 10),
    ];
    for (origin, count) in windows {
        let cmd = format!("FETCH 1 BODY.PEEK[]<{origin}.{count}>");
        let got = c.ok(&cmd).fetches()[0].1.body_sections();
        let end = (origin + count).min(full.len());
        let want = &full[origin.min(full.len())..end];
        assert!(
            got[0].as_deref().unwrap_or(&[]) == want,
            "{cmd}: {} octets, want {}",
            got[0].as_ref().map_or(0, Vec::len),
            want.len()
        );
    }

    let r = c.ok("FETCH 1 BINARY.SIZE[2]");
    assert!(
        r.all()
            .contains(&format!("BINARY.SIZE[2] {})", binary.len())),
        "{}",
        r.all()
    );
    let r = c.ok("FETCH 1 BINARY.PEEK[2]");
    let raw = &r.fetches()[0].1.raw;
    assert!(
        literal_after(raw, b"BINARY[2] ") == &binary[..],
        "BINARY[2] differs"
    );
    for (origin, count) in [(CHUNK - 7, 20), (100, 2 * CHUNK), (binary.len() - 3, 50)] {
        let r = c.ok(&format!("FETCH 1 BINARY.PEEK[2]<{origin}.{count}>"));
        let raw = &r.fetches()[0].1.raw;
        let want = &binary[origin..(origin + count).min(binary.len())];
        let label = format!("BINARY[2]<{origin}> ");
        assert!(
            literal_after(raw, label.as_bytes()) == want,
            "BINARY[2]<{origin}.{count}> differs"
        );
    }
}
