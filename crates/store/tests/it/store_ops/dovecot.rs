//! A real Dovecot 2.3 reads what the operations leave: flags and keywords after STORE,
//! UIDs after COPY/MOVE/EXPUNGE, folders after CREATE/RENAME, the subscriptions file.
//! Needs `dovecot` and `doveadm` (Debian `dovecot-core`; started by maildex-dovecot-harness,
//! which hands the Maildir to uid 65534 as root), so it is ignored by default:
//! `cargo test -p maildex-store --test it store_ops -- --ignored`.

use crate::support::Scratch;
use maildex_dovecot_harness::{Dovecot, Options, User};
use maildex_maildir::Flags;
use maildex_store::FlagOp;

use super::{deliver, kw};

/// A private Dovecot (maildex-dovecot-harness) with one user, `t`, whose mail is the
/// scratch user's Maildir (handed to uid 65534 when we run as root).
fn dovecot(s: &Scratch) -> Dovecot {
    Dovecot::start(
        &s.dir.path().join("dovecot"),
        Options {
            mail_location: format!("maildir:{}", s.maildir.display()),
            users: vec![User::new("t", "pw")],
            mail_root: Some(s.maildir.clone()),
            ..Options::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn doveadm(dv: &Dovecot, args: &[&str]) -> String {
    dv.doveadm(args)
        .unwrap_or_else(|e| panic!("doveadm {args:?}: {e}"))
}

fn fetch(dv: &Dovecot, mailbox: &str) -> Vec<String> {
    doveadm(
        dv,
        &[
            "-f",
            "flow",
            "fetch",
            "-u",
            "t",
            "uid flags",
            "mailbox",
            mailbox,
            "all",
        ],
    )
    .lines()
    .map(str::to_string)
    .collect()
}

#[test]
#[ignore = "needs dovecot-core and root"]
fn dovecot_reads_what_the_operations_leave() {
    let s = Scratch::new();
    let store = s.open();
    store.sync_all().unwrap();
    let uids: Vec<maildex_store::Uid> = (0..4)
        .map(|i| deliver(&store, "INBOX", &format!("d{i}")))
        .collect();
    store
        .set_flags(
            "INBOX",
            &uids[..1],
            FlagOp::Add,
            Flags::SEEN,
            &kw(&["$Label1"]),
            None,
        )
        .unwrap();
    store
        .set_flags("INBOX", &uids[1..2], FlagOp::Add, Flags::FLAGGED, &[], None)
        .unwrap();
    store
        .set_flags("INBOX", &uids[3..4], FlagOp::Add, Flags::DELETED, &[], None)
        .unwrap();
    store.create_mailbox("Arch").unwrap();
    store.create_mailbox("Arch.sub").unwrap();
    store.create_mailbox("Été").unwrap();
    store.copy("INBOX", "Arch", &uids[..1]).unwrap();
    store.move_messages("INBOX", "Arch", &uids[1..2]).unwrap();
    assert_eq!(store.expunge("INBOX", None).unwrap(), vec![uids[3]]);
    store.rename_mailbox("Arch", "Archive").unwrap();
    store.subscribe("Archive").unwrap();
    store.subscribe("Été").unwrap();
    store.subscribe("Archive.sub").unwrap();
    store.unsubscribe("Archive.sub").unwrap();
    assert_eq!(store.check().unwrap(), vec![]);
    drop(store);

    let dv = dovecot(&s);
    let inbox = fetch(&dv, "INBOX");
    assert_eq!(inbox.len(), 2, "{inbox:?}");
    assert!(
        inbox[0].starts_with("uid=1 ")
            && inbox[0].contains("\\Seen")
            && inbox[0].contains("$Label1"),
        "{inbox:?}"
    );
    // still in new/: no stored flag (Dovecot's session-level \\Recent aside)
    assert!(
        inbox[1].starts_with("uid=3 ") && !inbox[1].replace("\\Recent", "").contains('\\'),
        "{inbox:?}"
    );
    let arch = fetch(&dv, "Archive");
    assert_eq!(arch.len(), 2, "{arch:?}");
    assert!(
        arch[0].starts_with("uid=1 ") && arch[0].contains("\\Seen") && arch[0].contains("$Label1"),
        "{arch:?}"
    );
    assert!(
        arch[1].starts_with("uid=2 ") && arch[1].contains("\\Flagged"),
        "{arch:?}"
    );
    let status = doveadm(
        &dv,
        &[
            "-f",
            "flow",
            "mailbox",
            "status",
            "-u",
            "t",
            "uidnext messages",
            "INBOX",
        ],
    );
    assert!(
        status.contains("uidnext=5") && status.contains("messages=2"),
        "UIDs are not reused: {status}"
    );
    let boxes = doveadm(&dv, &["mailbox", "list", "-u", "t"]);
    for b in ["INBOX", "Archive", "Archive.sub", "Été"] {
        assert!(boxes.lines().any(|l| l == b), "{b} not in {boxes}");
    }
    assert!(!boxes.lines().any(|l| l == "Arch"), "{boxes}");
    let subscribed = doveadm(&dv, &["mailbox", "list", "-u", "t", "-s"]);
    let mut subs: Vec<&str> = subscribed.lines().collect();
    subs.sort_unstable();
    assert_eq!(subs, vec!["Archive", "Été"], "{subscribed}");
    // Dovecot changes flags on a copied message; we read it back
    doveadm(
        &dv,
        &[
            "flags",
            "add",
            "-u",
            "t",
            "\\Answered",
            "mailbox",
            "Archive",
            "uid",
            "1",
        ],
    );
    // the harness's service limits draw a start-up warning about `client_limit` from the
    // master and config processes; every other line is about the mail
    let log: String = dv
        .log()
        .lines()
        .filter(|l| !l.contains("client_limit="))
        .map(|l| format!("{l}\n"))
        .collect();
    for bad in ["Error", "Warning", "Panic", "Fatal", "Broken", "corrupt"] {
        assert!(!log.contains(bad), "dovecot.log has {bad}:\n{log}");
    }
    let store = s.open();
    store.sync_mailbox("Archive").unwrap();
    let st = super::states(&store, "Archive");
    assert_ne!(st[0].1.flags & maildex_index::flag::ANSWERED, 0);
    assert_eq!(store.check().unwrap(), vec![]);
}
