//! A real Dovecot 2.3 reads what the operations leave: flags and keywords after STORE,
//! UIDs after COPY/MOVE/EXPUNGE, folders after CREATE/RENAME, the subscriptions file.
//! Needs `dovecot` and `doveadm` (Debian `dovecot-core`) and root (the Maildir is handed
//! to uid 65534, since Dovecot refuses uid 0), so it is ignored by default:
//! `cargo test -p maildex-store --test it store_ops -- --ignored`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::Scratch;
use maildex_maildir::Flags;
use maildex_store::FlagOp;

use super::{deliver, kw};

struct Dovecot {
    conf: PathBuf,
    base: PathBuf,
}

impl Drop for Dovecot {
    fn drop(&mut self) {
        let _ = Command::new("doveadm")
            .arg("-c")
            .arg(&self.conf)
            .arg("stop")
            .status();
    }
}

impl Dovecot {
    fn start(base: &Path, maildir: &Path) -> Dovecot {
        for d in ["run", "state", "home"] {
            fs::create_dir_all(base.join(d)).unwrap();
        }
        let conf = base.join("dovecot.conf");
        fs::write(
            &conf,
            format!(
                "ssl = no\nprotocols =\nmail_location = maildir:{m}\n\
                 base_dir = {b}/run\nstate_dir = {b}/state\nlog_path = {b}/dovecot.log\n\
                 userdb {{\n  driver = static\n  args = uid=65534 gid=65534 home={b}/home\n}}\n\
                 passdb {{\n  driver = static\n  args = nopassword\n}}\n",
                m = maildir.display(),
                b = base.display()
            ),
        )
        .unwrap();
        let st = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(maildir)
            .arg(base.join("home"))
            .status()
            .unwrap();
        assert!(st.success());
        assert!(Command::new("dovecot")
            .arg("-c")
            .arg(&conf)
            .status()
            .expect("dovecot")
            .success());
        Dovecot {
            conf,
            base: base.to_path_buf(),
        }
    }

    fn doveadm(&self, args: &[&str]) -> String {
        let out = Command::new("doveadm")
            .arg("-c")
            .arg(&self.conf)
            .args(args)
            .output()
            .expect("doveadm");
        assert!(
            out.status.success(),
            "doveadm {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn fetch(&self, mailbox: &str) -> Vec<String> {
        self.doveadm(&[
            "-f",
            "flow",
            "fetch",
            "-u",
            "t",
            "uid flags",
            "mailbox",
            mailbox,
            "all",
        ])
        .lines()
        .map(str::to_string)
        .collect()
    }
}

#[test]
#[ignore = "needs dovecot-core and root"]
fn dovecot_reads_what_the_operations_leave() {
    let s = Scratch::new();
    let store = s.open();
    store.sync_all().unwrap();
    let uids: Vec<u32> = (0..4)
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

    let dv = Dovecot::start(s.dir.path(), &s.maildir);
    let inbox = dv.fetch("INBOX");
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
    let arch = dv.fetch("Archive");
    assert_eq!(arch.len(), 2, "{arch:?}");
    assert!(
        arch[0].starts_with("uid=1 ") && arch[0].contains("\\Seen") && arch[0].contains("$Label1"),
        "{arch:?}"
    );
    assert!(
        arch[1].starts_with("uid=2 ") && arch[1].contains("\\Flagged"),
        "{arch:?}"
    );
    let status = dv.doveadm(&[
        "-f",
        "flow",
        "mailbox",
        "status",
        "-u",
        "t",
        "uidnext messages",
        "INBOX",
    ]);
    assert!(
        status.contains("uidnext=5") && status.contains("messages=2"),
        "UIDs are not reused: {status}"
    );
    let boxes = dv.doveadm(&["mailbox", "list", "-u", "t"]);
    for b in ["INBOX", "Archive", "Archive.sub", "Été"] {
        assert!(boxes.lines().any(|l| l == b), "{b} not in {boxes}");
    }
    assert!(!boxes.lines().any(|l| l == "Arch"), "{boxes}");
    let subscribed = dv.doveadm(&["mailbox", "list", "-u", "t", "-s"]);
    let mut subs: Vec<&str> = subscribed.lines().collect();
    subs.sort_unstable();
    assert_eq!(subs, vec!["Archive", "Été"], "{subscribed}");
    // Dovecot changes flags on a copied message; we read it back
    dv.doveadm(&[
        "flags",
        "add",
        "-u",
        "t",
        "\\Answered",
        "mailbox",
        "Archive",
        "uid",
        "1",
    ]);
    let log = fs::read_to_string(dv.base.join("dovecot.log")).unwrap_or_default();
    for bad in ["Error", "Warning", "Panic", "Fatal", "Broken", "corrupt"] {
        assert!(!log.contains(bad), "dovecot.log has {bad}:\n{log}");
    }
    let store = s.open();
    store.sync_mailbox("Archive").unwrap();
    let st = super::states(&store, "Archive");
    assert_ne!(st[0].1.flags & maildex_index::flag::ANSWERED, 0);
    assert_eq!(store.check().unwrap(), vec![]);
}
