//! `[storage] quota_warning` (issue 20 #5): the delivery that takes a user across the
//! percentage of the quota also leaves one notice in INBOX, once per crossing, as Dovecot's
//! `quota_warning`; later deliveries above the threshold add none, and falling below and
//! crossing again brings another.

use crate::support::daemon::{Opts, Server};
use crate::support::imap::Client;

/// A message of about `kib` KiB.
fn message(i: u32, kib: usize) -> String {
    format!(
        "From: a@example.net\nSubject: filler {i}\n\n{}\n",
        "x".repeat(kib * 1024)
    )
}

/// Sequence numbers of the INBOX messages whose subject says the mailbox is filling up.
fn notices(c: &mut Client) -> Vec<String> {
    c.ok("EXAMINE INBOX");
    let r = c.ok("SEARCH SUBJECT \"mailbox is 80% full\"");
    r.lines("* SEARCH")
        .iter()
        .flat_map(|l| {
            l.trim_start_matches("* SEARCH")
                .split_whitespace()
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn crossing_the_warning_threshold_delivers_one_notice() {
    let s = Server::start_with(Opts {
        users: "alice:{PLAIN}pw::::::userdb_quota_rule=*:storage=100K\n".into(),
        storage_extra: "quota_warning = 80\n".into(),
        ..Opts::default()
    });
    let mut c = s.login("alice");
    // 3 x 20 KiB: 60% of the quota, no notice
    for i in 0..3 {
        s.deliver("alice", &message(i, 20));
    }
    assert!(notices(&mut c).is_empty());
    // the fourth takes the use past 80 KiB: one notice, right after it
    s.deliver("alice", &message(3, 20));
    let n = notices(&mut c);
    assert_eq!(n, ["5"], "the notice follows the fourth message");
    let r = c.ok("FETCH 5 (BODY.PEEK[HEADER.FIELDS (FROM AUTO-SUBMITTED)] BODY.PEEK[TEXT])");
    let all = r.all();
    assert!(all.contains("Auto-Submitted: auto-generated"), "{all}");
    assert!(
        all.contains("From: Mail System <postmaster@mx.test>"),
        "{all}"
    );
    assert!(all.contains("new mail to you is refused"), "{all}");
    // above the threshold already: no second notice
    s.deliver("alice", &message(4, 5));
    assert_eq!(notices(&mut c).len(), 1);
    // below it again (three fillers and the notice gone), then across: a new notice
    c.ok("SELECT INBOX");
    c.ok("STORE 1:3,5 +FLAGS.SILENT (\\Deleted)");
    c.ok("EXPUNGE");
    assert!(notices(&mut c).is_empty());
    s.deliver("alice", &message(5, 30));
    s.deliver("alice", &message(6, 30));
    assert_eq!(
        notices(&mut c).len(),
        1,
        "a second crossing, a second notice"
    );
    s.assert_clean("alice");
}
