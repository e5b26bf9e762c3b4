//! The operations the IMAP session asks of the store (STORE, EXPUNGE, COPY, MOVE, CREATE,
//! DELETE, RENAME, LIST, SUBSCRIBE): the Maildir files, dovecot-uidlist, the index and its
//! counters after each, `check()` clean after every one, modseqs rising; the races with
//! another Maildir tool renaming or deleting a file under us; the commit generation IDLE
//! waits on.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::MetadataExt;

use crate::support::{message, Scratch};
use maildex_index::{flag, MailboxRecord, MessageState};
use maildex_maildir::{Flags, Uidlist};
use maildex_store::{
    DeliverOptions, FlagOp, MailboxId, ModSeq, OpError, SpecialUse, Uid, UserStore,
};

fn deliver(store: &UserStore, mailbox: &str, subject: &str) -> Uid {
    store
        .deliver(
            mailbox,
            &mut &message(subject)[..],
            &DeliverOptions::default(),
        )
        .unwrap()
        .uid
}

fn mailbox(store: &UserStore, name: &str) -> (MailboxId, MailboxRecord) {
    store
        .index()
        .read(|r| {
            let id = r.mailbox_id(name)?.expect("mailbox indexed");
            Ok((id, r.require_mailbox(id)?))
        })
        .unwrap()
}

fn states(store: &UserStore, name: &str) -> Vec<(Uid, MessageState)> {
    let (id, _) = mailbox(store, name);
    store.index().read(|r| r.states(id)).unwrap()
}

fn clean(store: &UserStore) {
    assert_eq!(store.check().unwrap(), vec![], "index and Maildir disagree");
}

fn files(dir: &std::path::Path, sub: &str) -> BTreeSet<String> {
    fs::read_dir(dir.join(sub))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

fn kw(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn store_renames_files_and_gives_each_change_a_new_modseq() {
    let s = Scratch::new();
    let store = s.open();
    let uids: Vec<Uid> = (0..3)
        .map(|i| deliver(&store, "INBOX", &format!("m{i}")))
        .collect();
    assert_eq!(files(&s.maildir, "new").len(), 3);
    let (_, before) = mailbox(&store, "INBOX");
    assert_eq!(before.counts.unseen, 3);

    let out = store
        .set_flags(
            "INBOX",
            &uids[..2],
            FlagOp::Add,
            Flags::SEEN,
            &kw(&["$Label1"]),
            None,
        )
        .unwrap();
    assert_eq!(out.messages.len(), 2);
    assert!(out
        .messages
        .iter()
        .all(|m| m.changed && m.flags == Flags::SEEN));
    assert_eq!(out.messages[0].keywords, kw(&["$Label1"]));
    // one new modseq per changed message, strictly increasing, HIGHESTMODSEQ follows
    assert!(out.messages[0].modseq > before.highest_modseq);
    assert_eq!(out.messages[1].modseq, out.messages[0].modseq.next());
    assert_eq!(out.highest_modseq, out.messages[1].modseq);
    // new/ -> cur/ with the :2, info, as Dovecot does
    assert_eq!(files(&s.maildir, "new").len(), 1);
    let cur = files(&s.maildir, "cur");
    assert_eq!(cur.len(), 2);
    assert!(cur.iter().all(|f| f.ends_with(":2,Sa")), "{cur:?}");
    assert_eq!(
        fs::read_to_string(s.maildir.join("dovecot-keywords")).unwrap(),
        "0 $Label1\n"
    );
    let (_, after) = mailbox(&store, "INBOX");
    assert_eq!(after.counts.unseen, 1);
    assert_eq!(after.highest_modseq, out.highest_modseq);
    assert_eq!(after.keywords, kw(&["$Label1"]));
    clean(&store);

    // the same STORE again changes nothing: no rename, no modseq
    let again = store
        .set_flags(
            "INBOX",
            &uids[..2],
            FlagOp::Add,
            Flags::SEEN,
            &kw(&["$label1"]),
            None,
        )
        .unwrap();
    assert!(again.messages.iter().all(|m| !m.changed));
    assert_eq!(again.messages[1].modseq, out.messages[1].modseq);
    assert_eq!(files(&s.maildir, "cur"), cur);
    assert_eq!(
        mailbox(&store, "INBOX").1.highest_modseq,
        after.highest_modseq
    );

    // UNCHANGEDSINCE (RFC 7162 §3.1.3): uid 1 changed after modseq m0, uid 3 did not
    let m0 = ModSeq(out.messages[0].modseq.get() - 1);
    let cond = store
        .set_flags(
            "INBOX",
            &[uids[0], uids[2], Uid(99)],
            FlagOp::Replace,
            Flags::FLAGGED,
            &[],
            Some(m0),
        )
        .unwrap();
    assert_eq!(cond.modified, vec![uids[0]]);
    assert_eq!(cond.vanished, vec![Uid(99)]);
    assert_eq!(cond.messages.len(), 1);
    assert_eq!(cond.messages[0].uid, uids[2]);
    assert_eq!(cond.messages[0].flags, Flags::FLAGGED);
    // Replace without keywords drops them; Remove takes flags away
    let rm = store
        .set_flags(
            "INBOX",
            &[uids[1]],
            FlagOp::Replace,
            Flags::SEEN | Flags::ANSWERED,
            &[],
            None,
        )
        .unwrap();
    assert!(rm.messages[0].keywords.is_empty());
    let rm = store
        .set_flags("INBOX", &[uids[1]], FlagOp::Remove, Flags::SEEN, &[], None)
        .unwrap();
    assert_eq!(rm.messages[0].flags, Flags::ANSWERED);
    assert!(files(&s.maildir, "cur").iter().any(|f| f.ends_with(":2,R")));
    assert_eq!(mailbox(&store, "INBOX").1.counts.unseen, 2);
    clean(&store);
}

#[test]
fn a_27th_keyword_is_refused_and_changes_nothing() {
    let s = Scratch::new();
    let store = s.open();
    let uid = deliver(&store, "INBOX", "k");
    let many: Vec<String> = (0..26).map(|i| format!("k{i}")).collect();
    store
        .set_flags("INBOX", &[uid], FlagOp::Add, Flags::EMPTY, &many, None)
        .unwrap();
    let before_files = files(&s.maildir, "cur");
    let before = mailbox(&store, "INBOX").1;
    let err = store
        .set_flags(
            "INBOX",
            &[uid],
            FlagOp::Add,
            Flags::SEEN,
            &kw(&["one-more"]),
            None,
        )
        .unwrap_err();
    assert!(
        matches!(err, OpError::KeywordLimit { ref keyword, .. } if keyword == "one-more"),
        "{err}"
    );
    assert_eq!(err.refusal(), Some(maildex_store::Refusal::Limit));
    assert_eq!(files(&s.maildir, "cur"), before_files);
    assert_eq!(mailbox(&store, "INBOX").1, before);
    // an existing keyword (any case) still works
    store
        .set_flags(
            "INBOX",
            &[uid],
            FlagOp::Remove,
            Flags::EMPTY,
            &kw(&["K3"]),
            None,
        )
        .unwrap();
    clean(&store);
}

/// Another tool (mutt, Dovecot) renames a file between our index read and our rename: the
/// STORE follows the file by its base and applies the change to the flags it has now.
#[test]
fn store_follows_a_file_renamed_by_another_tool() {
    let s = Scratch::new();
    let store = s.open();
    let a = deliver(&store, "INBOX", "a");
    let b = deliver(&store, "INBOX", "b");
    let st = states(&store, "INBOX");
    let name_a = &st[0].1.file_name;
    // mutt flags a (new/ -> cur/ with F) and deletes b, behind the store's back
    fs::rename(
        s.maildir.join("new").join(name_a),
        s.maildir.join("cur").join(format!("{name_a}:2,F")),
    )
    .unwrap();
    fs::remove_file(s.maildir.join("new").join(&st[1].1.file_name)).unwrap();
    let out = store
        .set_flags("INBOX", &[a, b], FlagOp::Add, Flags::SEEN, &[], None)
        .unwrap();
    assert_eq!(out.vanished, vec![b]);
    assert_eq!(out.messages.len(), 1);
    assert_eq!(out.messages[0].flags, Flags::SEEN | Flags::FLAGGED);
    assert_eq!(
        files(&s.maildir, "cur"),
        BTreeSet::from([format!("{name_a}:2,FS")])
    );
    let now = states(&store, "INBOX");
    assert_eq!(now[0].1.flags, flag::SEEN | flag::FLAGGED);
    // b's record goes with the next sync that sees a complete listing
    store.sync_mailbox("INBOX").unwrap();
    for sub in ["new", "cur"] {
        let past = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        fs::File::open(s.maildir.join(sub))
            .unwrap()
            .set_modified(past)
            .unwrap();
    }
    store.sync_mailbox("INBOX").unwrap();
    clean(&store);
}

#[test]
fn expunge_removes_deleted_files_records_and_counts_but_keeps_uids() {
    let s = Scratch::new();
    let store = s.open();
    let uids: Vec<Uid> = (0..4)
        .map(|i| deliver(&store, "INBOX", &format!("e{i}")))
        .collect();
    store
        .set_flags(
            "INBOX",
            &[uids[0], uids[1], uids[3]],
            FlagOp::Add,
            Flags::DELETED,
            &[],
            None,
        )
        .unwrap();
    assert_eq!(mailbox(&store, "INBOX").1.counts.deleted, 3);
    let next_before = Uidlist::read(&s.maildir).unwrap().unwrap().next_uid;
    let hm = mailbox(&store, "INBOX").1.highest_modseq;

    // UID EXPUNGE (RFC 4315 §2.1): only the given UIDs that have \Deleted
    let gone = store.expunge("INBOX", Some(&[uids[1], uids[2]])).unwrap();
    assert_eq!(gone, vec![uids[1]]);
    let (_, m) = mailbox(&store, "INBOX");
    assert_eq!((m.counts.messages, m.counts.deleted), (3, 2));
    assert!(m.highest_modseq > hm);
    clean(&store);

    // another tool undeletes uid 4 (renames without T) before our EXPUNGE: it stays
    let st = states(&store, "INBOX");
    let four = &st.iter().find(|(u, _)| *u == uids[3]).unwrap().1.file_name;
    fs::rename(
        s.maildir.join("cur").join(four),
        s.maildir.join("cur").join(four.replace(":2,T", ":2,")),
    )
    .unwrap();
    let gone = store.expunge("INBOX", None).unwrap();
    assert_eq!(gone, vec![uids[0]]);
    let left: Vec<Uid> = states(&store, "INBOX").iter().map(|(u, _)| *u).collect();
    assert_eq!(left, vec![uids[2], uids[3]]);
    assert_eq!(
        files(&s.maildir, "cur").len() + files(&s.maildir, "new").len(),
        2
    );
    store.sync_mailbox("INBOX").unwrap();
    clean(&store);
    // UIDs are never reused
    let list = Uidlist::read(&s.maildir).unwrap().unwrap();
    assert_eq!(list.next_uid, next_before);
    assert_eq!(deliver(&store, "INBOX", "after"), Uid(next_before));
}

#[test]
fn copy_links_files_and_clones_records_with_keywords_mapped() {
    let s = Scratch::new();
    let store = s.open();
    store.create_mailbox("Sent").unwrap();
    let dst = s.maildir.join(".Sent");
    // dst has its own keyword table: $Label1 will get another letter there
    fs::write(dst.join("dovecot-keywords"), "0 Other\n").unwrap();
    let a = deliver(&store, "INBOX", "ca");
    let b = deliver(&store, "INBOX", "cb");
    store
        .set_flags(
            "INBOX",
            &[b],
            FlagOp::Add,
            Flags::FLAGGED,
            &kw(&["$Label1"]),
            None,
        )
        .unwrap();
    let src_states = states(&store, "INBOX");
    let commits = store.index().commits();

    let out = store.copy("INBOX", "Sent", &[a, b, Uid(77)]).unwrap();
    assert_eq!(store.index().commits(), commits + 1, "one index commit");
    let (sent_id, sent) = mailbox(&store, "Sent");
    assert_eq!(out.uidvalidity, sent.uidvalidity);
    assert_eq!(out.pairs, vec![(a, Uid(1)), (b, Uid(2))]);
    assert_eq!(sent.counts.messages, 2);
    assert_eq!(
        sent.counts.recent, 2,
        "copies are \\Recent as deliveries are"
    );
    // a (in new/, no flags) stays in new/; b carries F and dst's letter for $Label1 (b)
    assert_eq!(files(&dst, "new").len(), 1);
    let cur = files(&dst, "cur");
    assert_eq!(cur.len(), 1);
    let copied = cur.iter().next().unwrap();
    assert!(copied.ends_with(":2,Fb"), "{copied}");
    assert_eq!(
        fs::read_to_string(dst.join("dovecot-keywords")).unwrap(),
        "0 Other\n1 $Label1\n"
    );
    // hard link: same inode, so same bytes and mtime (INTERNALDATE)
    let src_b = s.maildir.join("cur").join(&src_states[1].1.file_name);
    assert_eq!(
        fs::metadata(&src_b).unwrap().ino(),
        fs::metadata(dst.join("cur").join(copied)).unwrap().ino()
    );
    // records cloned: cached data and header blocks equal, INTERNALDATE kept
    let (src_id, _) = mailbox(&store, "INBOX");
    store
        .index()
        .read(|r| {
            for (su, du) in &out.pairs {
                assert_eq!(r.cached(src_id, *su)?, r.cached(sent_id, *du)?);
                assert_eq!(r.headers(src_id, *su)?, r.headers(sent_id, *du)?);
                let (ss, ds) = (
                    r.state(src_id, *su)?.unwrap(),
                    r.state(sent_id, *du)?.unwrap(),
                );
                assert_eq!(
                    (ss.internal_date, ss.size, ss.vsize, ss.flags),
                    (ds.internal_date, ds.size, ds.vsize, ds.flags)
                );
            }
            Ok(())
        })
        .unwrap();
    let st = states(&store, "Sent");
    assert_eq!(
        maildex_index::dump::keyword_names(st[1].1.keywords, &mailbox(&store, "Sent").1.keywords),
        kw(&["$Label1"])
    );
    let list = Uidlist::read(&dst).unwrap().unwrap();
    assert_eq!(
        list.records.iter().map(|r| r.uid).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(
        states(&store, "INBOX"),
        src_states,
        "the source is untouched"
    );
    clean(&store);
    // COPY into a missing mailbox is NONEXISTENT (the session answers TRYCREATE)
    assert!(matches!(
        store.copy("INBOX", "Nope", &[a]),
        Err(OpError::NoMailbox(_))
    ));
}

#[test]
fn move_renames_files_and_moves_records_in_one_commit() {
    let s = Scratch::new();
    let store = s.open();
    store.create_mailbox("Archive").unwrap();
    let uids: Vec<Uid> = (0..3)
        .map(|i| deliver(&store, "INBOX", &format!("mv{i}")))
        .collect();
    store
        .set_flags(
            "INBOX",
            &uids[1..2],
            FlagOp::Add,
            Flags::SEEN,
            &kw(&["work"]),
            None,
        )
        .unwrap();
    let src = states(&store, "INBOX");
    let mut inodes: Vec<u64> = src[..2]
        .iter()
        .map(|(_, st)| {
            let sub = if st.in_new { "new" } else { "cur" };
            fs::metadata(s.maildir.join(sub).join(&st.file_name))
                .unwrap()
                .ino()
        })
        .collect();
    let hm_src = mailbox(&store, "INBOX").1.highest_modseq;
    let commits = store.index().commits();
    let out = store.move_messages("INBOX", "Archive", &uids[..2]).unwrap();
    assert_eq!(store.index().commits(), commits + 1, "one index commit");
    assert_eq!(out.pairs, vec![(uids[0], Uid(1)), (uids[1], Uid(2))]);
    let arch = s.maildir.join(".Archive");
    // the files themselves (same inodes), under new base names, in Archive
    let mut moved: Vec<u64> = [("new", files(&arch, "new")), ("cur", files(&arch, "cur"))]
        .iter()
        .flat_map(|(sub, fs_)| {
            fs_.iter()
                .map(|f| fs::metadata(arch.join(sub).join(f)).unwrap().ino())
                .collect::<Vec<_>>()
        })
        .collect();
    moved.sort_unstable();
    inodes.sort_unstable();
    assert_eq!(moved, inodes, "rename, not copy");
    assert_eq!(
        files(&s.maildir, "new").len() + files(&s.maildir, "cur").len(),
        1
    );
    assert_eq!(
        states(&store, "INBOX")
            .iter()
            .map(|(u, _)| *u)
            .collect::<Vec<_>>(),
        vec![uids[2]]
    );
    let (_, inbox) = mailbox(&store, "INBOX");
    assert_eq!(inbox.counts.messages, 1);
    assert!(inbox.highest_modseq > hm_src);
    let (_, a) = mailbox(&store, "Archive");
    assert_eq!((a.counts.messages, a.counts.unseen), (2, 1));
    assert_eq!(a.keywords, kw(&["work"]));
    clean(&store);
    // a MOVE within one mailbox gives new UIDs and expunges the originals
    let again = store
        .move_messages("Archive", "archive", &[Uid(1)])
        .unwrap_err();
    assert!(
        matches!(again, OpError::NoMailbox(_)),
        "names are case-sensitive but INBOX"
    );
    let same = store
        .move_messages("Archive", "Archive", &[Uid(1)])
        .unwrap();
    assert_eq!(same.pairs, vec![(Uid(1), Uid(3))]);
    assert_eq!(
        states(&store, "Archive")
            .iter()
            .map(|(u, _)| *u)
            .collect::<Vec<_>>(),
        vec![Uid(2), Uid(3)]
    );
    clean(&store);
}

/// Regression (found by the model test): a message moved out of INBOX and back kept its base
/// name, INBOX's dovecot-uidlist still had a record of that base, and the message got its old
/// UID again: a UID reused after EXPUNGE.
#[test]
fn a_message_moved_out_and_back_gets_a_new_uid() {
    let s = Scratch::new();
    let store = s.open();
    store.create_mailbox("Other").unwrap();
    let uid = deliver(&store, "INBOX", "boomerang");
    let out = store.move_messages("INBOX", "Other", &[uid]).unwrap();
    let back = store
        .move_messages("Other", "INBOX", &[out.pairs[0].1])
        .unwrap();
    assert_eq!(back.pairs, vec![(Uid(1), Uid(2))]);
    let list = Uidlist::read(&s.maildir).unwrap().unwrap();
    assert_eq!(list.next_uid, 3);
    clean(&store);
}

#[test]
fn mailboxes_create_list_rename_delete_like_dovecot() {
    let s = Scratch::new();
    let store = s.open();
    store.sync_all().unwrap();
    store.create_mailbox("Projects.2026.").unwrap();
    store.create_mailbox("Sent Items").unwrap();
    assert!(s.maildir.join(".Projects.2026/maildirfolder").is_file());
    assert!(matches!(
        store.create_mailbox("Sent Items"),
        Err(OpError::MailboxExists(_))
    ));
    assert!(matches!(
        store.create_mailbox("inbox"),
        Err(OpError::MailboxExists(_))
    ));
    for bad in ["a..b", "../x", ".a", "a/b", "x\ty"] {
        let e = store.create_mailbox(bad).unwrap_err();
        assert_eq!(
            e.refusal(),
            Some(maildex_store::Refusal::Cannot),
            "{bad:?}: {e}"
        );
    }
    store.subscribe("Sent Items").unwrap();
    let list = store.list_mailboxes().unwrap();
    let view: Vec<(&str, bool, bool, Option<SpecialUse>, bool)> = list
        .iter()
        .map(|m| {
            (
                m.name.as_str(),
                m.selectable,
                m.has_children,
                m.special_use,
                m.subscribed,
            )
        })
        .collect();
    assert_eq!(
        view,
        vec![
            ("INBOX", true, false, None, false),
            ("Projects", false, true, None, false),
            ("Projects.2026", true, false, None, false),
            ("Sent Items", true, false, Some(SpecialUse::Sent), true),
        ]
    );
    assert!(mailbox(&store, "Projects.2026").1.uidvalidity > 0);
    clean(&store);

    // RENAME moves the children along, keeping UIDVALIDITY and messages
    store.create_mailbox("Projects").unwrap();
    deliver(&store, "Projects.2026", "p");
    let v = mailbox(&store, "Projects.2026").1.uidvalidity;
    assert!(matches!(
        store.rename_mailbox("Projects", "Projects.x"),
        Err(OpError::Cannot { .. })
    ));
    assert!(matches!(
        store.rename_mailbox("Projects", "Sent Items"),
        Err(OpError::MailboxExists(_))
    ));
    store.rename_mailbox("Projects", "Work").unwrap();
    assert!(s.maildir.join(".Work.2026/cur").is_dir() && !s.maildir.join(".Projects").exists());
    let (_, w) = mailbox(&store, "Work.2026");
    assert_eq!((w.uidvalidity, w.counts.messages), (v, 1));
    assert!(store
        .index()
        .read(|r| r.mailbox_id("Projects.2026"))
        .unwrap()
        .is_none());
    clean(&store);

    // DELETE of a mailbox with children removes just it (Dovecot's Maildir++ behaviour)
    store.delete_mailbox("Work").unwrap();
    let names: Vec<(String, bool)> = store
        .list_mailboxes()
        .unwrap()
        .into_iter()
        .map(|m| (m.name, m.selectable))
        .collect();
    assert!(
        names.contains(&("Work".into(), false)) && names.contains(&("Work.2026".into(), true)),
        "{names:?}"
    );
    assert!(matches!(
        store.delete_mailbox("Work"),
        Err(OpError::NoMailbox(_))
    ));
    assert!(matches!(
        store.delete_mailbox("inbox"),
        Err(OpError::Cannot { .. })
    ));
    store.delete_mailbox("Work.2026").unwrap();
    assert!(!s.maildir.join(".DOVECOT-TRASHED").exists());
    clean(&store);

    // RENAME INBOX: its messages move to the new mailbox, INBOX stays, empty
    let a = deliver(&store, "INBOX", "i1");
    deliver(&store, "INBOX", "i2");
    store
        .set_flags("INBOX", &[a], FlagOp::Add, Flags::SEEN, &[], None)
        .unwrap();
    store.rename_mailbox("INBOX", "Old").unwrap();
    assert_eq!(mailbox(&store, "INBOX").1.counts.messages, 0);
    let (_, old) = mailbox(&store, "Old");
    assert_eq!((old.counts.messages, old.counts.unseen), (2, 1));
    assert!(files(&s.maildir, "cur").is_empty() && files(&s.maildir, "new").is_empty());
    clean(&store);
}

#[test]
fn create_never_makes_a_mailbox_through_a_symbolic_link() {
    let s = Scratch::new();
    let store = s.open();
    // a folder that is a link to a directory outside the Maildir (no cur/ there yet):
    // CREATE used to make tmp/ new/ cur/ out there
    let outside = s.dir.path().join("outside");
    fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, s.maildir.join(".Evil")).unwrap();
    assert!(matches!(
        store.create_mailbox("Evil"),
        Err(OpError::MailboxExists(_))
    ));
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
    // a half-made folder (no cur/ yet) is completed
    fs::create_dir_all(s.maildir.join(".Half/tmp")).unwrap();
    store.create_mailbox("Half").unwrap();
    assert!(matches!(
        store.create_mailbox("Half"),
        Err(OpError::MailboxExists(_))
    ));
    assert!(store.mailbox_exists("inbox").unwrap() && store.mailbox_exists("Half").unwrap());
    assert!(!store.mailbox_exists("Evil").unwrap() && !store.mailbox_exists("None").unwrap());
}

#[test]
fn subscriptions_are_dovecots_file() {
    let s = Scratch::new();
    let store = s.open();
    store.subscribe("Été").unwrap();
    store.subscribe("a.b").unwrap();
    store.subscribe("inbox").unwrap();
    store.subscribe("a.b").unwrap();
    assert_eq!(
        fs::read_to_string(s.maildir.join("subscriptions")).unwrap(),
        "V\t2\n\n&AMk-t&AOk-\na\tb\nINBOX\n"
    );
    store.unsubscribe("Été").unwrap();
    store.unsubscribe("never").unwrap();
    assert_eq!(store.subscriptions().unwrap(), kw(&["a.b", "INBOX"]));
    assert!(!s.maildir.join("subscriptions.lock").exists());
    // a version-1 file (older Dovecot, Courier) is read and kept in its version
    fs::write(s.maildir.join("subscriptions"), "Sent\nx.y\n").unwrap();
    store.subscribe("Z").unwrap();
    assert_eq!(
        fs::read_to_string(s.maildir.join("subscriptions")).unwrap(),
        "Sent\nx.y\nZ\n"
    );
    assert!(matches!(
        store.subscribe("../etc"),
        Err(OpError::BadName { .. })
    ));
}

/// IDLE: a receiver sees a commit another thread made.
#[test]
fn commit_generation_reaches_a_receiver_on_another_thread() {
    let s = Scratch::new();
    let store = std::sync::Arc::new(s.open());
    deliver(&store, "INBOX", "w");
    let mut rx = store.change_feed();
    let seen = *rx.borrow_and_update();
    assert!(!rx.has_changed().unwrap());
    let other = std::sync::Arc::clone(&store);
    std::thread::spawn(move || deliver(&other, "INBOX", "x"))
        .join()
        .unwrap();
    assert!(rx.has_changed().unwrap(), "the commit was not published");
    assert!(*rx.borrow_and_update() > seen);
    assert_eq!(*rx.borrow(), store.index().commits());
}

#[test]
fn reader_uids_and_changed_since() {
    let s = Scratch::new();
    let store = s.open();
    let uids: Vec<Uid> = (0..4)
        .map(|i| deliver(&store, "INBOX", &format!("r{i}")))
        .collect();
    let (id, m) = mailbox(&store, "INBOX");
    let out = store
        .set_flags("INBOX", &[uids[2]], FlagOp::Add, Flags::SEEN, &[], None)
        .unwrap();
    let (got, changed) = store
        .index()
        .read(|r| Ok((r.uids(id)?, r.changed_since(id, m.highest_modseq)?)))
        .unwrap();
    assert_eq!(got, uids);
    assert_eq!(
        changed
            .iter()
            .map(|(u, s)| (*u, s.modseq))
            .collect::<Vec<_>>(),
        vec![(uids[2], out.messages[0].modseq)]
    );
    assert!(
        !states(&store, "INBOX")[2].1.in_new,
        "STORE moved it to cur/"
    );
}

/// RFC 3501 §2.3.2: each new message is \Recent in exactly one session, however the claims
/// and deliveries interleave.
#[test]
fn each_new_message_is_recent_for_exactly_one_claim() {
    let s = Scratch::new();
    let store = std::sync::Arc::new(s.open());
    deliver(&store, "INBOX", "first");
    let (id, _) = mailbox(&store, "INBOX");
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let store = std::sync::Arc::clone(&store);
            std::thread::spawn(move || {
                let mut claimed = Vec::new();
                for i in 0..8 {
                    deliver(&store, "INBOX", &format!("t{t}-{i}"));
                    let r = store.index().write(move |w| w.claim_recent(id)).unwrap();
                    claimed.extend((r.start.get()..r.end.get()).map(Uid));
                }
                claimed
            })
        })
        .collect();
    let mut all: Vec<Uid> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let r = store.index().write(move |w| w.claim_recent(id)).unwrap();
    all.extend((r.start.get()..r.end.get()).map(Uid));
    all.sort_unstable();
    assert_eq!(
        all,
        (1..=33).map(Uid).collect::<Vec<Uid>>(),
        "a UID claimed twice or never"
    );
    assert_eq!(mailbox(&store, "INBOX").1.counts.recent, 0);
    clean(&store);
}

/// A tool keeps toggling `S` on every file (renames) while STOREs add `\Flagged`: no file
/// is lost or duplicated, every message ends with `\Flagged`, and after a sync the index
/// agrees with the files.
#[test]
fn store_races_a_tool_that_keeps_renaming_files() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let s = Scratch::new();
    let store = s.open();
    let uids: Vec<Uid> = (0..40)
        .map(|i| deliver(&store, "INBOX", &format!("r{i}")))
        .collect();
    store
        .set_flags("INBOX", &uids, FlagOp::Add, Flags::SEEN, &[], None)
        .unwrap();
    let bases: Vec<String> = states(&store, "INBOX")
        .iter()
        .map(|(_, st)| st.file_name.split(':').next().unwrap().to_string())
        .collect();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let cur = s.maildir.join("cur");
    let toggler = {
        let (stop, cur, bases) = (std::sync::Arc::clone(&stop), cur.clone(), bases.clone());
        std::thread::spawn(move || {
            let mut renames = 0u32;
            while !stop.load(Ordering::Relaxed) {
                for base in &bases {
                    let Ok(Some((_, name))) =
                        maildex_maildir::transfer::find_base(cur.parent().unwrap(), base)
                    else {
                        continue;
                    };
                    let mut parsed = maildex_maildir::MaildirName::parse(&name).unwrap();
                    if parsed.flags.contains(Flags::SEEN) {
                        parsed.flags.remove(Flags::SEEN);
                    } else {
                        parsed.flags.insert(Flags::SEEN);
                    }
                    let to = parsed.file_name();
                    if fs::rename(cur.join(&name), cur.join(&to)).is_ok() {
                        renames += 1;
                    }
                }
            }
            renames
        })
    };
    for _ in 0..5 {
        store
            .set_flags("INBOX", &uids, FlagOp::Add, Flags::FLAGGED, &[], None)
            .unwrap();
        store
            .set_flags("INBOX", &uids, FlagOp::Remove, Flags::FLAGGED, &[], None)
            .unwrap();
    }
    let last = store
        .set_flags("INBOX", &uids, FlagOp::Add, Flags::FLAGGED, &[], None)
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    let renames = toggler.join().unwrap();
    assert!(renames > 0, "the race was not exercised");
    assert!(last.vanished.is_empty(), "{:?}", last.vanished);
    let names = files(&s.maildir, "cur");
    assert_eq!(names.len(), 40, "a file was lost or duplicated: {names:?}");
    assert!(
        names
            .iter()
            .all(|n| n.split(":2,").nth(1).unwrap().contains('F')),
        "{names:?}"
    );
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    fs::File::open(&cur).unwrap().set_modified(past).unwrap();
    store.sync_mailbox("INBOX").unwrap();
    clean(&store);
}

mod dovecot;
mod model;
