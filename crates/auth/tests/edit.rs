//! Editing the users file: round trips that keep every other byte, errors, modes.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use maildex_auth::{
    add_user, remove_user, set_password, verify, AuthError, PasswordHash, UsersFile,
};

fn plain(p: &str) -> PasswordHash {
    PasswordHash::parse(&format!("{{PLAIN}}{p}"))
}

fn read(path: &Path) -> String {
    String::from_utf8(std::fs::read(path).unwrap()).unwrap()
}

/// Odd but valid content: comments, blank lines, CRLF, extra fields, a Latin-1
/// gecos, and no newline at the end.
const ORIGINAL: &[u8] = b"# users\n\n\
alice:{PLAIN}a:1000:1000:Alice \xe9:/home/alice:/bin/false:userdb_mail=maildir:~/M\n\
\x20\x20# indented comment\n\
bob@example.org:{SHA512-CRYPT}$6$x$y\r\n\
carol:{PLAIN}c";

fn setup() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users");
    std::fs::write(&path, ORIGINAL).unwrap();
    (dir, path)
}

#[test]
fn add_appends_and_keeps_everything_else() {
    let (_d, path) = setup();
    add_user(&path, "dave@example.net", &plain("d")).unwrap();
    let mut expected = ORIGINAL.to_vec();
    expected.extend_from_slice(b"\ndave@example.net:{PLAIN}d\n");
    assert_eq!(std::fs::read(&path).unwrap(), expected);
    let f = UsersFile::load(&path).unwrap();
    assert_eq!(f.lookup("dave@example.net").unwrap().password.data, "d");
}

#[test]
fn add_refuses_existing_names_case_insensitively() {
    let (_d, path) = setup();
    for name in ["alice", "ALICE", "Bob@Example.org"] {
        match add_user(&path, name, &plain("x")) {
            Err(AuthError::UserExists { name: n, .. }) => assert_eq!(n, name),
            other => panic!("{name}: {other:?}"),
        }
    }
    assert_eq!(std::fs::read(&path).unwrap(), ORIGINAL);
    // A bare entry does not block a full address with the same local part.
    add_user(&path, "alice@example.org", &plain("x")).unwrap();
}

#[test]
fn add_creates_missing_file_0600() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users");
    let h = maildex_auth::hash_password(b"pw").unwrap();
    add_user(&path, "new@example.org", &h).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let text = read(&path);
    assert!(
        text.starts_with("new@example.org:{ARGON2ID}$argon2id$"),
        "{text}"
    );
    assert!(text.ends_with('\n'));
    let f = UsersFile::load(&path).unwrap();
    assert!(verify(&f.lookup("new@example.org").unwrap().password, b"pw").unwrap());
    // Only the file and its lock remain: no temporary files left behind.
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["users", "users.lock"]);
}

#[test]
fn edits_keep_the_file_mode() {
    let (_d, path) = setup();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    add_user(&path, "x", &plain("x")).unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o640
    );
}

#[test]
fn set_password_changes_only_the_password_field() {
    let (_d, path) = setup();
    set_password(&path, "Alice", &plain("new")).unwrap();
    set_password(&path, "bob@example.org", &plain("b2")).unwrap();
    set_password(&path, "carol", &plain("c2")).unwrap();
    let expected: &[u8] = b"# users\n\n\
alice:{PLAIN}new:1000:1000:Alice \xe9:/home/alice:/bin/false:userdb_mail=maildir:~/M\n\
\x20\x20# indented comment\n\
bob@example.org:{PLAIN}b2\r\n\
carol:{PLAIN}c2";
    assert_eq!(std::fs::read(&path).unwrap(), expected);
}

#[test]
fn set_password_on_name_only_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users");
    std::fs::write(&path, "# x\nlonely\nother:{PLAIN}o\n").unwrap();
    set_password(&path, "lonely", &plain("p")).unwrap();
    assert_eq!(read(&path), "# x\nlonely:{PLAIN}p\nother:{PLAIN}o\n");
}

#[test]
fn set_password_and_remove_need_an_existing_user() {
    let (_d, path) = setup();
    assert!(matches!(
        set_password(&path, "zed", &plain("x")),
        Err(AuthError::NoSuchUser { .. })
    ));
    assert!(matches!(
        remove_user(&path, "zed"),
        Err(AuthError::NoSuchUser { .. })
    ));
    // "alice" is bare; "alice@example.org" is a different name for editing.
    assert!(matches!(
        remove_user(&path, "alice@example.org"),
        Err(AuthError::NoSuchUser { .. })
    ));
    assert_eq!(std::fs::read(&path).unwrap(), ORIGINAL);
    let missing = path.with_file_name("absent");
    assert!(matches!(
        set_password(&missing, "a", &plain("x")),
        Err(AuthError::NotFound(_))
    ));
    assert!(matches!(
        remove_user(&missing, "a"),
        Err(AuthError::NotFound(_))
    ));
    assert!(!missing.exists());
}

#[test]
fn remove_drops_just_that_line() {
    let (_d, path) = setup();
    remove_user(&path, "BOB@example.org").unwrap();
    let expected: &[u8] = b"# users\n\n\
alice:{PLAIN}a:1000:1000:Alice \xe9:/home/alice:/bin/false:userdb_mail=maildir:~/M\n\
\x20\x20# indented comment\n\
carol:{PLAIN}c";
    assert_eq!(std::fs::read(&path).unwrap(), expected);
    remove_user(&path, "carol").unwrap();
    remove_user(&path, "alice").unwrap();
    assert_eq!(read(&path), "# users\n\n  # indented comment\n");
}

#[test]
fn invalid_names_and_hashes_are_refused() {
    let (_d, path) = setup();
    for name in [
        "", "a:b", "a b", "a/b", "..", "x@y@z", ".x", "#x", "a\u{1}b",
    ] {
        assert!(
            matches!(
                add_user(&path, name, &plain("x")),
                Err(AuthError::InvalidName { .. })
            ),
            "{name:?}"
        );
    }
    assert!(matches!(
        add_user(&path, &"a".repeat(300), &plain("x")),
        Err(AuthError::InvalidName { .. })
    ));
    for bad in ["{PLAIN}a:b", "{PLAIN}a\nb", "{PLAIN}"] {
        assert!(
            matches!(
                add_user(&path, "ok", &PasswordHash::parse(bad)),
                Err(AuthError::InvalidHash(_))
            ),
            "{bad:?}"
        );
    }
    assert_eq!(std::fs::read(&path).unwrap(), ORIGINAL);
}

#[test]
fn a_broken_file_is_not_edited() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users");
    std::fs::write(&path, "a:{PLAIN}x\nbad line\n").unwrap();
    assert!(matches!(
        add_user(&path, "b", &plain("y")),
        Err(AuthError::Parse { line: 2, .. })
    ));
    assert_eq!(read(&path), "a:{PLAIN}x\nbad line\n");
}

#[test]
fn concurrent_adds_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users");
    std::thread::scope(|s| {
        for t in 0..4 {
            let path = &path;
            s.spawn(move || {
                for i in 0..10 {
                    add_user(path, &format!("u{t}-{i}"), &plain("x")).unwrap();
                }
            });
        }
    });
    let f = UsersFile::load(&path).unwrap();
    assert_eq!(f.len(), 40);
}

#[test]
fn readers_always_see_a_whole_file() {
    // While one thread rewrites the file, readers must parse every version.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users");
    add_user(&path, "base", &plain("x")).unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..30 {
                add_user(&path, &format!("user{i}"), &plain(&"p".repeat(200))).unwrap();
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let mut reads = 0;
        while !done.load(std::sync::atomic::Ordering::SeqCst) || reads == 0 {
            let f = UsersFile::load(&path).unwrap();
            assert!(f.lookup("base").is_some());
            reads += 1;
        }
    });
}

#[test]
fn an_edit_waits_for_the_lock() {
    use std::os::fd::AsRawFd;
    let (_d, path) = setup();
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path.with_file_name("users.lock"))
        .unwrap();
    // SAFETY: plain flock(2) on a descriptor `lock` keeps open.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    std::thread::scope(|s| {
        let editor = s.spawn(|| add_user(&path, "late", &plain("x")));
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(
            std::fs::read(&path).unwrap(),
            ORIGINAL,
            "edited while locked"
        );
        drop(lock);
        editor.join().unwrap().unwrap();
    });
    assert!(UsersFile::load(&path).unwrap().lookup("late").is_some());
}

#[test]
fn a_symlinked_file_stays_a_symlink() {
    let (dir, real) = setup();
    let link = dir.path().join("users-link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    add_user(&link, "via-link", &plain("x")).unwrap();
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(UsersFile::load(&real).unwrap().lookup("via-link").is_some());
}
