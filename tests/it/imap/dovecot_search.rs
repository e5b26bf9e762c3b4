//! SEARCH's header criteria as Dovecot 2.3 answers them (issue 18 #1): the same messages
//! (tests/it/imap/search_index.rs's corpus: encoded words, 8-bit headers, missing and
//! repeated fields, broken MIME, generated mail) APPENDed to a private Dovecot and to
//! maildex, then every header criterion with each word; the UID lists must be equal.
//!
//! Needs Dovecot (`dovecot-core dovecot-imapd`, started through maildex-dovecot-harness),
//! so it is ignored by default: `cargo test -p maildex-tests --test it dovecot -- --ignored`.

use std::net::SocketAddr;

use super::dovecot_condstore::start_dovecot;
use super::search_index::{append, astring, corpus, uids, WORDS};
use crate::support::daemon::Server;
use crate::support::imap::Client;

const CRITERIA: &[&str] = &[
    "FROM",
    "TO",
    "CC",
    "BCC",
    "SUBJECT",
    "HEADER Subject",
    "HEADER From",
    "HEADER List-Id",
    "HEADER Message-ID",
    "HEADER X-Mailer",
    "HEADER Received",
    "HEADER X-Weird",
    // issue 18 #2: answered from the text stored at indexing
    "BODY",
    "TEXT",
];

const DATES: &[&str] = &[
    "1-Jan-1970",
    "3-Jan-2022",
    "31-Dec-2023",
    "1-Jul-2023",
    "1-Jun-2023",
];

/// Every search, as (command, UIDs found), on the server at `addr`.
fn searches(addr: SocketAddr) -> Vec<(String, Vec<u32>)> {
    let mut c = Client::connect(addr);
    c.ok("LOGIN alice pw");
    for (flags, raw) in corpus(18, 40) {
        append(&mut c, flags, &raw);
    }
    c.ok("SELECT INBOX");
    let mut out = Vec::new();
    let mut run = |c: &mut Client, cmd: String| {
        let found = uids(c, &cmd);
        out.push((cmd, found));
    };
    for crit in CRITERIA {
        for w in WORDS {
            run(
                &mut c,
                format!("UID SEARCH CHARSET UTF-8 {crit} {}", astring(w)),
            );
        }
    }
    for k in ["SENTBEFORE", "SENTON", "SENTSINCE"] {
        for d in DATES {
            run(&mut c, format!("UID SEARCH {k} {d}"));
        }
    }
    out
}

#[test]
#[ignore = "needs Dovecot (dovecot-core, dovecot-imapd)"]
fn header_criteria_answer_as_dovecot_does() {
    let dir = tempfile::tempdir().unwrap();
    let mut dc = start_dovecot(dir.path());
    let dovecot = searches(dc.imap_addr());
    dc.stop();
    let s = Server::start();
    let maildex = searches(s.imap);
    let differ: Vec<String> = dovecot
        .iter()
        .zip(&maildex)
        .filter(|((_, d), (_, m))| d != m)
        .map(|((cmd, d), (_, m))| format!("{cmd}: Dovecot {d:?}, maildex {m:?}"))
        .collect();
    assert!(differ.is_empty(), "{}", differ.join("\n"));
    assert_eq!(dovecot.len(), maildex.len());
    let found = dovecot.iter().filter(|(_, u)| !u.is_empty()).count();
    assert!(found > 60, "only {found} searches found something");
}
