//! Issue 6 item 4: a listing opens no message file. Messages are delivered over LMTP,
//! then every message file is truncated to 0 bytes (names kept, so flags and sizes in the
//! names stay, and the directories' stamps do not move); the listings clients send
//! (Thunderbird's, mutt's, ENVELOPE/BODYSTRUCTURE of 1:*) must answer exactly as before.

use crate::support::daemon::Server;
use crate::support::imap::{simple, Client};

const THUNDERBIRD: &str = "UID FETCH 1:* (UID RFC822.SIZE FLAGS BODY.PEEK[HEADER.FIELDS \
(From To Cc Bcc Subject Date Message-ID Priority X-Priority References Newsgroups \
In-Reply-To Content-Type Reply-To)])";
const SUMMARY: &str = "FETCH 1:* (ENVELOPE BODYSTRUCTURE INTERNALDATE RFC822.SIZE)";
const MUTT: &str = "FETCH 1:* (UID FLAGS INTERNALDATE RFC822.SIZE BODY.PEEK[HEADER.FIELDS \
(DATE FROM SENDER SUBJECT TO CC MESSAGE-ID REFERENCES CONTENT-TYPE CONTENT-DESCRIPTION \
IN-REPLY-TO REPLY-TO LINES LIST-POST X-LABEL X-ORIGINAL-TO)])";
const HEADERS: &str = "FETCH 1:* (BODY BODY.PEEK[HEADER] \
BODY.PEEK[HEADER.FIELDS.NOT (Received X-Spam)] BODY.PEEK[1.MIME])";

fn messages() -> Vec<String> {
    let mut v = vec![
        simple("plain one", "first body\nline two"),
        "From: =?UTF-8?Q?Andr=C3=A9?= <andre@example.fr>\nTo: alice@example.org\n\
         Cc: a@example.com, \"B, C\" <bc@example.com>\nSubject: =?UTF-8?B?w6l0w6k=?=\n\
         Date: Tue, 1 Mar 2022 08:00:00 +0100\nMessage-ID: <two@example.fr>\n\
         In-Reply-To: <one@example.net>\nReferences: <zero@example.net> <one@example.net>\n\
         X-Priority: 1\nPriority: urgent\nX-Spam: no\nX-Label: work\n\
         Received: from a by b; Tue, 1 Mar 2022 08:00:00 +0100\n\
         MIME-Version: 1.0\nContent-Type: multipart/alternative; boundary=\"b1\"\n\n\
         --b1\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\n\
         caf\u{e9}\n--b1\nContent-Type: text/html; charset=utf-8\n\n<p>caf\u{e9}</p>\n--b1--\n"
            .to_string(),
        "From: list@example.org\nSubject: attachment\nList-Post: <mailto:l@example.org>\n\
         MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=zz\n\n--zz\n\
         Content-Type: text/plain\n\nsee attached\n--zz\nContent-Type: application/pdf; \
         name=\"a.pdf\"\nContent-Disposition: attachment; filename=\"a.pdf\"\n\
         Content-Transfer-Encoding: base64\n\nJVBERi0xLjQK\n--zz--\n"
            .to_string(),
    ];
    for i in 0..20 {
        v.push(simple(&format!("bulk {i}"), &"text line\n".repeat(i + 1)));
    }
    v
}

/// The untagged answers of each listing, as raw bytes.
fn listings(c: &mut Client) -> Vec<Vec<u8>> {
    [
        THUNDERBIRD,
        SUMMARY,
        MUTT,
        HEADERS,
        "SEARCH SUBJECT bulk FROM example",
    ]
    .iter()
    .map(|cmd| {
        let r = c.ok(cmd);
        assert!(!r.untagged.is_empty(), "{cmd}");
        r.untagged.iter().flat_map(|u| u.raw.clone()).collect()
    })
    .collect()
}

#[test]
fn listings_answer_from_the_index_with_every_file_truncated() {
    let s = Server::start();
    let msgs = messages();
    for m in &msgs {
        s.deliver("alice", m);
    }
    let mut before_session = s.login("alice");
    before_session.ok("EXAMINE INBOX");
    let before = listings(&mut before_session);
    assert_eq!(
        before[1].windows(6).filter(|w| w == b" FETCH").count(),
        msgs.len()
    );
    // truncate every message file, keeping its name and its directory's stamps
    let files = s.files("alice", "INBOX");
    assert_eq!(files.len(), msgs.len());
    let mut dir_stamps = Vec::new();
    for sub in ["new", "cur"] {
        let d = s.maildir("alice").join(sub);
        dir_stamps.push(std::fs::metadata(&d).unwrap().modified().unwrap());
    }
    for f in &files {
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(f)
            .unwrap();
        assert_eq!(std::fs::metadata(f).unwrap().len(), 0);
    }
    for (i, sub) in ["new", "cur"].iter().enumerate() {
        let d = s.maildir("alice").join(sub);
        assert_eq!(
            std::fs::metadata(&d).unwrap().modified().unwrap(),
            dir_stamps[i]
        );
    }
    // the same session, and a new one (whose SELECT syncs the mailbox)
    let again = listings(&mut before_session);
    let mut fresh = s.login("alice");
    fresh.ok("EXAMINE INBOX");
    let after = listings(&mut fresh);
    for (i, (b, (a1, a2))) in before.iter().zip(again.iter().zip(&after)).enumerate() {
        assert_eq!(
            String::from_utf8_lossy(b),
            String::from_utf8_lossy(a1),
            "listing {i}, same session"
        );
        assert_eq!(
            String::from_utf8_lossy(b),
            String::from_utf8_lossy(a2),
            "listing {i}, new session"
        );
    }
    // STATUS and a read-write SELECT still come from the index
    let r = fresh.ok("STATUS INBOX (MESSAGES SIZE)");
    assert!(
        r.all().contains(&format!("MESSAGES {}", msgs.len())),
        "{}",
        r.all()
    );
    let mut rw = s.login("alice");
    let r = rw.ok("SELECT INBOX");
    assert!(r.all().contains(&format!("* {} EXISTS", msgs.len())));
    let r = rw.ok(THUNDERBIRD);
    let raw: Vec<u8> = r.untagged.iter().flat_map(|u| u.raw.clone()).collect();
    // the only difference may be \Recent in FLAGS: the EXAMINE sessions show it unclaimed
    // (RFC 3501 §2.3.2), and this SELECT claims it after the new one's EXAMINE
    let without_recent = |b: &[u8]| {
        String::from_utf8_lossy(b)
            .replace(" \\Recent", "")
            .replace("\\Recent", "")
    };
    assert_eq!(without_recent(&raw), without_recent(&before[0]));
}

#[test]
fn a_listing_longer_than_a_batch_comes_out_whole_and_in_order() {
    // FETCH reads and renders 512 messages per batch, two batches ahead of the socket:
    // 1,300 messages are three batches, the last one short
    let s = Server::start();
    s.deliver("alice", &simple("message 1", "first"));
    let cur = s.maildir("alice").join("cur");
    let n = 1300;
    for i in 2..=n {
        let body = simple(&format!("message {i}"), &"line\n".repeat(i % 7 + 1));
        std::fs::write(cur.join(format!("1700000000.M{i:05}P1.test:2,S")), body).unwrap();
    }
    let mut c = s.login("alice");
    c.ok("EXAMINE INBOX");
    for (cmd, needle) in [
        ("FETCH 1:* (UID ENVELOPE)", "\"message "),
        // a file-reading item takes the per-message path, in the same batches
        (
            "FETCH 1:* (UID BODY.PEEK[TEXT] BODY.PEEK[HEADER.FIELDS (SUBJECT)])",
            "message ",
        ),
    ] {
        let r = c.ok(cmd);
        assert_eq!(r.untagged.len(), n, "{cmd}");
        let mut last_uid = 0;
        for (i, u) in r.untagged.iter().enumerate() {
            let text = String::from_utf8_lossy(&u.raw);
            assert!(text.starts_with(&format!("* {} FETCH ", i + 1)), "{text}");
            let uid: u32 = text
                .split("UID ")
                .nth(1)
                .and_then(|t| t.split([' ', ')']).next())
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("no UID in {text}"));
            assert!(uid > last_uid, "UIDs out of order: {last_uid} then {uid}");
            last_uid = uid;
            // the UIDs were given in file-name order after the first delivery: message k
            // has UID k
            assert!(
                text.contains(&format!("{needle}{uid}")),
                "{cmd}: message {uid} answered with {text}"
            );
        }
    }
}
