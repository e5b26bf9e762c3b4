//! Issue 18 #1: SEARCH's header and metadata criteria answered from the index. The
//! property: for random criteria trees (FROM/TO/CC/BCC/SUBJECT, HEADER of hot and other
//! fields, SENT*, sizes, flags, under NOT/OR/AND) over a corpus with encoded words, 8-bit
//! headers, missing and repeated fields and broken MIME, `UID SEARCH` equals a scan
//! computed here from the message files. And: with every message file truncated to 0
//! bytes, the header searches answer as before (no message file is read).

use rand::{Rng, SeedableRng};

use crate::support::daemon::Server;
use crate::support::imap::Client;
use maildex_store::text;

/// Messages a generator does not write: encoded words in several charsets, raw 8-bit
/// headers (UTF-8 and Latin-1), repeated, folded, empty and missing fields, address
/// comments and groups, broken dates and broken MIME.
pub(crate) const EDGE: &[&[u8]] = &[
    b"From: =?ISO-8859-1?Q?J=F6rg_M=FCller?= <joerg@example.de>\r\nTo: Team: a@example.org, b@example.org;\r\nSubject: =?UTF-8?B?R3LDvMOfZSBhdXMgS8O2bG4=?= und mehr\r\nDate: 3 Jan 22 10:00 +0100\r\nX-Mailer: Outlook Express\r\n\r\nbody\r\n",
    b"From: \xc3\xa9lodie@example.fr (\xc3\x89lodie Dupr\xc3\xa9)\r\nTo: \"Smith, John\" <john@example.com>\r\nCc: =?utf-8?q?Zo=C3=AB?= <zoe@example.net>, carol@example.com\r\nSubject: caf\xc3\xa9  au\tlait\r\nDate: Mon, 31 Dec 2023 23:59:59 -1200\r\n\r\nbody\r\n",
    b"From: latin@example.org\r\nSubject: Stra\xdfe in M\xfcnchen\r\nX-Weird: \xe9t\xe9\r\nDate: yesterday\r\n\r\nbody\r\n",
    b"Subject: first subject\r\nSubject: second\r\n  folded subject\r\nBcc: hidden@example.org\r\nFrom:\r\nList-Id: Rust users <rust-users.lists.example.net>\r\n\r\nno date, empty from\r\n",
    b"To: nobody@example.org\r\n\r\nno from, no subject\r\n",
    b"From: mime@example.org\r\nSubject: broken mime\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"zz\"\r\nDate: Sat, 1 Jul 2023 00:00:00 +1400\r\n\r\n--zz\r\nContent-Type: text/plain\r\n\r\nnever closed\r\n--zz\r\nContent-Type: message/rfc822\r\n\r\nFrom: inner@example.org\r\nSubject: inner\r\n",
    b"From: =?UTF-8?Q?bad=ZZword?= <bad@example.org>\r\nSubject: =?UNKNOWN?Q?x?= =?UTF-8?B?!!!?= end\r\nReceived: from mx.example.org by mail.example.org\r\nDate: Tue, 29 Feb 2022 10:00:00 +0000\r\n\r\nbody\r\n",
    b"from: lower@example.org\r\nSUBJECT: UPPER CASE names\r\nx-mailer: lower name\r\n\r\nbody\r\n",
    b"No header at all, just text without a blank line\r\n",
];

/// Words the keys search for: some in the corpus, some only in the edge messages, one
/// nowhere, the empty string (the field exists).
pub(crate) const WORDS: &[&str] = &[
    "example",
    "invoice",
    "meeting",
    "alice",
    "smith",
    "martin",
    "com",
    "org>",
    "re:",
    "jörg",
    "grüße",
    "köln",
    "élodie",
    "café au lait",
    "straße",
    "zoë",
    "smith, john",
    "team",
    "folded subject",
    "second",
    "bad",
    "end",
    "outlook",
    "rust",
    "lists",
    "lower",
    "UPPER",
    "mx.example",
    "\"",
    "zzqxj",
    "",
];

/// Header fields HEADER names: hot ones (kept in the listing data) and others.
const FIELDS: &[&str] = &[
    "Subject",
    "From",
    "List-Id",
    "Message-ID",
    "Date",
    "X-Mailer",
    "Received",
    "X-Weird",
    "Content-Type",
    "X-Other",
];

/// A SEARCH key: its IMAP text, and the scan's answer for a message.
#[derive(Debug, Clone)]
enum Key {
    Addr(&'static str, String),
    Subject(String),
    Header(String, String),
    Sent(&'static str, (u32, u8, u32)),
    Larger(u64),
    Smaller(u64),
    Flag(&'static str),
    Not(Box<Key>),
    Or(Box<Key>, Box<Key>),
    And(Vec<Key>),
}

/// An IMAP astring for `s`: a literal when it is not plain ASCII.
pub(crate) fn astring(s: &str) -> String {
    if s.is_ascii() {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        format!("{{{}}}\r\n{s}", s.len())
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

impl Key {
    fn imap(&self) -> String {
        match self {
            Key::Addr(f, w) => format!("{f} {}", astring(w)),
            Key::Subject(w) => format!("SUBJECT {}", astring(w)),
            Key::Header(f, w) => format!("HEADER {f} {}", astring(w)),
            Key::Sent(k, (y, m, d)) => format!("{k} {d}-{}-{y}", MONTHS[usize::from(*m - 1)]),
            Key::Larger(n) => format!("LARGER {n}"),
            Key::Smaller(n) => format!("SMALLER {n}"),
            Key::Flag(f) => (*f).to_string(),
            Key::Not(k) => format!("NOT {}", k.imap()),
            Key::Or(a, b) => format!("OR {} {}", a.imap(), b.imap()),
            Key::And(ks) => format!(
                "({})",
                ks.iter().map(Key::imap).collect::<Vec<_>>().join(" ")
            ),
        }
    }

    /// The scan: what the key says of message `m`, from its file.
    fn scan(&self, m: &FileMsg) -> bool {
        let values = |name: &str, render: fn(&[u8]) -> Vec<u8>| -> Vec<String> {
            text::field_values(&m.header, name.as_bytes())
                .iter()
                .map(|v| text::search_text(&render(v)))
                .collect()
        };
        let has = |vals: Vec<String>, w: &str| text::any_contains(&vals, &text::normalize(w));
        match self {
            Key::Addr(f, w) => has(values(&f.to_ascii_lowercase(), text::address_text), w),
            Key::Subject(w) => has(values("subject", text::compress_lwsp), w),
            Key::Header(f, w) => has(values(f, |v| v.to_vec()), w),
            Key::Sent(k, (y, mo, d)) => {
                let day = civil(*y, *mo, *d);
                let sent = text::field_values(&m.header, b"date")
                    .first()
                    .and_then(|v| text::sent_day(v))
                    .unwrap_or(0);
                match *k {
                    "SENTBEFORE" => sent < day,
                    "SENTON" => sent == day,
                    _ => sent >= day,
                }
            }
            Key::Larger(n) => m.vsize > *n,
            Key::Smaller(n) => m.vsize < *n,
            Key::Flag(f) => match *f {
                "SEEN" => m.flags.contains('S'),
                "UNSEEN" => !m.flags.contains('S'),
                "FLAGGED" => m.flags.contains('F'),
                _ => !m.flags.contains('F'),
            },
            Key::Not(k) => !k.scan(m),
            Key::Or(a, b) => a.scan(m) || b.scan(m),
            Key::And(ks) => ks.iter().all(|k| k.scan(m)),
        }
    }
}

/// Days since 1970-01-01 (RFC 3501 dates in the tests are valid).
fn civil(y: u32, m: u8, d: u32) -> i64 {
    let y = i64::from(y) - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
}

fn leaf(rng: &mut impl Rng) -> Key {
    let w = WORDS[rng.gen_range(0..WORDS.len())].to_string();
    match rng.gen_range(0..10) {
        0..=2 => {
            let f = ["FROM", "TO", "CC", "BCC"][rng.gen_range(0..4)];
            Key::Addr(f, w)
        }
        3 => Key::Subject(w),
        4 | 5 => Key::Header(FIELDS[rng.gen_range(0..FIELDS.len())].to_string(), w),
        6 => {
            let k = ["SENTBEFORE", "SENTON", "SENTSINCE"][rng.gen_range(0..3)];
            let date = match rng.gen_range(0..4) {
                0 => (1970, 1, 1),
                1 => (2022, 1, 3),
                2 => (2023, 12, 31),
                _ => (
                    rng.gen_range(2021..2025),
                    rng.gen_range(1..=12),
                    rng.gen_range(1..=28),
                ),
            };
            Key::Sent(k, date)
        }
        7 => {
            let n = rng.gen_range(0..6000);
            if rng.gen() {
                Key::Larger(n)
            } else {
                Key::Smaller(n)
            }
        }
        _ => Key::Flag(["SEEN", "UNSEEN", "FLAGGED", "UNFLAGGED"][rng.gen_range(0..4)]),
    }
}

fn tree(rng: &mut impl Rng, depth: u32) -> Key {
    if depth == 0 || rng.gen_range(0..3) == 0 {
        return leaf(rng);
    }
    match rng.gen_range(0..3) {
        0 => Key::Not(Box::new(tree(rng, depth - 1))),
        1 => Key::Or(
            Box::new(tree(rng, depth - 1)),
            Box::new(tree(rng, depth - 1)),
        ),
        _ => Key::And(
            (0..rng.gen_range(1..4))
                .map(|_| tree(rng, depth - 1))
                .collect(),
        ),
    }
}

/// A message as the scan sees it: from its file.
struct FileMsg {
    uid: u32,
    flags: String,
    vsize: u64,
    header: Vec<u8>,
}

/// The root header block of a message file: up to and including the first empty line,
/// or the whole file without one.
fn root_header(bytes: &[u8]) -> Vec<u8> {
    let mut at = 0;
    while at < bytes.len() {
        let end = bytes[at..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |p| at + p + 1);
        let line = &bytes[at..end];
        if line == b"\n" || line == b"\r\n" {
            return bytes[..end].to_vec();
        }
        at = end;
    }
    bytes.to_vec()
}

/// Every message of alice's INBOX, read from its file.
fn scan_messages(s: &Server) -> Vec<FileMsg> {
    let dir = s.maildir("alice");
    s.indexed_files("alice", "INBOX")
        .into_iter()
        .map(|(uid, name)| {
            let path = ["cur", "new"]
                .iter()
                .map(|sub| dir.join(sub).join(&name))
                .find(|p| p.exists())
                .expect("message file");
            let bytes = std::fs::read(&path).expect("read");
            let bare_lf = bytes
                .iter()
                .enumerate()
                .filter(|&(i, &b)| b == b'\n' && (i == 0 || bytes[i - 1] != b'\r'))
                .count();
            FileMsg {
                uid,
                flags: name.rsplit_once(":2,").map_or("", |(_, f)| f).to_string(),
                vsize: (bytes.len() + bare_lf) as u64,
                header: root_header(&bytes),
            }
        })
        .collect()
}

/// The UIDs of a `* SEARCH` answer.
pub(crate) fn uids(c: &mut Client, command: &str) -> Vec<u32> {
    let r = c.cmd_bytes(command.as_bytes());
    assert_eq!(r.status(), "OK", "{command}: {}", r.all());
    let mut out: Vec<u32> = r
        .lines("* SEARCH")
        .iter()
        .flat_map(|l| {
            l.trim_start_matches("* SEARCH")
                .split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect();
    out.sort_unstable();
    out
}

/// The property: `rounds` times, `next` gives search keys (IMAP text) and the UIDs a scan
/// of the files finds for them, and `UID SEARCH` must answer those. Returns how many of
/// the searches were selective (found some but not all of the `total` messages).
pub(crate) fn equals_scan(
    c: &mut Client,
    rounds: usize,
    total: usize,
    mut next: impl FnMut() -> (String, Vec<u32>),
) -> usize {
    let mut selective = 0;
    for _ in 0..rounds {
        let (keys, want) = next();
        let got = uids(c, &format!("UID SEARCH CHARSET UTF-8 {keys}"));
        assert_eq!(got, want, "UID SEARCH {keys}");
        selective += usize::from(!want.is_empty() && want.len() < total);
    }
    selective
}

/// APPENDs `raw` to alice's INBOX with `flags`.
pub(crate) fn append(c: &mut Client, flags: &str, raw: &[u8]) {
    let mut cmd = format!("APPEND INBOX ({flags}) {{{}}}\r\n", raw.len()).into_bytes();
    cmd.extend_from_slice(raw);
    let r = c.cmd_bytes(&cmd);
    assert_eq!(r.status(), "OK", "{}", r.all());
}

/// The corpus: the edge messages and generated ones, some flagged or seen.
pub(crate) fn corpus(seed: u64, generated: usize) -> Vec<(&'static str, Vec<u8>)> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let flags = ["", "\\Seen", "\\Flagged", "\\Seen \\Flagged"];
    let mut out: Vec<(&'static str, Vec<u8>)> = EDGE
        .iter()
        .enumerate()
        .map(|(i, m)| (flags[i % 4], m.to_vec()))
        .collect();
    for i in 0..generated {
        out.push((
            flags[rng.gen_range(0..4)],
            maildex_corpus::message(&mut rng, i, 0.1),
        ));
    }
    out
}

fn server_with_corpus() -> (Server, Client) {
    let s = Server::start();
    let mut c = s.login("alice");
    for (flags, raw) in corpus(18, 40) {
        append(&mut c, flags, &raw);
    }
    c.ok("SELECT INBOX");
    (s, c)
}

#[test]
fn header_search_from_the_index_equals_a_scan_of_the_files() {
    let (s, mut c) = server_with_corpus();
    let msgs = scan_messages(&s);
    assert_eq!(msgs.len(), EDGE.len() + 40);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1801);
    let nonempty = random_searches_equal_the_scan(&mut c, &msgs, &mut rng, 300);
    // guards the property against keys that never tell messages apart
    assert!(
        nonempty > 100,
        "only {nonempty} of 300 searches were selective"
    );
}

/// `n` random searches (criteria trees as [`tree`] makes them, HEADER of fields outside
/// the stored and hot ones included) equal the scan's; returns how many were selective.
fn random_searches_equal_the_scan(
    c: &mut Client,
    msgs: &[FileMsg],
    rng: &mut impl Rng,
    n: usize,
) -> usize {
    equals_scan(c, n, msgs.len(), || {
        let keys: Vec<Key> = (0..rng.gen_range(1..3)).map(|_| tree(rng, 3)).collect();
        let want: Vec<u32> = msgs
            .iter()
            .filter(|m| keys.iter().all(|k| k.scan(m)))
            .map(|m| m.uid)
            .collect();
        (
            keys.iter().map(Key::imap).collect::<Vec<_>>().join(" "),
            want,
        )
    })
}

/// A HEADER search of a field outside the stored and hot ones, in a mailbox of at least
/// `LEARN_MIN_MESSAGES` (100) messages, makes the mailbox learn the field: its values go
/// into every message's search fields (the existing ones filled in the background, later
/// ones at indexing), and the next such search reads those instead of the header blocks.
/// The answers equal the scan's before, while the fill runs, after it, and for messages
/// indexed after it.
#[test]
fn learned_header_fields_answer_as_the_scan_before_during_and_after_learning() {
    let s = Server::start();
    let mut c = s.login("alice");
    for (flags, raw) in corpus(19, 120) {
        append(&mut c, flags, &raw);
    }
    c.ok("SELECT INBOX");
    let msgs = scan_messages(&s);
    assert_eq!(s.learned_headers("alice", "INBOX"), (Vec::new(), 0));
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1802);
    // the first search reading header blocks starts the learning; later ones run during
    // the fill
    uids(&mut c, "UID SEARCH HEADER X-Mailer outlook");
    random_searches_equal_the_scan(&mut c, &msgs, &mut rng, 120);
    let t0 = std::time::Instant::now();
    let learned = loop {
        let (names, lacking) = s.learned_headers("alice", "INBOX");
        if names.contains(&"x-mailer".to_string()) && lacking == 0 {
            break names;
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "not learned: {names:?}, {lacking} records lack them"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(
        learned
            .iter()
            .all(|n| !["subject", "from", "message-id", "list-id"].contains(&n.as_str())),
        "stored and hot fields are not learned: {learned:?}"
    );
    random_searches_equal_the_scan(&mut c, &msgs, &mut rng, 120);
    // messages indexed after the learning hold the learned fields from the start
    for raw in EDGE {
        append(&mut c, "", raw);
    }
    c.ok("NOOP");
    assert_eq!(s.learned_headers("alice", "INBOX"), (learned, 0));
    let msgs = scan_messages(&s);
    random_searches_equal_the_scan(&mut c, &msgs, &mut rng, 120);
}

#[test]
fn header_searches_open_no_message_file() {
    let (s, mut c) = server_with_corpus();
    let searches = [
        "UID SEARCH SUBJECT invoice",
        "UID SEARCH FROM example TO example NOT FROM martin",
        "UID SEARCH OR CC smith BCC hidden",
        "UID SEARCH HEADER List-Id rust",
        "UID SEARCH HEADER X-Mailer outlook",
        "UID SEARCH FLAGGED HEADER Received mx",
        "UID SEARCH SENTSINCE 1-Jun-2022 LARGER 1000",
    ];
    let grusse = format!("UID SEARCH CHARSET UTF-8 SUBJECT {}", astring("grüße"));
    let searches: Vec<&str> = searches.into_iter().chain([grusse.as_str()]).collect();
    let before: Vec<Vec<u32>> = searches.iter().map(|q| uids(&mut c, q)).collect();
    assert!(
        before.iter().filter(|u| !u.is_empty()).count() >= 7,
        "{before:?}"
    );
    let body = "UID SEARCH BODY body";
    assert!(!uids(&mut c, body).is_empty());
    // every file emptied (names, and so flags and sizes in them, kept): an answer that
    // read a file would change
    for f in s.files("alice", "INBOX") {
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&f)
            .unwrap();
    }
    let after: Vec<Vec<u32>> = searches.iter().map(|q| uids(&mut c, q)).collect();
    assert_eq!(before, after);
    // nor does a BODY search (issue 18 #2: it compares the text stored at indexing)
    assert!(!uids(&mut c, body).is_empty());
}

/// Searches of flags, keywords and MODSEQ read the index's flags column (no state record,
/// no file): after STOREs that add and remove flags and a keyword, an EXPUNGE, and a
/// rename of a message file by another tool, their answers equal what the file names on
/// disk say, and `MODSEQ` finds exactly the messages changed since.
#[test]
fn flag_searches_follow_stores_expunges_and_another_tools_rename() {
    let (s, mut c) = server_with_corpus();
    c.ok("UID STORE 1:20 +FLAGS (\\Flagged $Work)");
    c.ok("UID STORE 5:8 -FLAGS (\\Seen \\Flagged)");
    c.ok("UID STORE 9 -FLAGS ($Work)");
    c.ok("UID STORE 30:35 +FLAGS (\\Deleted)");
    c.ok("EXPUNGE");
    // another tool answers a message by renaming its file in cur/: UID 12's (flagged, so
    // in cur/, and outside the range the last STORE below answers; picking a file by its
    // name picked one of that range now and then, unique names not sorting by UID)
    let (_, name) = s
        .indexed_files("alice", "INBOX")
        .into_iter()
        .find(|(u, _)| *u == 12)
        .unwrap();
    let last = s.maildir("alice").join("cur").join(&name);
    let (base, info) = name.rsplit_once(":2,").unwrap();
    let mut letters: Vec<char> = info.chars().chain(['R']).collect();
    letters.sort_unstable();
    letters.dedup();
    let renamed: String = letters.into_iter().collect();
    std::fs::rename(&last, last.with_file_name(format!("{base}:2,{renamed}"))).unwrap();
    // a new session syncs the folder, and changes one more range
    let mut d = s.select("alice", "INBOX");
    d.ok("UID STORE 41:45 +FLAGS.SILENT (\\Answered)");
    let msgs = scan_messages(&s);
    let with = |letter: char| -> Vec<u32> {
        msgs.iter()
            .filter(|m| m.flags.contains(letter))
            .map(|m| m.uid)
            .collect()
    };
    let without = |letter: char| -> Vec<u32> {
        msgs.iter()
            .filter(|m| !m.flags.contains(letter))
            .map(|m| m.uid)
            .collect()
    };
    let both =
        |a: Vec<u32>, b: &[u32]| -> Vec<u32> { a.into_iter().filter(|u| b.contains(u)).collect() };
    // the keyword is the mailbox's first: Maildir letter `a`
    let cases: Vec<(&str, Vec<u32>)> = vec![
        ("UNSEEN", without('S')),
        ("FLAGGED", with('F')),
        ("UNSEEN FLAGGED", both(without('S'), &with('F'))),
        ("ANSWERED", with('R')),
        ("KEYWORD $Work", with('a')),
        ("UNKEYWORD $Work", without('a')),
        ("OR ANSWERED NOT FLAGGED", {
            let mut v = with('R');
            v.extend(without('F'));
            v.sort_unstable();
            v.dedup();
            v
        }),
        ("DELETED", Vec::new()),
    ];
    assert!(
        with('F').len() >= 10 && with('a').len() == 19,
        "{:?}",
        msgs.len()
    );
    // the renamed message, answered by no STORE, is among the answered ones
    let tool_uid = s
        .indexed_files("alice", "INBOX")
        .into_iter()
        .find(|(_, n)| n.starts_with(base))
        .map(|(u, _)| u)
        .unwrap();
    assert_eq!(tool_uid, 12);
    assert!(with('R').contains(&tool_uid), "{:?}", with('R'));
    for (keys, want) in cases {
        assert_eq!(uids(&mut d, &format!("UID SEARCH {keys}")), want, "{keys}");
    }
    // MODSEQ: the messages changed by the last STORE, and none before it
    let r = d.ok("UID FETCH 41:45 (MODSEQ)");
    let lowest: u64 = r
        .lines("* ")
        .iter()
        .filter_map(|l| l.split("MODSEQ (").nth(1)?.split(')').next()?.parse().ok())
        .min()
        .unwrap();
    assert_eq!(
        uids(&mut d, &format!("UID SEARCH MODSEQ {lowest}")),
        vec![41, 42, 43, 44, 45]
    );
}

/// More messages than SEARCH takes through its later stages at a time (512, in one hand-off
/// to the blocking pool): HEADER of a field neither stored, hot nor learned yet sends every
/// message not decided by its flags through the header blocks, in chunks; the answers equal
/// the scan's, for that search and for random ones.
#[test]
fn searches_of_more_messages_than_a_chunk_equal_the_scan() {
    let s = Server::start();
    let mut c = s.login("alice");
    for (flags, raw) in corpus(21, 1200) {
        append(&mut c, flags, &raw);
    }
    c.ok("SELECT INBOX");
    let msgs = scan_messages(&s);
    let heavy = [
        Key::Header("X-Mailer".into(), "outlook".into()),
        Key::Not(Box::new(Key::Header("Received".into(), "mx".into()))),
        Key::Or(
            Box::new(Key::Flag("FLAGGED")),
            Box::new(Key::Header("X-Mailer".into(), String::new())),
        ),
    ];
    for key in heavy {
        let want: Vec<u32> = msgs.iter().filter(|m| key.scan(m)).map(|m| m.uid).collect();
        assert!(
            !want.is_empty() && want.len() < msgs.len(),
            "{}",
            key.imap()
        );
        assert_eq!(
            uids(&mut c, &format!("UID SEARCH {}", key.imap())),
            want,
            "{}",
            key.imap()
        );
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2101);
    let nonempty = random_searches_equal_the_scan(&mut c, &msgs, &mut rng, 40);
    assert!(
        nonempty > 10,
        "only {nonempty} of 40 searches were selective"
    );
}

/// LARGER, SMALLER, BEFORE, ON, SINCE, OLDER and YOUNGER answer from the index's flags
/// column (which holds each message's RFC822.SIZE and INTERNALDATE since schema 13):
/// messages appended with dates across the years (the epoch, a day's last second) and
/// sizes of every order give what their dates and sizes say, before and after
/// flag changes (which rewrite their entries) and an expunge.
#[test]
fn size_and_date_searches_answer_from_the_flags_column_through_changes() {
    let s = Server::start();
    let mut c = s.login("alice");
    // (day, month, year, time of day, body bytes)
    let msgs: Vec<(u32, usize, i64, &str, usize)> = vec![
        (1, 1, 1970, "00:00:00", 10),
        (31, 12, 1999, "23:59:59", 2_000),
        (1, 1, 2000, "00:00:00", 50),
        (15, 6, 2021, "08:30:00", 70_000),
        (15, 6, 2021, "20:30:00", 400),
        (29, 2, 2024, "11:11:11", 9_000),
        (1, 3, 2024, "00:00:01", 123_456),
    ];
    let mut sizes = Vec::new();
    let mut days = Vec::new();
    for (i, &(d, m, y, time, body)) in msgs.iter().enumerate() {
        let raw = format!(
            "From: a@example.org\r\nSubject: m{i}\r\n\r\n{}\r\n",
            "x".repeat(body)
        );
        let date = format!("{d:02}-{}-{y} {time} +0000", MONTHS[m - 1]);
        let cmd = format!("APPEND INBOX () \"{date}\" {{{}}}\r\n{raw}", raw.len());
        let r = c.cmd_bytes(cmd.as_bytes());
        assert_eq!(r.status(), "OK", "{}", r.all());
        sizes.push(raw.len() as u64);
        days.push(civil(y as u32, m as u8, d));
    }
    c.ok("SELECT INBOX");
    let check = |c: &mut Client, gone: &[u32]| {
        let live = |f: &dyn Fn(usize) -> bool| -> Vec<u32> {
            (0..msgs.len())
                .filter(|&i| !gone.contains(&(i as u32 + 1)) && f(i))
                .map(|i| i as u32 + 1)
                .collect()
        };
        for n in [0u64, 60, 2_100, 9_100, 200_000] {
            assert_eq!(
                uids(c, &format!("UID SEARCH LARGER {n}")),
                live(&|i| sizes[i] > n)
            );
            assert_eq!(
                uids(c, &format!("UID SEARCH SMALLER {n}")),
                live(&|i| sizes[i] < n)
            );
        }
        for (y, m, d) in [
            (1969, 12, 31),
            (1970, 1, 1),
            (1999, 12, 31),
            (2000, 1, 1),
            (2021, 6, 15),
            (2024, 3, 1),
        ] {
            let day = civil(y, m, d);
            let date = format!("{d}-{}-{y}", MONTHS[usize::from(m - 1)]);
            assert_eq!(
                uids(c, &format!("UID SEARCH BEFORE {date}")),
                live(&|i| days[i] < day)
            );
            assert_eq!(
                uids(c, &format!("UID SEARCH ON {date}")),
                live(&|i| days[i] == day)
            );
            assert_eq!(
                uids(c, &format!("UID SEARCH SINCE {date}")),
                live(&|i| days[i] >= day)
            );
        }
        // every message is older than a day, none younger
        assert_eq!(uids(c, "UID SEARCH OLDER 86400"), live(&|_| true));
        assert_eq!(uids(c, "UID SEARCH YOUNGER 86400"), Vec::<u32>::new());
        assert_eq!(
            uids(c, "UID SEARCH SEEN SINCE 1-Jan-2000 SMALLER 10000"),
            live(&|i| i % 2 == 0 && days[i] >= civil(2000, 1, 1) && sizes[i] < 10_000)
        );
    };
    c.ok("UID STORE 1,3,5,7 +FLAGS (\\Seen)");
    check(&mut c, &[]);
    c.ok("UID STORE 3 +FLAGS.SILENT (\\Deleted)");
    c.ok("EXPUNGE");
    c.ok("UID STORE 1:* -FLAGS (\\Flagged)");
    check(&mut c, &[3]);
}
