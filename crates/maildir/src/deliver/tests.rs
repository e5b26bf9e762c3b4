use super::*;
use crate::folder::create_mailbox;
use std::io::Write;
use std::time::{Duration, UNIX_EPOCH};

fn mailbox() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let mb = tmp.path().join("mb");
    fs::create_dir(&mb).unwrap();
    create_mailbox(&mb, false).unwrap();
    (tmp, mb)
}

fn count_in(dir: &Path) -> usize {
    fs::read_dir(dir).unwrap().count()
}

#[test]
fn vsize_counts_bare_lf_across_writes() {
    let (_t, mb) = mailbox();
    let mut t = TmpFile::create(&mb).unwrap();
    t.write_all(b"a\r").unwrap();
    t.write_all(b"\nb\n").unwrap();
    // "a\r\nb\n": one bare LF.
    assert_eq!((t.size(), t.vsize()), (5, 6));
    t.write_all(b"\r").unwrap();
    t.write_all(b"").unwrap();
    t.write_all(b"\n\n").unwrap();
    // "\r" then "\n\n": the first LF follows CR, the second is bare.
    assert_eq!((t.size(), t.vsize()), (8, 10));
    t.write_all(b"\n").unwrap();
    assert_eq!((t.size(), t.vsize()), (9, 12));
}

#[test]
fn first_byte_lf_is_bare() {
    let (_t, mb) = mailbox();
    let mut t = TmpFile::create(&mb).unwrap();
    t.write_all(b"\n").unwrap();
    assert_eq!(t.vsize(), 2);
}

#[test]
fn commit_to_new_links_with_sizes() {
    let (_t, mb) = mailbox();
    let mut t = TmpFile::create(&mb).unwrap();
    let tmp_path = t.path().to_path_buf();
    assert!(tmp_path.starts_with(mb.join("tmp")));
    t.write_all(b"Subject: hi\n\nbody\n").unwrap();
    let d = t.commit(Sub::New, Flags::EMPTY, Keywords::EMPTY).unwrap();
    assert_eq!(d.size, 18);
    assert_eq!(d.vsize, 21);
    assert!(d.file_name.ends_with(",S=18,W=21"), "{}", d.file_name);
    assert!(!d.file_name.contains(':'));
    assert_eq!(d.path, mb.join("new").join(&d.file_name));
    assert_eq!(fs::read(&d.path).unwrap(), b"Subject: hi\n\nbody\n");
    assert_eq!(MaildirName::parse(&d.file_name).unwrap(), d.name);
    assert!(!tmp_path.exists());
    assert_eq!(count_in(&mb.join("tmp")), 0);
    // The tmp name's unique part is kept in the final name.
    let tmp_id = tmp_path.file_name().unwrap().to_str().unwrap();
    assert!(d.file_name.starts_with(tmp_id));
}

#[test]
fn commit_to_cur_with_flags_and_mtime() {
    let (_t, mb) = mailbox();
    let mut t = TmpFile::create(&mb).unwrap();
    t.write_all(b"x\r\n").unwrap();
    let when = UNIX_EPOCH + Duration::from_secs(1_600_000_000);
    t.set_mtime(when);
    let d = t
        .commit(Sub::Cur, Flags::SEEN | Flags::FLAGGED, Keywords(0b101))
        .unwrap();
    assert!(d.file_name.ends_with(",S=3,W=3:2,FSac"), "{}", d.file_name);
    assert_eq!(d.path.parent().unwrap(), mb.join("cur"));
    assert_eq!(fs::metadata(&d.path).unwrap().modified().unwrap(), when);
}

#[test]
fn commit_empty_message() {
    let (_t, mb) = mailbox();
    let t = TmpFile::create(&mb).unwrap();
    let d = t.commit(Sub::New, Flags::EMPTY, Keywords::EMPTY).unwrap();
    assert_eq!((d.size, d.vsize), (0, 0));
    assert_eq!(fs::metadata(&d.path).unwrap().len(), 0);
}

#[test]
fn flags_in_new_are_refused_and_tmp_removed() {
    let (_t, mb) = mailbox();
    let t = TmpFile::create(&mb).unwrap();
    let e = t
        .commit(Sub::New, Flags::SEEN, Keywords::EMPTY)
        .unwrap_err();
    assert!(matches!(e, MaildirError::FlagsInNew { .. }));
    assert_eq!(count_in(&mb.join("tmp")), 0);
    assert_eq!(count_in(&mb.join("new")), 0);
}

#[test]
fn drop_removes_uncommitted_file() {
    let (_t, mb) = mailbox();
    let mut t = TmpFile::create(&mb).unwrap();
    t.write_all(b"partial").unwrap();
    t.sync().unwrap();
    let p = t.path().to_path_buf();
    assert!(p.exists());
    drop(t);
    assert!(!p.exists());
}

#[test]
fn create_fails_when_tmp_is_not_a_directory() {
    // We run as root, so permissions cannot make this fail: a file where tmp/ should be does.
    let tmp = tempfile::tempdir().unwrap();
    let mb = tmp.path();
    fs::write(mb.join("tmp"), b"not a dir").unwrap();
    let e = TmpFile::create(mb).unwrap_err();
    assert_eq!(e.io_kind(), Some(io::ErrorKind::NotADirectory), "{e}");
    assert!(e.path().starts_with(mb.join("tmp")));
    let e = TmpFile::create(&mb.join("missing")).unwrap_err();
    assert!(e.is_not_found());
}

#[test]
fn commit_fails_cleanly_when_destination_dir_missing() {
    let (_t, mb) = mailbox();
    fs::remove_dir(mb.join("cur")).unwrap();
    let mut t = TmpFile::create(&mb).unwrap();
    t.write_all(b"x").unwrap();
    let e = t
        .commit(Sub::Cur, Flags::EMPTY, Keywords::EMPTY)
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert_eq!(count_in(&mb.join("tmp")), 0);
}

#[test]
fn link_never_overwrites() {
    let (_t, mb) = mailbox();
    let a = mb.join("tmp/a");
    let b = mb.join("new/b");
    fs::write(&a, b"a").unwrap();
    fs::write(&b, b"b").unwrap();
    let e = ops::link_noreplace(&a, &b).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
    assert_eq!(fs::read(&b).unwrap(), b"b");
    assert!(ops::rename_noreplace_for_test(&a, &b).is_err());
    assert_eq!(fs::read(&b).unwrap(), b"b");
    let c = mb.join("new/c");
    ops::rename_noreplace_for_test(&a, &c).unwrap();
    assert!(!a.exists());
    assert_eq!(fs::read(&c).unwrap(), b"a");
}

#[test]
fn rename_flags_moves_new_to_cur_and_reports_vanished() {
    let (_t, mb) = mailbox();
    fs::write(mb.join("new/123.M1P1Q1.h,S=1,W=1"), b"x").unwrap();
    let r = rename_flags(
        &mb,
        Sub::New,
        "123.M1P1Q1.h,S=1,W=1",
        Flags::SEEN,
        Keywords(1),
    )
    .unwrap();
    assert_eq!(
        r,
        RenameOutcome::Renamed("123.M1P1Q1.h,S=1,W=1:2,Sa".into())
    );
    assert!(mb.join("cur/123.M1P1Q1.h,S=1,W=1:2,Sa").is_file());
    // Unchanged flags in cur/: no rename, still reported.
    let r = rename_flags(
        &mb,
        Sub::Cur,
        "123.M1P1Q1.h,S=1,W=1:2,Sa",
        Flags::SEEN,
        Keywords(1),
    )
    .unwrap();
    assert_eq!(
        r,
        RenameOutcome::Renamed("123.M1P1Q1.h,S=1,W=1:2,Sa".into())
    );
    // Unknown letters survive.
    fs::write(mb.join("cur/9.x:2,XS"), b"x").unwrap();
    let r = rename_flags(&mb, Sub::Cur, "9.x:2,XS", Flags::DELETED, Keywords::EMPTY).unwrap();
    assert_eq!(r, RenameOutcome::Renamed("9.x:2,TX".into()));
    // Gone.
    let r = rename_flags(&mb, Sub::Cur, "9.x:2,XS", Flags::SEEN, Keywords::EMPTY).unwrap();
    assert_eq!(r, RenameOutcome::Vanished);
    let r = rename_flags(&mb, Sub::Cur, "nothere:2,", Flags::EMPTY, Keywords::EMPTY).unwrap();
    assert_eq!(r, RenameOutcome::Vanished);
    // Bad names are errors, not "vanished".
    assert!(rename_flags(&mb, Sub::Cur, "../x", Flags::EMPTY, Keywords::EMPTY).is_err());
}

#[test]
fn rename_flags_with_missing_cur_is_an_error() {
    let (_t, mb) = mailbox();
    fs::write(mb.join("new/1.x"), b"x").unwrap();
    fs::remove_dir(mb.join("cur")).unwrap();
    let e = rename_flags(&mb, Sub::New, "1.x", Flags::SEEN, Keywords::EMPTY).unwrap_err();
    assert!(e.is_not_found());
    assert!(mb.join("new/1.x").exists());
}

#[test]
fn remove_reports_existence() {
    let (_t, mb) = mailbox();
    fs::write(mb.join("cur/1.x:2,S"), b"x").unwrap();
    assert!(remove(&mb, Sub::Cur, "1.x:2,S").unwrap());
    assert!(!remove(&mb, Sub::Cur, "1.x:2,S").unwrap());
    for bad in ["", ".", "..", "a/b"] {
        assert!(matches!(
            remove(&mb, Sub::Cur, bad),
            Err(MaildirError::BadFileName { .. })
        ));
    }
}

#[test]
fn clean_tmp_removes_only_old_files() {
    let (_t, mb) = mailbox();
    fs::write(mb.join("tmp/old"), b"x").unwrap();
    let f = fs::File::options()
        .write(true)
        .open(mb.join("tmp/old"))
        .unwrap();
    // An old mtime alone does not make a file old: its ctime is fresh.
    f.set_modified(UNIX_EPOCH + Duration::from_secs(1000))
        .unwrap();
    drop(f);
    fs::create_dir(mb.join("tmp/dir")).unwrap();
    assert_eq!(clean_tmp(&mb, TMP_DELETE_AGE).unwrap(), 0);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(clean_tmp(&mb, Duration::from_millis(5)).unwrap(), 1);
    assert!(!mb.join("tmp/old").exists());
    assert!(mb.join("tmp/dir").is_dir());
    assert!(clean_tmp(&mb.join("nope"), TMP_DELETE_AGE)
        .unwrap_err()
        .is_not_found());
}

#[test]
fn local_pid_reads_maildex_and_dovecot_unique_names_of_this_host() {
    use super::ops::local_pid;
    let h = "mx.example.org";
    assert_eq!(
        local_pid("1700000000.M12P345Q6.mx.example.org", h),
        Some(345)
    );
    assert_eq!(local_pid("1700000000.M12P345.mx.example.org", h), Some(345));
    assert_eq!(
        local_pid("1700000000.P345V9I8.mx.example.org", h),
        Some(345)
    );
    assert_eq!(
        local_pid("1700000000.M12P345.mx.example.org,S=10:2,S", h),
        Some(345)
    );
    // another host, a longer host name, no pid, no timestamp
    assert_eq!(local_pid("1700000000.M12P345.mx2.example.org", h), None);
    assert_eq!(local_pid("1700000000.M12P345.mx.example.org.uk", h), None);
    assert_eq!(local_pid("1700000000.M12Q6.mx.example.org", h), None);
    assert_eq!(local_pid("x1700000000.M12P345.mx.example.org", h), None);
    assert_eq!(local_pid("1700000000.M12P0.mx.example.org", h), None);
    assert_eq!(local_pid("courier-tmp", h), None);
}

#[test]
fn clean_stale_tmp_removes_files_of_dead_writers_only() {
    let (_t, mb) = mailbox();
    let host = crate::util::escaped_hostname();
    // a pid that existed and is gone
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let ours = std::process::id();
    let names = [
        format!("1700000000.M1P{dead}Q1.{host}"),
        format!("1700000000.M1P{ours}Q1.{host}"),
        format!("1700000000.M1P{dead}Q1.other-{host}"),
        "1700000000.12345_1.procmail".to_string(),
    ];
    for n in &names {
        fs::write(mb.join("tmp").join(n), b"x").unwrap();
    }
    // a delivery in progress in this process
    let mut live = TmpFile::create(&mb).unwrap();
    live.write_all(b"Subject: x\n").unwrap();
    fs::create_dir(mb.join("tmp/dir")).unwrap();
    assert_eq!(clean_stale_tmp(&mb).unwrap(), 1);
    assert!(!mb.join("tmp").join(&names[0]).exists());
    for n in &names[1..] {
        assert!(mb.join("tmp").join(n).exists(), "{n}");
    }
    assert!(live.path().exists());
    assert!(mb.join("tmp/dir").is_dir());
    assert!(clean_stale_tmp(&mb.join("nope"))
        .unwrap_err()
        .is_not_found());
}

proptest::proptest! {
    #[test]
    fn bare_lf_count_matches_a_byte_loop(prev in proptest::prelude::any::<u8>(), data in proptest::collection::vec(proptest::sample::select(vec![b'\r', b'\n', b'a']), 0..64)) {
        let mut p = prev;
        let mut expected = 0u64;
        for &b in &data {
            if b == b'\n' && p != b'\r' {
                expected += 1;
            }
            p = b;
        }
        proptest::prop_assert_eq!(super::bare_lfs(prev, &data), expected);
    }
}

#[test]
fn link_unique_keeps_a_shared_source_and_takes_a_fresh_name_on_a_collision() {
    let (_t, mb) = mailbox();
    let src = mb.join("tmp/shared");
    fs::write(&src, b"x\n").unwrap();
    let taken = "1.M1P1Q1.h";
    fs::write(mb.join("new").join(format!("{taken},S=2,W=3")), b"other").unwrap();
    let to = LinkInto {
        mailbox: &mb,
        sub: Sub::New,
        flags: Flags::EMPTY,
        keywords: Keywords::EMPTY,
        sizes: (2, 3),
        first_id: Some(taken.to_string()),
        fault: Point::Link,
        fsync: true,
        source: LinkSource::Keep,
    };
    let d = link_unique(&src, to.clone()).unwrap();
    assert!(!d.file_name.starts_with(taken), "{}", d.file_name);
    assert!(d.file_name.ends_with(",S=2,W=3"), "{}", d.file_name);
    assert_eq!(fs::read(&d.path).unwrap(), b"x\n");
    assert!(src.exists(), "a kept source stays for the next delivery");
    assert_eq!(
        fs::read(mb.join("new").join(format!("{taken},S=2,W=3"))).unwrap(),
        b"other"
    );
    // a consumed source is gone once linked; flags never go to new/
    let consumed = link_unique(
        &src,
        LinkInto {
            source: LinkSource::Consume,
            first_id: None,
            ..to.clone()
        },
    )
    .unwrap();
    assert!(!src.exists());
    assert_eq!(fs::read(&consumed.path).unwrap(), b"x\n");
    let flagged = LinkInto {
        flags: Flags::SEEN,
        ..to
    };
    assert!(matches!(
        link_unique(&consumed.path, flagged),
        Err(MaildirError::FlagsInNew { .. })
    ));
}
