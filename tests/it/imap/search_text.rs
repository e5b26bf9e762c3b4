//! Issue 18 #2: SEARCH BODY and TEXT compare the text stored in the index after the
//! message was indexed (by the daemon's background indexer, or by the SEARCH itself:
//! issue 18 #3), never a message file. With every message file truncated to 0 bytes once
//! the indexer has written the texts, before any session looked at the mailbox, BODY/TEXT
//! still find what the files held (an answer that read a file would change); and
//! for random criteria over a corpus with encoded parts, HTML-only mail, attachments and
//! broken MIME, `UID SEARCH` equals a scan of the files (the text extracted from each file
//! as the scan rule says, maildex-text's `MessageText` and `SearchText`).

use rand::{Rng, SeedableRng};

use super::search_index::{append, astring, corpus, equals_scan, uids};
use crate::support::daemon::{Opts, Server};
use crate::support::imap::{simple, Client};
use maildex_store::text::{self, Html, MessageText, SearchText};

/// Delivered over LMTP, in this order (UIDs 1-6).
fn delivered() -> Vec<String> {
    vec![
        simple("plain", "the quick brown fox"),
        "From: a@example.org\nSubject: latin\nMIME-Version: 1.0\n\
         Content-Type: text/plain; charset=iso-8859-1\n\
         Content-Transfer-Encoding: quoted-printable\n\ncaf=E9 cr=E8me\n"
            .to_string(),
        "From: b@example.org\nSubject: mixed\nMIME-Version: 1.0\n\
         Content-Type: multipart/mixed; boundary=zz\n\n--zz\n\
         Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\n\
         R3LDvMOfZSBhdXMgS8O2bG4K\n--zz\nContent-Type: application/pdf\n\
         Content-Transfer-Encoding: base64\n\nc2VjcmV0d29yZAo=\n--zz--\n"
            .to_string(),
        "From: c@example.org\nSubject: html\nMIME-Version: 1.0\n\
         Content-Type: text/html\n\n<p>Hello <b>wor</b>ld</p>\n"
            .to_string(),
        "From: d@example.org\nSubject: =?UTF-8?Q?Re=C3=A7u?=\n\nnothing here\n".to_string(),
        simple("second fox", "a lazy dog, no FOX"),
    ]
}

/// The searches and their answers on the delivered messages (and one APPENDed as UID 7).
const EXPECTED: &[(&str, &[u32])] = &[
    ("BODY fox", &[1, 6]),
    ("BODY FOX", &[1, 6]),
    ("BODY \"quick brown\"", &[1]),
    ("BODY \"uick bro\"", &[1]),
    ("BODY \"<b>wor</b>\"", &[4]),
    // HTML as written: a word split by a tag is not found (Dovecot's scan)
    ("BODY world", &[]),
    // an attachment is not text
    ("BODY secretword", &[]),
    ("BODY appended", &[7]),
    ("TEXT appended", &[7]),
    ("NOT BODY fox", &[2, 3, 4, 5, 7]),
    ("OR BODY lazy BODY quick", &[1, 6]),
    ("SUBJECT fox BODY fox", &[6]),
    ("TEXT \"subject: html\"", &[4]),
    ("BODY \"subject: html\"", &[]),
    ("TEXT example.org", &[1, 2, 3, 4, 5, 6, 7]),
];

/// The same with non-ASCII words (sent as UTF-8 literals).
const EXPECTED_UTF8: &[(&str, &str, &[u32])] = &[
    ("BODY", "café crème", &[2]),
    ("BODY", "CAFÉ", &[2]),
    ("BODY", "grüße aus köln", &[3]),
    ("BODY", "reçu", &[]),
    ("TEXT", "reçu", &[5]),
];

fn answers(c: &mut Client) -> Vec<Vec<u32>> {
    let mut out: Vec<Vec<u32>> = EXPECTED
        .iter()
        .map(|(q, _)| uids(c, &format!("UID SEARCH {q}")))
        .collect();
    for (key, word, _) in EXPECTED_UTF8 {
        let q = format!("UID SEARCH CHARSET UTF-8 {key} {}", astring(word));
        out.push(uids(c, &q));
    }
    out
}

fn expected() -> Vec<Vec<u32>> {
    EXPECTED
        .iter()
        .map(|(_, u)| u.to_vec())
        .chain(EXPECTED_UTF8.iter().map(|(_, _, u)| u.to_vec()))
        .collect()
}

/// APPENDs the message that becomes UID 7 of [`EXPECTED`].
fn append_seventh(c: &mut Client) {
    append(
        c,
        "",
        b"From: e@example.org\r\nSubject: appended\r\n\r\nan appended message\r\n",
    );
}

fn truncate_all(s: &Server, folder: &str) {
    for f in s.files("alice", folder) {
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&f)
            .unwrap();
    }
}

#[test]
fn body_and_text_answer_from_the_index_with_every_file_truncated() {
    let s = Server::start();
    for m in delivered() {
        s.deliver("alice", &m);
    }
    // emptied before the first session, once the background indexer has the texts: the
    // first search after delivery reads no file
    s.wait_text_indexed("alice");
    truncate_all(&s, "INBOX");
    let mut c = s.login("alice");
    append_seventh(&mut c);
    s.wait_text_indexed("alice");
    truncate_all(&s, "INBOX");
    c.ok("SELECT INBOX");
    assert_eq!(answers(&mut c), expected());
    // COPY copies the stored text (the files it links are empty now)
    c.ok("CREATE Archive");
    c.ok("UID COPY 1:* Archive");
    c.ok("SELECT Archive");
    assert_eq!(answers(&mut c), expected());
    // an expunged message is never answered
    c.ok("UID STORE 1 +FLAGS (\\Deleted)");
    c.ok("EXPUNGE");
    let fox = uids(&mut c, "UID SEARCH BODY fox");
    assert_eq!(fox, vec![6]);
}

/// One search key of the property test.
#[derive(Clone, Debug)]
enum Key {
    Body(String),
    Text(String),
    Flagged,
    Not(Box<Key>),
    Or(Box<Key>, Box<Key>),
}

impl Key {
    fn imap(&self) -> String {
        match self {
            Key::Body(w) => format!("BODY {}", astring(w)),
            Key::Text(w) => format!("TEXT {}", astring(w)),
            Key::Flagged => "FLAGGED".into(),
            Key::Not(k) => format!("NOT {}", k.imap()),
            Key::Or(a, b) => format!("OR {} {}", a.imap(), b.imap()),
        }
    }

    fn scan(&self, m: &Scanned) -> bool {
        match self {
            Key::Body(w) => w.is_empty() || m.text.body_contains(&text::normalize(w)),
            Key::Text(w) => w.is_empty() || m.text.text_contains(&text::normalize(w)),
            Key::Flagged => m.flagged,
            Key::Not(k) => !k.scan(m),
            Key::Or(a, b) => a.scan(m) || b.scan(m),
        }
    }
}

/// A message as the scan sees it: its file's text.
struct Scanned {
    uid: u32,
    flagged: bool,
    text: SearchText<'static>,
    /// Its text parts and header blocks as written (not normalised), to cut needles from.
    pieces: Vec<String>,
}

fn scan_files(s: &Server) -> Vec<Scanned> {
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
            let built = maildex_store::build_record(&bytes, Default::default()).expect("build");
            let t = MessageText::extract(&bytes, &built.record.cached.parts, Html::AsWritten);
            let pieces = t.bodies.iter().chain(&t.headers).cloned().collect();
            Scanned {
                uid,
                flagged: name
                    .rsplit_once(":2,")
                    .is_some_and(|(_, f)| f.contains('F')),
                text: SearchText::new(t),
                pieces,
            }
        })
        .collect()
}

/// A needle: mostly a piece of some message's text (1 to 12 characters, so inside words,
/// across spaces, with its case as written), sometimes a word found nowhere.
fn needle(rng: &mut impl Rng, msgs: &[Scanned]) -> String {
    if rng.gen_bool(0.1) {
        return ["zzqx nowhere", "", "é"][rng.gen_range(0..3)].to_string();
    }
    let m = &msgs[rng.gen_range(0..msgs.len())];
    let pieces: Vec<&String> = m.pieces.iter().filter(|p| !p.is_empty()).collect();
    let Some(p) = pieces.get(rng.gen_range(0..pieces.len().max(1))) else {
        return "fox".into();
    };
    let chars: Vec<char> = p.chars().collect();
    let start = rng.gen_range(0..chars.len());
    let len = rng.gen_range(1..=12).min(chars.len() - start);
    let w: String = chars[start..start + len]
        .iter()
        .filter(|c| !c.is_control())
        .collect();
    if w.is_empty() {
        "fox".into()
    } else {
        w
    }
}

fn leaf(rng: &mut impl Rng, msgs: &[Scanned]) -> Key {
    match rng.gen_range(0..10) {
        0..=4 => Key::Body(needle(rng, msgs)),
        5..=8 => Key::Text(needle(rng, msgs)),
        _ => Key::Flagged,
    }
}

fn tree(rng: &mut impl Rng, msgs: &[Scanned], depth: u32) -> Key {
    if depth == 0 || rng.gen_bool(0.6) {
        return leaf(rng, msgs);
    }
    if rng.gen_bool(0.5) {
        Key::Not(Box::new(tree(rng, msgs, depth - 1)))
    } else {
        Key::Or(
            Box::new(tree(rng, msgs, depth - 1)),
            Box::new(tree(rng, msgs, depth - 1)),
        )
    }
}

#[test]
fn body_and_text_search_from_the_index_equals_a_scan_of_the_files() {
    let s = Server::start();
    let mut c = s.login("alice");
    for (flags, raw) in corpus(1802, 40) {
        append(&mut c, flags, &raw);
    }
    for m in delivered() {
        s.deliver("alice", &m);
    }
    c.ok("SELECT INBOX");
    random_searches_equal_a_scan(&s, &mut c);
}

/// The same with `[storage] full_text` turned off after the appends: those messages answer
/// from their stored text, the delivered ones (no record) from their files.
#[test]
fn body_and_text_search_with_and_without_stored_text_equals_a_scan_of_the_files() {
    let s = with_full_text(true, None);
    let mut c = s.login("alice");
    let appended = corpus(1802, 40);
    for (flags, raw) in &appended {
        append(&mut c, flags, raw);
    }
    s.wait_text_indexed("alice");
    drop(c);
    let s = restart(s, false);
    for m in delivered() {
        s.deliver("alice", &m);
    }
    let mut c = s.login("alice");
    c.ok("SELECT INBOX");
    assert_eq!(text_records(&s), appended.len());
    random_searches_equal_a_scan(&s, &mut c);
}

fn random_searches_equal_a_scan(s: &Server, c: &mut Client) {
    let msgs = scan_files(s);
    assert!(msgs.len() > 50, "{}", msgs.len());
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(18_02);
    let selective = equals_scan(c, 200, msgs.len(), || {
        let keys: Vec<Key> = (0..rng.gen_range(1..3))
            .map(|_| tree(&mut rng, &msgs, 2))
            .collect();
        let want: Vec<u32> = msgs
            .iter()
            .filter(|m| keys.iter().all(|k| k.scan(m)))
            .map(|m| m.uid)
            .collect();
        (
            keys.iter().map(Key::imap).collect::<Vec<_>>().join(" "),
            want,
        )
    });
    // guards the property against needles that never tell messages apart
    assert!(
        selective > 80,
        "only {selective} of 200 searches were selective"
    );
}

fn with_full_text(on: bool, dir: Option<tempfile::TempDir>) -> Server {
    Server::start_with(Opts {
        storage_extra: format!("full_text = {on}\n"),
        dir,
        ..Opts::default()
    })
}

/// Stops `s` and starts a daemon on its folder with `full_text = on`.
fn restart(mut s: Server, on: bool) -> Server {
    s.stop();
    let dir = std::mem::replace(&mut s.dir, tempfile::tempdir().unwrap());
    drop(s);
    with_full_text(on, Some(dir))
}

/// Full-text records in alice's index.
fn text_records(s: &Server) -> usize {
    let u = s.accounts.lookup("alice").unwrap().unwrap();
    let store = s.accounts.store(&u).unwrap();
    store
        .index()
        .read(|r| {
            let mut n = 0;
            for (id, _) in r.mailboxes()? {
                r.for_each_fts(
                    maildex_store::records::Fts::Text,
                    id,
                    maildex_store::Uid::MIN..=maildex_store::Uid::MAX,
                    |_, _| {
                        n += 1;
                        Ok(std::ops::ControlFlow::Continue(()))
                    },
                )?;
            }
            Ok(n)
        })
        .unwrap()
}

/// A text search of more messages than one batch (512) takes its batches on several
/// threads of the blocking pool: every match comes back once, those at the batches' edges
/// included, as SEARCH, its complement, ESEARCH, and with the highest modseq of
/// CONDSTORE's MODSEQ.
#[test]
fn a_text_search_over_many_batches_answers_every_match_once() {
    let s = Server::start();
    s.deliver("alice", &simple("message 1", "first"));
    let cur = s.maildir("alice").join("cur");
    // nine batches (UIDs 1-512, 513-1024, ..., 4097-4100), so that each thread takes some
    let n = 4100u32;
    let edges = [511, 512, 513, 1024, 1025, 2048, 2049, 4096, 4097, 4100];
    let holds = |i: u32| i % 7 == 0 || edges.contains(&i);
    for i in 2..=n {
        // the others hold both words (the word lists leave them to the texts)
        let body = if holds(i) {
            format!("see you next week, {i}\n")
        } else {
            format!("next to nothing this week, {i}\n")
        };
        let name = format!("1700000000.M{i:05}P1.test:2,S");
        std::fs::write(cur.join(name), simple(&format!("message {i}"), &body)).unwrap();
    }
    let mut c = s.login("alice");
    c.ok("SELECT INBOX");
    // after the first delivery, UIDs follow the file names: message i is UID i, sequence i
    let want: Vec<u32> = (1..=n).filter(|&i| holds(i)).collect();
    assert_eq!(uids(&mut c, "SEARCH BODY \"next week\""), want);
    assert_eq!(uids(&mut c, "UID SEARCH TEXT \"next week\""), want);
    let rest: Vec<u32> = (1..=n).filter(|&i| !holds(i)).collect();
    assert_eq!(uids(&mut c, "SEARCH NOT BODY \"next week\""), rest);
    let r = c.ok("SEARCH RETURN (MIN MAX COUNT) BODY \"next week\"");
    let esearch = r.lines("* ESEARCH").join(" ");
    for item in [
        "MIN 7".to_owned(),
        "MAX 4100".into(),
        format!("COUNT {}", want.len()),
    ] {
        assert!(esearch.contains(&item), "{item}: {esearch}");
    }
    // CONDSTORE: the highest modseq among the matches (RFC 7162 §3.1.5), here that of
    // the last STORE, on message 2048
    c.ok("STORE 2048 +FLAGS (\\Flagged)");
    let r = c.ok("FETCH 2048 (MODSEQ)");
    let fetched = r.all();
    let modseq: u64 = fetched
        .split("MODSEQ (")
        .nth(1)
        .and_then(|t| t.split(')').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no MODSEQ in {fetched}"));
    let r = c.ok("SEARCH MODSEQ 1 BODY \"next week\"");
    let line = r.lines("* SEARCH").join(" ");
    assert!(line.ends_with(&format!("(MODSEQ {modseq})")), "{line}");
    assert_eq!(uids(&mut c, "SEARCH MODSEQ 1 BODY \"next week\""), want);
}

/// `[storage] full_text = false`: no text is stored, and BODY/TEXT give the same answers
/// from the message files (a truncated file then matches nothing: they were read).
#[test]
fn with_full_text_off_body_and_text_read_the_files_with_the_same_answers() {
    let s = with_full_text(false, None);
    for m in delivered() {
        s.deliver("alice", &m);
    }
    let mut c = s.login("alice");
    append_seventh(&mut c);
    c.ok("SELECT INBOX");
    assert_eq!(answers(&mut c), expected());
    c.ok("CREATE Archive");
    c.ok("UID COPY 1:* Archive");
    c.ok("SELECT Archive");
    assert_eq!(answers(&mut c), expected());
    assert_eq!(text_records(&s), 0);
    // index check does not report the records it was told not to write
    s.assert_clean("alice");
    truncate_all(&s, ".Archive");
    assert_eq!(uids(&mut c, "UID SEARCH BODY fox"), Vec::<u32>::new());
}

/// A mailbox indexed with `full_text` on, then served with it off (more mail arrives),
/// then on again, answers right throughout; once on, the first SEARCH indexes the texts
/// still missing (as the background indexer would), after which no file is read.
#[test]
fn full_text_turned_off_and_on_again_never_misses_a_match() {
    let s = with_full_text(true, None);
    let all = delivered();
    for m in &all[..3] {
        s.deliver("alice", m);
    }
    s.wait_text_indexed("alice");
    let s = restart(s, false);
    for m in &all[3..] {
        s.deliver("alice", m);
    }
    let mut c = s.login("alice");
    append_seventh(&mut c);
    c.ok("SELECT INBOX");
    assert_eq!(answers(&mut c), expected());
    assert_eq!(text_records(&s), 3);
    s.assert_clean("alice");
    drop(c);
    let s = restart(s, true);
    let mut c = s.login("alice");
    c.ok("SELECT INBOX");
    assert_eq!(answers(&mut c), expected());
    s.wait_text_indexed("alice");
    assert_eq!(text_records(&s), 7);
    s.assert_clean("alice");
    let u = s.accounts.lookup("alice").unwrap().unwrap();
    let store = s.accounts.store(&u).unwrap();
    let (written, unreadable) = store.rebuild_texts(&mut |_| {}).unwrap();
    assert_eq!((written, unreadable), (7, 0));
    s.assert_clean("alice");
    truncate_all(&s, "INBOX");
    assert_eq!(answers(&mut c), expected());
}
