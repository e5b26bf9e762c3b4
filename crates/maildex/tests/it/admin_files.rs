//! Issue 15 #1, #6, #10: the admin commands run from a root shell, as the README has the
//! admin run them, against a data folder owned by the mail user. Every command that touches
//! a user's files runs as the mail's owner and leaves only files of that user with the
//! modes docs/SECURITY.md promises; `index check` reads only and creates nothing, and a
//! folder never indexed yet is not drift.

use std::fs;
use std::path::{Path, PathBuf};

use crate::mail_user::{
    assert_mail_files, daemon_section, data_folder, is_root, maildex, text, write_config,
};

/// The config of these tests (IMAP on a port nobody listens to: no daemon runs), with
/// users alice and bob.
fn config(root: &Path, daemon: &str) -> PathBuf {
    fs::write(root.join("users"), "alice:{PLAIN}pw\nbob:{PLAIN}pw\n").unwrap();
    write_config(root, daemon, 1, "%n/Maildir", false)
}

const MESSAGE: &str = "From: a@example.org\nSubject: hi\n\nhello\n";

fn ok(config: &Path, args: &[&str], stdin: &str) -> String {
    let o = maildex(config, args, stdin);
    assert!(o.status.success(), "maildex {args:?}: {}", text(&o));
    text(&o)
}

#[test]
fn admin_commands_run_as_root_leave_only_files_of_the_mail_user() {
    if !is_root() {
        eprintln!("skipped: needs root to switch users (CI runs as root)");
        return;
    }
    let dir = data_folder();
    let config = config(dir.path(), &daemon_section());
    let mail = dir.path().join("mail");

    ok(&config, &["deliver", "-u", "alice"], MESSAGE);
    assert_mail_files(&mail, "deliver");
    // read-only: bob, who has no mail yet, gets no Maildir and no index
    let out = ok(&config, &["index", "check", "--all"], "");
    assert!(out.contains("bob: no Maildir yet"), "{out}");
    assert!(
        !mail.join("bob").exists(),
        "index check created a Maildir for bob"
    );
    assert_mail_files(&mail, "index check --all");
    ok(&config, &["index", "rebuild", "--all"], "");
    assert_mail_files(&mail, "index rebuild --all");
    ok(&config, &["index", "rebuild", "--all", "--with-text"], "");
    assert_mail_files(&mail, "index rebuild --all --with-text");
    ok(&config, &["index", "check", "--all"], "");
    assert_mail_files(&mail, "index check --all after the rebuild");
    ok(&config, &["index", "compact", "--all"], "");
    assert_mail_files(&mail, "index compact --all");
    ok(&config, &["index", "dump", "-u", "alice"], "");
    assert_mail_files(&mail, "index dump");
    // a second delivery after them all still works (nothing left that the user cannot write)
    ok(&config, &["deliver", "-u", "alice"], MESSAGE);
    assert_mail_files(&mail, "a second deliver");
}

#[test]
fn without_a_daemon_user_admin_commands_run_as_the_owner_of_the_mail_root() {
    if !is_root() {
        eprintln!("skipped: needs root to switch users (CI runs as root)");
        return;
    }
    let dir = data_folder();
    let config = config(dir.path(), "");
    let mail = dir.path().join("mail");
    ok(&config, &["index", "rebuild", "-u", "alice"], "");
    ok(&config, &["deliver", "-u", "alice"], MESSAGE);
    assert_mail_files(&mail, "rebuild and deliver");
}

#[test]
fn a_folder_never_indexed_is_reported_but_is_not_drift() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "");
    ok(&config, &["deliver", "-u", "alice"], MESSAGE);
    // a folder made by another tool (or never opened since it was made) is not in the index
    let folder = dir.path().join("mail/alice/Maildir/.Later");
    for sub in ["cur", "new", "tmp"] {
        fs::create_dir_all(folder.join(sub)).unwrap();
    }
    fs::write(folder.join("maildirfolder"), "").unwrap();
    let o = maildex(&config, &["index", "check", "-u", "alice"], "");
    let out = text(&o);
    assert!(o.status.success(), "exit {}: {out}", o.status);
    assert!(out.contains("alice: Later: not indexed yet"), "{out}");
    // a real difference still fails the check
    fs::remove_file(
        fs::read_dir(dir.path().join("mail/alice/Maildir/new"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path(),
    )
    .unwrap();
    let o = maildex(&config, &["index", "check", "-u", "alice"], "");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn index_compact_keeps_the_index_file_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "");
    ok(&config, &["deliver", "-u", "alice"], MESSAGE);
    let data = dir.path().join("mail/alice/Maildir/maildex-index/data.mdb");
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&data), 0o600);
    ok(&config, &["index", "compact", "-u", "alice"], "");
    assert_eq!(mode(&data), 0o600, "data.mdb after index compact");
}
