//! Loading, parsing and lookup rules of the users file.

use std::path::{Path, PathBuf};

use maildex_auth::{AuthError, UsersFile};

fn parse(text: &str) -> Result<UsersFile, AuthError> {
    UsersFile::parse(Path::new("/etc/maildex/users"), text.as_bytes())
}

fn parse_err_line(text: &str) -> (usize, String) {
    match parse(text) {
        Err(AuthError::Parse { path, line, reason }) => {
            assert_eq!(path, PathBuf::from("/etc/maildex/users"));
            (line, reason)
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
}

const SAMPLE: &str = "\
# maildex users
alice@example.org:{PLAIN}full-address

alice:{PLAIN}bare-entry
bob:{SHA512-CRYPT}$6$x$y:1000:1000:Bob B.:/home/bob:/bin/false:userdb_quota_rule=*:storage=1G  allow_nets=10.0.0.0/8
Carol@Example.ORG:{ARGON2ID}$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2g
dave:{CRYPT}$2y$05$abc::::::
";

#[test]
fn fields_are_parsed_like_dovecot() {
    let f = parse(SAMPLE).unwrap();
    assert_eq!(f.len(), 5);
    let bob = f.lookup("bob").unwrap();
    assert_eq!(bob.password.scheme, "SHA512-CRYPT");
    assert_eq!(bob.password.data, "$6$x$y");
    assert_eq!((bob.uid, bob.gid), (Some(1000), Some(1000)));
    assert_eq!(bob.home.as_deref(), Some(Path::new("/home/bob")));
    // Everything after the shell field, re-joined on ':' and split on spaces.
    assert_eq!(
        bob.extra,
        vec!["userdb_quota_rule=*:storage=1G", "allow_nets=10.0.0.0/8"]
    );
    assert_eq!(bob.line, 5);
    let dave = f.lookup("dave").unwrap();
    assert_eq!((dave.uid, dave.gid, dave.home.as_ref()), (None, None, None));
    assert!(dave.extra.is_empty());
    let names: Vec<_> = f.list().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "alice@example.org",
            "alice",
            "bob",
            "Carol@Example.ORG",
            "dave"
        ]
    );
}

#[test]
fn old_format_mail_field() {
    // Dovecot: an empty 8th field followed by more means the old "mail" field.
    let f = parse("u:{PLAIN}p:1:1::/home/u:/bin/sh::maildir:~/Maildir:LAYOUT=fs\n").unwrap();
    assert_eq!(
        f.lookup("u").unwrap().extra,
        vec!["userdb_mail=maildir:~/Maildir:LAYOUT=fs"]
    );
}

#[test]
fn name_only_line_has_no_password() {
    let f = parse("nopass\n").unwrap();
    let e = f.lookup("nopass").unwrap();
    assert!(e.password.data.is_empty());
    assert!(!maildex_auth::verify(&e.password, b"").unwrap());
}

#[test]
fn crlf_and_missing_final_newline() {
    let f = parse("a:{PLAIN}x\r\nb:{PLAIN}y").unwrap();
    assert_eq!(f.lookup("a").unwrap().password.data, "x");
    assert_eq!(f.lookup("b").unwrap().password.data, "y");
}

#[test]
fn full_address_wins_over_bare() {
    let f = parse(SAMPLE).unwrap();
    assert_eq!(
        f.lookup("alice@example.org").unwrap().password.data,
        "full-address"
    );
    // Case-insensitive, both in the entry and in the login.
    assert_eq!(
        f.lookup("ALICE@Example.Org").unwrap().password.data,
        "full-address"
    );
    // Same local part, other domain: the bare entry.
    assert_eq!(
        f.lookup("alice@other.net").unwrap().password.data,
        "bare-entry"
    );
    assert_eq!(f.lookup("Alice@Other.NET").unwrap().name, "alice");
}

#[test]
fn bare_entry_matches_any_domain() {
    let f = parse(SAMPLE).unwrap();
    assert_eq!(f.lookup("bob@example.org").unwrap().name, "bob");
    assert_eq!(f.lookup("bob@anything.invalid").unwrap().name, "bob");
    assert_eq!(f.lookup("BOB").unwrap().name, "bob");
}

#[test]
fn bare_login_matches_bare_entries_only() {
    let f = parse(SAMPLE).unwrap();
    assert!(
        f.lookup("carol").is_none(),
        "carol only exists as a full address"
    );
    assert_eq!(
        f.lookup("carol@example.org").unwrap().name,
        "Carol@Example.ORG"
    );
    assert!(f.lookup("carol@example.net").is_none());
    assert_eq!(f.lookup("alice").unwrap().password.data, "bare-entry");
}

#[test]
fn odd_logins_match_nothing() {
    let f = parse(SAMPLE).unwrap();
    for login in [
        "",
        "@example.org",
        "alice@",
        "alice@example.org@x",
        "bob@@x",
        "alice ",
        "nobody",
    ] {
        assert!(f.lookup(login).is_none(), "{login:?}");
    }
}

#[test]
fn comments_and_blank_lines_are_skipped() {
    let f = parse("# c\n\n   \n  # indented comment\n\t\nx:{PLAIN}y\n").unwrap();
    assert_eq!(f.len(), 1);
    assert_eq!(f.lookup("x").unwrap().line, 6);
}

#[test]
fn bad_lines_name_their_line() {
    let (line, reason) = parse_err_line("ok:{PLAIN}a\n# fine\nbad name:{PLAIN}b\n");
    assert_eq!(line, 3);
    assert!(reason.contains("whitespace"), "{reason}");

    let (line, reason) = parse_err_line("a:{PLAIN}x\n:{PLAIN}nouser\n");
    assert_eq!(line, 2);
    assert!(reason.contains("empty"), "{reason}");

    let (line, reason) = parse_err_line("\n\nu:{PLAIN}x:vmail:vmail\n");
    assert_eq!(line, 3);
    assert!(reason.contains("uid"), "{reason}");

    let (line, _) = parse_err_line("u:{PLAIN}x:0:100\n");
    assert_eq!(line, 1);
    let (line, reason) = parse_err_line("u:{PLAIN}x:100:-1\n");
    assert_eq!(line, 1);
    assert!(reason.contains("gid"), "{reason}");

    let (line, _) = parse_err_line("a@b@c:{PLAIN}x\n");
    assert_eq!(line, 1);
    let (line, _) = parse_err_line("x:{PLAIN}y\n../etc:{PLAIN}x\n");
    assert_eq!(line, 2);
    let (line, _) = parse_err_line(" leading:{PLAIN}x\n");
    assert_eq!(line, 1);
}

#[test]
fn non_utf8_name_is_rejected() {
    let err = UsersFile::parse(Path::new("f"), b"ok:{PLAIN}x\n\xff\xfe:{PLAIN}y\n").unwrap_err();
    assert!(matches!(err, AuthError::Parse { line: 2, .. }), "{err:?}");
}

#[test]
fn duplicates_are_rejected_case_insensitively() {
    let (line, reason) = parse_err_line("alice:{PLAIN}a\nbob:{PLAIN}b\nALICE:{PLAIN}c\n");
    assert_eq!(line, 3);
    assert!(reason.contains("line 1"), "{reason}");
}

#[test]
fn weak_schemes_lists_plain_entries() {
    let f = parse(SAMPLE).unwrap();
    assert_eq!(
        f.weak_schemes(),
        vec![
            ("alice@example.org".to_owned(), "PLAIN".to_owned()),
            ("alice".to_owned(), "PLAIN".to_owned()),
        ]
    );
    let f = parse("a:{SSHA}x\nb:{BLF-CRYPT}$2y$x\nc:{CLEAR}x\n").unwrap();
    let weak: Vec<_> = f.weak_schemes().into_iter().map(|(u, _)| u).collect();
    assert_eq!(weak, ["a", "c"]);
}

#[test]
fn unknown_schemes_are_refused_naming_the_line() {
    let err = parse("a:{PLAIN}x\n\nb:{PBKDF2}$1$abc\n").unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, AuthError::Parse { line: 3, .. }), "{text}");
    assert!(
        text.contains("PBKDF2") && text.contains("not supported"),
        "{text}"
    );
    assert!(!text.contains("clear"), "{text}");
    let err = parse("a:{CRYPT}$7$x$y\n").unwrap_err();
    assert!(err.to_string().contains("crypt formats"), "{err}");
    // no password at all is no scheme problem (it never verifies)
    assert!(parse("a\nb:\n").is_ok());
}

#[test]
fn the_timing_reference_is_the_most_costly_hash() {
    let f =
        parse("a:{PLAIN}x\nb:{SSHA}x\nc:{SHA512-CRYPT}$6$s$h\nd:{SHA256-CRYPT}$5$s$h\n").unwrap();
    assert_eq!(f.timing_reference().unwrap().scheme, "SHA512-CRYPT");
    let f = parse("a:{PLAIN}x\nb:{PLAIN}y\n").unwrap();
    assert_eq!(f.timing_reference().unwrap().data, "x");
    assert!(parse("a\n").unwrap().timing_reference().is_none());
}

#[test]
fn load_reports_missing_file_and_errors_with_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users");
    match UsersFile::load(&path) {
        Err(AuthError::NotFound(p)) => assert_eq!(p, path),
        other => panic!("{other:?}"),
    }
    std::fs::write(&path, "a:{PLAIN}x\nb c:{PLAIN}y\n").unwrap();
    let err = UsersFile::load(&path).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with(&format!("{}:2:", path.display())), "{msg}");
}

#[test]
fn is_stale_notices_replacement() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users");
    std::fs::write(&path, "a:{PLAIN}x\n").unwrap();
    let f = UsersFile::load(&path).unwrap();
    assert!(!f.is_stale().unwrap());
    maildex_auth::add_user(&path, "b", &maildex_auth::PasswordHash::parse("{PLAIN}y")).unwrap();
    assert!(f.is_stale().unwrap());
    let f = UsersFile::load(&path).unwrap();
    assert!(!f.is_stale().unwrap());
    assert_eq!(f.len(), 2);
}
