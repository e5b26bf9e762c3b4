//! A Maildir laid down by Dovecot's conventions keeps every UID, flag and keyword, and keeps
//! them again after the index is deleted and rebuilt.

use std::collections::BTreeMap;
use std::fs;

use crate::support::{make_folder, message, put_file, Scratch};
use maildex_index::flag;

const UIDVALIDITY: u32 = 1_700_000_000;

/// (mailbox, uid) -> (file name, flags, keyword names)
type Messages = BTreeMap<(String, u32), (String, u8, Vec<String>)>;

struct Laid {
    expected: Messages,
}

fn name(i: u32, size: usize, info: &str) -> String {
    format!(
        "17000000{i:02}.M{i}P4242.mail.example.org,S={size},W={}{info}",
        size + 7
    )
}

/// Lays down INBOX (UIDs with gaps, keywords, files in new/ and cur/, one file Dovecot has
/// not numbered yet) and a non-ASCII folder, as Dovecot 2.3 would have left them.
fn lay_down(s: &Scratch) -> Laid {
    let mut expected = BTreeMap::new();
    let inbox = s.folder("INBOX");
    make_folder(&inbox);
    fs::write(
        inbox.join("dovecot-keywords"),
        "0 $Label1\n1 Junk\n2 work\n",
    )
    .unwrap();
    let msgs: [(u32, &str, &str, u8, &[&str]); 5] = [
        (3, "cur", ":2,S", flag::SEEN, &[]),
        (
            7,
            "cur",
            ":2,FRSa",
            flag::SEEN | flag::FLAGGED | flag::ANSWERED,
            &["$Label1"],
        ),
        (50, "cur", ":2,STc", flag::SEEN | flag::DELETED, &["work"]),
        (51, "new", "", 0, &[]),
        (99, "cur", ":2,Dbc", flag::DRAFT, &["Junk", "work"]),
    ];
    let mut uidlist = format!("3 V{UIDVALIDITY} N120 G0c5e1a3b6f2d4e8a9b7c1d2e3f405162\n");
    for (i, (uid, sub, info, flags, kws)) in msgs.iter().enumerate() {
        let body = message(&format!("msg{uid}"));
        let file = name(i as u32, body.len(), info);
        put_file(&inbox, sub, &file, &body);
        // Dovecot writes some records with extension fields, e.g. W<vsize>
        let ext = if uid % 2 == 1 {
            format!(" W{}", body.len() + 7)
        } else {
            String::new()
        };
        let base = file.split(':').next().unwrap().to_string();
        uidlist.push_str(&format!("{uid}{ext} :{base}\n"));
        expected.insert(
            ("INBOX".to_string(), *uid),
            (file, *flags, kws.iter().map(|k| k.to_string()).collect()),
        );
    }
    fs::write(inbox.join("dovecot-uidlist"), uidlist).unwrap();
    // delivered after Dovecot last synced: not in the uidlist yet, so it gets N (120)
    let late = message("late");
    let late_name = name(9, late.len(), "");
    put_file(&inbox, "new", &late_name, &late);
    expected.insert(("INBOX".to_string(), 120), (late_name, 0, vec![]));

    // "Été" in modified UTF-7 on disk
    let folder = s.folder(".&AMk-t&AOk-");
    make_folder(&folder);
    fs::write(folder.join("maildirfolder"), "").unwrap();
    let body = message("summer");
    let file = name(20, body.len(), ":2,S");
    put_file(&folder, "cur", &file, &body);
    fs::write(
        folder.join("dovecot-uidlist"),
        format!("3 V{} N9\n8 :{}\n", UIDVALIDITY + 1, file),
    )
    .unwrap();
    expected.insert(("Été".to_string(), 8), (file, flag::SEEN, vec![]));
    Laid { expected }
}

fn observed(s: &Scratch) -> (Messages, BTreeMap<String, u32>) {
    let store = s.open();
    let report = store.sync_all().unwrap();
    assert!(
        report.unreadable.is_empty() && report.bad_names.is_empty(),
        "{report:?}"
    );
    let mut msgs = BTreeMap::new();
    let mut validity = BTreeMap::new();
    store
        .index()
        .read(|r| {
            for (id, m) in r.mailboxes()? {
                validity.insert(m.name.clone(), m.uidvalidity);
                for (uid, rec) in r.messages(id)? {
                    let kws = maildex_index::dump::keyword_names(rec.state.keywords, &m.keywords);
                    msgs.insert(
                        (m.name.clone(), uid.get()),
                        (rec.state.file_name.clone(), rec.state.flags, kws),
                    );
                }
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(store.check().unwrap(), vec![], "index check after sync");
    (msgs, validity)
}

#[test]
fn every_uid_flag_and_keyword_is_kept() {
    let s = Scratch::new();
    let laid = lay_down(&s);
    let (msgs, validity) = observed(&s);
    assert_eq!(msgs, laid.expected);
    assert_eq!(validity.get("INBOX"), Some(&UIDVALIDITY));
    assert_eq!(validity.get("Été"), Some(&(UIDVALIDITY + 1)));

    // the uidlist now also numbers the late file, in Dovecot's format, for Dovecot to read
    let text = fs::read_to_string(s.folder("INBOX").join("dovecot-uidlist")).unwrap();
    assert!(text.starts_with(&format!("3 V{UIDVALIDITY} ")), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("120 ") && l.contains(":1700000009.")),
        "{text}"
    );

    // next UID continues after the uidlist's N
    let store = s.open();
    let d = store
        .deliver("INBOX", &mut &message("after")[..], &Default::default())
        .unwrap();
    assert_eq!((d.uid.get(), d.uidvalidity), (121, UIDVALIDITY));
}

#[test]
fn deleting_the_index_and_rebuilding_keeps_every_uid() {
    let s = Scratch::new();
    let laid = lay_down(&s);
    let (first, _) = observed(&s);
    assert_eq!(first, laid.expected);
    fs::remove_dir_all(&s.index).unwrap();
    let (second, _) = observed(&s);
    assert_eq!(second, laid.expected);

    // and `rebuild` on an existing index keeps them too, and keeps modseqs moving forward
    let store = s.open();
    let before = store
        .index()
        .read(|r| {
            Ok(r.require_mailbox(r.mailbox_id("INBOX")?.unwrap())?
                .highest_modseq)
        })
        .unwrap();
    let report = store.rebuild(&mut |_| {}).unwrap();
    assert_eq!(report.sync.added, laid.expected.len());
    let after = store
        .index()
        .read(|r| {
            Ok(r.require_mailbox(r.mailbox_id("INBOX")?.unwrap())?
                .highest_modseq)
        })
        .unwrap();
    assert!(after > before, "modseq {before} -> {after}");
    drop(store);
    let (third, _) = observed(&s);
    assert_eq!(third, laid.expected);
}

/// Overwrites the schema version stored in an index env, as an older maildex left it.
fn set_schema_version(index: &std::path::Path, version: u32) {
    let env = unsafe {
        heed::EnvOpenOptions::new()
            .max_dbs(16)
            .map_size(4 << 20)
            .open(index)
            .unwrap()
    };
    let wtxn = env.write_txn().unwrap();
    let meta: heed::Database<heed::types::Str, heed::types::Bytes> = env
        .create_databases_and_commit(wtxn, |dbo, wtxn| {
            dbo.create_database(wtxn, Some("meta"))
                .map(heed::CommitOrAbort::<_, ()>::Commit)
        })
        .unwrap()
        .unwrap_commit();
    let mut wtxn = env.write_txn().unwrap();
    meta.put(&mut wtxn, "schema-version", &version.to_be_bytes())
        .unwrap();
    wtxn.commit().unwrap();
    env.prepare_for_closing().wait();
}

#[test]
fn an_index_of_an_older_schema_is_replaced_on_open_keeping_every_uid() {
    let s = Scratch::new();
    let laid = lay_down(&s);
    let (first, _) = observed(&s);
    assert_eq!(first, laid.expected);
    set_schema_version(&s.index, 1);
    // the plain open refuses it (what `index dump` and `check` do)...
    match maildex_store::UserStore::open(&s.maildir, &s.index, Scratch::options()) {
        Err(maildex_store::StoreError::Index(maildex_index::IndexError::SchemaMismatch {
            found: 1,
            ..
        })) => {}
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("opened an index of another schema"),
    }
    // ...the serving open replaces it, the next sync fills it, UIDs and flags unchanged
    let store =
        maildex_store::UserStore::open_upgrading(&s.maildir, &s.index, Scratch::options()).unwrap();
    drop(store);
    let (again, _) = observed(&s);
    assert_eq!(again, laid.expected);
    let leftovers: Vec<_> = fs::read_dir(s.index.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("broken"))
        .collect();
    assert!(leftovers.is_empty(), "old index left behind: {leftovers:?}");
}

#[test]
fn a_lost_uidlist_is_recreated_from_the_index() {
    let s = Scratch::new();
    let laid = lay_down(&s);
    observed(&s);
    fs::remove_file(s.folder("INBOX").join("dovecot-uidlist")).unwrap();
    let (msgs, validity) = observed(&s);
    assert_eq!(msgs, laid.expected);
    assert_eq!(validity.get("INBOX"), Some(&UIDVALIDITY));
}

#[test]
fn courier_uids_are_imported() {
    let s = Scratch::new();
    let inbox = s.folder("INBOX");
    make_folder(&inbox);
    let a = message("a");
    let b = message("b");
    put_file(&inbox, "cur", "1100000000.1234_0.host:2,S", &a);
    put_file(&inbox, "cur", "1100000001.1234_1.host:2,", &b);
    fs::write(
        inbox.join("courierimapuiddb"),
        "1 1100000000 40\n17 1100000000.1234_0.host\n33 1100000001.1234_1.host\n",
    )
    .unwrap();
    let (msgs, validity) = observed(&s);
    let uids: Vec<u32> = msgs.keys().map(|(_, u)| *u).collect();
    assert_eq!(uids, vec![17, 33]);
    assert_eq!(validity.get("INBOX"), Some(&1_100_000_000));
    let d = s
        .open()
        .deliver("INBOX", &mut &message("c")[..], &Default::default())
        .unwrap();
    assert_eq!(d.uid.get(), 40);
}
