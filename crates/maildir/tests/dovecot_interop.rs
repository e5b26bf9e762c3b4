//! Interoperability with a real Dovecot (2.3): maildex writes a Maildir, `doveadm`
//! reads it and must see the same UIDs, flags, keywords and folders; then Dovecot
//! changes it and maildex must read Dovecot's uidlist and keywords back.
//!
//! Needs `doveadm` (Debian package `dovecot-core`), so it is ignored by default:
//! `cargo test -p maildex-maildir --test dovecot_interop -- --ignored`.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use maildex_dovecot_harness::{Options, User};
use maildex_maildir::deliver::rename_flags;
use maildex_maildir::folder::{create_mailbox, folder_path, list_folders};
use maildex_maildir::scan::scan;
use maildex_maildir::{Flags, KeywordMap, Keywords, Sub, TmpFile, UidRecord, Uidlist, UidlistLock};

/// A private Dovecot (maildex-dovecot-harness) with one user, `t`, whose mail is `maildir`
/// (handed to uid 65534 when we run as root: Dovecot refuses uid 0).
struct Dovecot {
    dv: maildex_dovecot_harness::Dovecot,
    maildir: PathBuf,
}

impl Dovecot {
    fn new(base: &Path, maildir: &Path) -> Dovecot {
        let opts = Options {
            mail_location: format!("maildir:{}", maildir.display()),
            users: vec![User::new("t", "pw")],
            mail_root: Some(maildir.to_path_buf()),
            ..Options::default()
        };
        let dv = maildex_dovecot_harness::Dovecot::start(&base.join("dovecot"), opts)
            .unwrap_or_else(|e| panic!("{e}"));
        Dovecot {
            dv,
            maildir: maildir.to_path_buf(),
        }
    }

    /// Runs doveadm; what we wrote since the last run is handed to Dovecot's user first.
    fn run(&self, args: &[&str], stdin: Option<&[u8]>) -> String {
        self.dv.chown_mail(&self.maildir).unwrap();
        self.dv
            .doveadm_with_input(args, stdin.unwrap_or_default())
            .unwrap_or_else(|e| panic!("doveadm {args:?}: {e}"))
    }
}

fn deliver(mailbox: &Path, body: &str, sub: Sub, flags: Flags, kw: Keywords) -> String {
    let mut t = TmpFile::create(mailbox).unwrap();
    t.write_all(body.as_bytes()).unwrap();
    t.commit(sub, flags, kw).unwrap().file_name
}

#[test]
#[ignore = "needs doveadm (apt-get install dovecot-core)"]
fn dovecot_reads_ours_and_we_read_dovecots() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("Maildir");
    fs::create_dir(&root).unwrap();
    create_mailbox(&root, false).unwrap();
    let sub = folder_path(&root, "Entwürfe.2024").unwrap();
    create_mailbox(&sub, true).unwrap();

    // Three messages in INBOX with UIDs 5, 6, 7 and a keyword.
    let mut kw = KeywordMap::new();
    let junk = kw.get_or_add("$Junk").unwrap();
    let msg = "From: a@example.org\nSubject: t\n\nhello\n";
    let f1 = deliver(&root, msg, Sub::New, Flags::EMPTY, Keywords::EMPTY);
    let f2 = deliver(&root, msg, Sub::Cur, Flags::SEEN, Keywords::EMPTY);
    let mut k = Keywords::EMPTY;
    k.insert(junk - b'a');
    let f3 = deliver(&root, msg, Sub::Cur, Flags::FLAGGED, k);
    let mut lock = UidlistLock::acquire(&root, Duration::from_secs(5)).unwrap();
    kw.write(&root).unwrap();
    let mut list = Uidlist::new(12345);
    list.records = vec![
        UidRecord::new(5, f1.clone()),
        UidRecord::new(6, f2.clone()),
        UidRecord::new(7, f3.clone()),
    ];
    list.next_uid = 8;
    lock.write(&list).unwrap();
    drop(lock);

    let dv = Dovecot::new(tmp.path(), &root);
    let status = dv.run(
        &[
            "-f",
            "flow",
            "mailbox",
            "status",
            "-u",
            "t",
            "uidvalidity uidnext messages",
            "INBOX",
        ],
        None,
    );
    assert!(status.contains("uidvalidity=12345"), "{status}");
    assert!(status.contains("uidnext=8"), "{status}");
    assert!(status.contains("messages=3"), "{status}");
    let fetched = dv.run(
        &[
            "-f",
            "flow",
            "fetch",
            "-u",
            "t",
            "uid flags",
            "mailbox",
            "INBOX",
            "all",
        ],
        None,
    );
    let lines: Vec<&str> = fetched.lines().collect();
    assert_eq!(lines.len(), 3, "{fetched}");
    assert!(lines[0].starts_with("uid=5 "), "{fetched}");
    assert!(
        lines[1].starts_with("uid=6 ") && lines[1].contains("\\Seen"),
        "{fetched}"
    );
    assert!(
        lines[2].starts_with("uid=7 ") && lines[2].contains("\\Flagged"),
        "{fetched}"
    );
    assert!(lines[2].contains("$Junk"), "{fetched}");
    let boxes = dv.run(&["mailbox", "list", "-u", "t"], None);
    assert!(boxes.lines().any(|l| l == "Entwürfe.2024"), "{boxes}");
    assert!(boxes.lines().any(|l| l == "INBOX"), "{boxes}");

    // Dovecot changes things: a new keyword on UID 6, a new message.
    dv.run(
        &[
            "flags", "add", "-u", "t", "$Label7", "mailbox", "INBOX", "uid", "6",
        ],
        None,
    );
    dv.run(&["save", "-u", "t", "-m", "INBOX"], Some(msg.as_bytes()));
    // And creates a folder itself.
    dv.run(&["mailbox", "create", "-u", "t", "Tom & Jerry"], None);

    let list = Uidlist::read(&root).unwrap().unwrap();
    assert_eq!(list.uidvalidity, 12345);
    assert_eq!(list.next_uid, 9);
    let uids: Vec<u32> = list.records.iter().map(|r| r.uid).collect();
    assert_eq!(uids, vec![5, 6, 7, 8]);
    let kw = KeywordMap::read(&root).unwrap();
    let l7 = kw.letter_of("$Label7").expect("Dovecot added $Label7");
    assert_eq!(kw.letter_of("$Junk"), Some(junk));
    let s = scan(&root).unwrap();
    assert!(s.bad_names.is_empty());
    let m6 = s
        .entries
        .iter()
        .find(|e| e.name.base == list.records[1].base())
        .unwrap();
    assert!(m6.name.keywords.contains(l7 - b'a'), "{:?}", m6.name);
    assert!(m6.name.flags.contains(Flags::SEEN));
    let m8 = s
        .entries
        .iter()
        .find(|e| e.name.base == list.records[3].base());
    assert!(m8.is_some(), "Dovecot's new message is found by base");
    let names: Vec<String> = list_folders(&root)
        .unwrap()
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(names, vec!["INBOX", "Entwürfe.2024", "Tom & Jerry"]);

    // We rename flags; Dovecot sees them.
    rename_flags(
        &root,
        Sub::Cur,
        &m6.file_name,
        Flags::SEEN | Flags::ANSWERED,
        Keywords::EMPTY,
    )
    .unwrap();
    let fetched = dv.run(
        &[
            "-f",
            "flow",
            "fetch",
            "-u",
            "t",
            "uid flags",
            "mailbox",
            "INBOX",
            "uid",
            "6",
        ],
        None,
    );
    assert!(
        fetched.contains("\\Answered") && !fetched.contains("$Label7"),
        "{fetched}"
    );

    // We append under the lock while Dovecot is idle; Dovecot sees the new UID.
    let f9 = deliver(&root, msg, Sub::New, Flags::EMPTY, Keywords::EMPTY);
    let mut lock = UidlistLock::acquire(&root, Duration::from_secs(5)).unwrap();
    lock.append(&[UidRecord::new(9, f9)], 10).unwrap();
    drop(lock);
    let fetched = dv.run(
        &[
            "-f", "flow", "fetch", "-u", "t", "uid", "mailbox", "INBOX", "all",
        ],
        None,
    );
    assert!(fetched.lines().any(|l| l.trim() == "uid=9"), "{fetched}");

    // Dovecot found nothing to complain about (broken uidlist, duplicate files...).
    let log = fs::read_to_string(tmp.path().join("dovecot.log")).unwrap_or_default();
    for bad in ["Error", "Warning", "Panic", "Fatal", "Broken", "corrupt"] {
        assert!(!log.contains(bad), "dovecot.log has {bad}:\n{log}");
    }
    eprintln!(
        "final fetch:\n{fetched}\nuidlist:\n{}",
        fs::read_to_string(root.join("dovecot-uidlist")).unwrap()
    );
}
