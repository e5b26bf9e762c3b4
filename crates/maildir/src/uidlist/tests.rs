use super::*;
use crate::uidlist::lock::LOCK_TIMEOUT;
use proptest::prelude::*;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::Duration;

const GUID: &str = "3085f01b7f11094c501100008c4a11c1";

fn p() -> PathBuf {
    PathBuf::from("/mb/dovecot-uidlist")
}

fn corrupt_line(data: &[u8]) -> usize {
    match Uidlist::parse(&p(), data) {
        Err(MaildirError::Corrupt { line, path, .. }) => {
            assert_eq!(path, p());
            line
        }
        other => panic!("expected corruption for {data:?}, got {other:?}"),
    }
}

#[test]
fn parses_dovecot_v3() {
    let data = format!(
        "3 V1275660208 N25022 G{GUID} Pfoo\n\
         25006 :1276528487.M364837P9451.kurkku,S=1355,W=1394:2,\n\
         25017 W2481 :1276533073.M242911P3632.kurkku:2,F\n\
         25018 W10 Gabc :1276533074.M1P1.kurkku\n"
    );
    let l = Uidlist::parse(&p(), data.as_bytes()).unwrap();
    assert_eq!(l.version, 3);
    assert_eq!(l.uidvalidity, 1275660208);
    assert_eq!(l.next_uid, 25022);
    assert_eq!(l.guid.as_deref(), Some(GUID));
    assert_eq!(l.header_extra, vec!["Pfoo"]);
    assert_eq!(l.records.len(), 3);
    assert_eq!(l.records[0].uid, 25006);
    assert_eq!(
        l.records[0].base(),
        "1276528487.M364837P9451.kurkku,S=1355,W=1394"
    );
    assert_eq!(l.records[1].ext, vec!["W2481"]);
    assert_eq!(l.records[2].ext, vec!["W10", "Gabc"]);
    assert_eq!(
        l.find_base("1276533073.M242911P3632.kurkku").unwrap().uid,
        25017
    );
    assert_eq!(l.uids_by_base()["1276533074.M1P1.kurkku"], 25018);
    // Written back with bases only, extra header kept.
    let out = String::from_utf8(l.to_bytes()).unwrap();
    assert_eq!(
        out,
        format!(
            "3 V1275660208 N25022 G{GUID} Pfoo\n\
             25006 :1276528487.M364837P9451.kurkku,S=1355,W=1394\n\
             25017 W2481 :1276533073.M242911P3632.kurkku\n\
             25018 W10 Gabc :1276533074.M1P1.kurkku\n"
        )
    );
}

#[test]
fn parses_v1() {
    let l = Uidlist::parse(&p(), b"1 1100000000 5\n1 a.b.c:2,S\n3 d.e.f\n").unwrap();
    assert_eq!((l.version, l.uidvalidity, l.next_uid), (1, 1100000000, 5));
    assert_eq!(l.records[0].file_name, "a.b.c:2,S");
    assert_eq!(l.records[0].base(), "a.b.c");
    assert_eq!(l.records[1].uid, 3);
    assert!(l.guid.is_none());
}

#[test]
fn low_next_uid_is_raised() {
    let l = Uidlist::parse(&p(), b"3 V1 N2 \n5 :x\n9 :y\n").unwrap();
    assert_eq!(l.next_uid, 10);
}

#[test]
fn invalid_guid_and_ext_fields_are_dropped() {
    let l = Uidlist::parse(&p(), b"3 V1 N2 Gzz\n1 w3 W4 :x\n").unwrap();
    assert!(l.guid.is_none());
    assert_eq!(l.records[0].ext, vec!["W4"]);
}

#[test]
fn duplicate_base_keeps_later_uid() {
    let l = Uidlist::parse(&p(), b"3 V1 N9\n1 :a\n2 :b\n3 :a:2,S\n").unwrap();
    let uids: Vec<u32> = l.records.iter().map(|r| r.uid).collect();
    assert_eq!(uids, vec![2, 3]);
}

#[test]
fn unterminated_last_line_is_ignored() {
    let l = Uidlist::parse(&p(), b"3 V1 N3\n1 :a\n2 :b.trunc").unwrap();
    assert_eq!(l.records.len(), 1);
    assert_eq!(l.next_uid, 3);
    // A header without newline is still a header.
    let l = Uidlist::parse(&p(), b"3 V7 N1").unwrap();
    assert_eq!(l.uidvalidity, 7);
}

#[test]
fn corrupt_files_name_the_line() {
    assert_eq!(corrupt_line(b""), 1);
    assert_eq!(corrupt_line(b"garbage\n"), 1);
    assert_eq!(corrupt_line(b"x V1 N1\n"), 1);
    assert_eq!(corrupt_line(b"2 V1 N1\n"), 1); // unsupported version
    assert_eq!(corrupt_line(b"3 V0 N1\n"), 1);
    assert_eq!(corrupt_line(b"3 V1\n"), 1);
    assert_eq!(corrupt_line(b"1 12\n"), 1);
    assert_eq!(corrupt_line(b"\x00\x01\x02\xff\xfe"), 1); // binary
    assert_eq!(corrupt_line(b"3 V1 N9\n\xff\xfe :x\n"), 2);
    assert_eq!(corrupt_line(b"3 V1 N9\n1 :a\n1 :b\n"), 3); // not increasing
    assert_eq!(corrupt_line(b"3 V1 N9\n5 :a\n2 :b\n"), 3); // decreasing
    assert_eq!(corrupt_line(b"3 V1 N9\n0 :a\n"), 2);
    assert_eq!(corrupt_line(b"3 V1 N9\n1 :a\n2 W5\n3 :c\n"), 3); // truncated record
    assert_eq!(corrupt_line(b"3 V1 N9\n1 :a\n2\n"), 3);
    assert_eq!(corrupt_line(b"3 V1 N9\n1 :\n"), 2);
    assert_eq!(corrupt_line(b"3 V1 N9\n1 :a\n\n2 :b\n"), 3); // empty line
    assert_eq!(corrupt_line(b"3 V1 N9\n1 :../etc/x\n"), 2);
    assert_eq!(corrupt_line(b"3 V1 N9\n4294967295 :a\n"), 2);
    assert_eq!(corrupt_line(b"3 V1 N9\n99999999999 :a\n"), 2);
    assert_eq!(corrupt_line(b"1 5 9\n1\n"), 2);
}

#[test]
fn read_missing_is_none() {
    let d = tempfile::tempdir().unwrap();
    assert_eq!(Uidlist::read(d.path()).unwrap(), None);
    fs::write(d.path().join(UIDLIST_NAME), b"junk").unwrap();
    let e = Uidlist::read(d.path()).unwrap_err();
    assert_eq!(e.path(), d.path().join(UIDLIST_NAME));
}

#[test]
fn new_values() {
    let a = new_uidvalidity();
    let b = new_uidvalidity();
    assert!(b > a && a > 1_600_000_000);
    let g1 = new_guid();
    assert!(is_guid(&g1));
    assert_ne!(g1, new_guid());
    let l = Uidlist::new(a);
    assert_eq!((l.version, l.next_uid, l.uidvalidity), (3, 1, a));
    l.validate(&p()).unwrap();
}

#[test]
fn validate_rejects_unwritable_lists() {
    let mut l = Uidlist::new(5);
    l.records = vec![UidRecord::new(2, "b"), UidRecord::new(1, "a")];
    l.next_uid = 3;
    assert!(matches!(
        l.validate(&p()),
        Err(MaildirError::InvalidRecords { .. })
    ));
    l.records = vec![UidRecord::new(1, "a\nb")];
    assert!(l.validate(&p()).is_err());
    l.records = vec![UidRecord::new(1, "a")];
    l.next_uid = 1;
    assert!(l.validate(&p()).is_err());
    l.next_uid = 2;
    l.validate(&p()).unwrap();
    l.records[0].ext = vec!["w1".into()];
    assert!(l.validate(&p()).is_err());
    l.records[0].ext = vec!["W1 2".into()];
    assert!(l.validate(&p()).is_err());
    l.records[0].ext.clear();
    l.header_extra = vec!["N5".into()];
    assert!(l.validate(&p()).is_err());
}

fn list_strategy() -> impl Strategy<Value = Uidlist> {
    (
        1u32..u32::MAX,
        proptest::collection::vec(
            (
                1u32..1000,
                proptest::collection::vec("[A-Z][a-zA-Z0-9]{0,6}", 0..3),
                "[0-9a-zA-Z][0-9a-zA-Z.,=_-]{0,30}",
                proptest::option::of("[DFRST]{0,3}"),
            ),
            0..20,
        ),
        0u32..5,
        proptest::option::of("[0-9a-f]{32}"),
        proptest::collection::vec("[A-FH-MO-UW-Z][a-z0-9]{0,5}", 0..3),
    )
        .prop_map(|(uidv, recs, gap, guid, extra)| {
            let mut uid = 0u32;
            let mut seen = std::collections::HashSet::new();
            let mut records = Vec::new();
            for (step, ext, base, info) in recs {
                if !seen.insert(base.clone()) {
                    continue;
                }
                uid += step;
                let file_name = match info {
                    Some(f) => format!("{base}:2,{f}"),
                    None => base,
                };
                records.push(UidRecord {
                    uid,
                    ext,
                    file_name,
                });
            }
            Uidlist {
                version: 3,
                uidvalidity: uidv,
                next_uid: uid + 1 + gap,
                guid,
                header_extra: extra,
                records,
            }
        })
}

fn bases(l: &Uidlist) -> Vec<(u32, Vec<String>, String)> {
    l.records
        .iter()
        .map(|r| (r.uid, r.ext.clone(), r.base().to_string()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn write_read_round_trip(l in list_strategy()) {
        l.validate(&p()).unwrap();
        let back = Uidlist::parse(&p(), &l.to_bytes()).unwrap();
        prop_assert_eq!(back.uidvalidity, l.uidvalidity);
        prop_assert_eq!(back.next_uid, l.next_uid);
        prop_assert_eq!(&back.guid, &l.guid);
        prop_assert_eq!(&back.header_extra, &l.header_extra);
        prop_assert_eq!(bases(&back), bases(&l));
        prop_assert_eq!(back.to_bytes(), l.to_bytes());
    }

    #[test]
    fn scan_for_append_agrees_with_parse(l in list_strategy(), other in "[0-9a-z.]{1,12}") {
        let bytes = l.to_bytes();
        let parsed = Uidlist::parse(&p(), &bytes).unwrap();
        let mut names: Vec<String> = l.records.iter().map(|r| r.base().to_string()).collect();
        names.push(other);
        for base in names.iter().filter(|b| !b.is_empty()) {
            let scan = scan_for_append(&p(), &bytes, base);
            prop_assert_eq!(scan, Some(AppendScan {
                uidvalidity: parsed.uidvalidity,
                next_uid: parsed.next_uid,
                existing: parsed.find_base(base).map(|r| r.uid),
            }), "base {:?} in {:?}", base, String::from_utf8_lossy(&bytes));
        }
    }

    #[test]
    fn parse_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = Uidlist::parse(&p(), &data);
    }

    #[test]
    fn parse_never_panics_on_near_valid(s in "[0-9 VNG:a-z\n]{0,80}") {
        let _ = Uidlist::parse(&p(), format!("3 V1 N1\n{s}").as_bytes());
    }
}

#[test]
fn scan_for_append_reads_dovecot_appends_and_refuses_what_it_cannot_read_whole() {
    let data = b"3 V1275660208 N25006\n\
                 25006 :1276528487.M364837P9451.kurkku,S=1355,W=1394:2,\n\
                 25017 W2481 :1276533073.M242911P3632.kurkku:2,F\n";
    // the header's next UID is behind the appended records: the last one decides
    let scan = scan_for_append(&p(), data, "1276533073.M242911P3632.kurkku").unwrap();
    assert_eq!(
        scan,
        AppendScan {
            uidvalidity: 1275660208,
            next_uid: 25018,
            existing: Some(25017)
        }
    );
    // a name that only shares a prefix is not there
    let scan = scan_for_append(&p(), data, "1276528487.M364837P9451.kurk").unwrap();
    assert_eq!(scan.existing, None);
    // an append cut short, version 1, a broken header: parse it instead
    assert_eq!(scan_for_append(&p(), &data[..data.len() - 3], "x"), None);
    assert_eq!(scan_for_append(&p(), b"1 123 5\n5 x\n", "x"), None);
    assert_eq!(scan_for_append(&p(), b"3 N5\n", "x"), None);
    // no records yet
    let scan = scan_for_append(&p(), b"3 V7 N1\n", "x").unwrap();
    assert_eq!((scan.next_uid, scan.existing), (1, None));
}

// --- locking and writing ---

fn lock(dir: &Path) -> UidlistLock {
    UidlistLock::acquire(dir, Duration::from_secs(5)).unwrap()
}

#[test]
fn lock_file_holds_pid_and_host_and_is_removed_on_drop() {
    let d = tempfile::tempdir().unwrap();
    let l = lock(d.path());
    let lp = d.path().join("dovecot-uidlist.lock");
    let content = fs::read_to_string(&lp).unwrap();
    assert_eq!(
        content,
        format!("{}:{}", std::process::id(), crate::util::raw_hostname())
    );
    assert!(l.is_held());
    // A second locker in the same process waits and times out.
    let e = UidlistLock::acquire(d.path(), Duration::from_millis(150)).unwrap_err();
    assert!(matches!(e, MaildirError::LockTimeout { .. }), "{e}");
    drop(l);
    assert!(!lp.exists());
    lock(d.path()).release().unwrap();
    assert!(!lp.exists());
}

#[test]
fn the_lock_file_is_never_seen_without_its_owner() {
    // A reader racing a locker must never find the lock empty: an empty lock names
    // no process, so if its writer died there it would block everyone for the
    // 120 s stale timeout (the crash test's restart once timed out on one).
    let d = tempfile::tempdir().unwrap();
    let lp = d.path().join("dovecot-uidlist.lock");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (seen, empty) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let (mut seen, mut empty) = (0u32, 0u32);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(c) = fs::read(&lp) {
                    seen += 1;
                    if c.is_empty() {
                        empty += 1;
                    }
                }
            }
            (seen, empty)
        });
        for _ in 0..3000 {
            drop(lock(d.path()));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        reader.join().unwrap()
    });
    assert_eq!(empty, 0, "the lock was empty in {empty} of {seen} reads");
}

#[test]
fn lock_of_dead_local_process_is_overridden() {
    let d = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let lp = d.path().join("dovecot-uidlist.lock");
    fs::write(&lp, format!("{dead}:{}", crate::util::raw_hostname())).unwrap();
    let old = SystemTime::now() - Duration::from_secs(30);
    File::options()
        .write(true)
        .open(&lp)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let l = UidlistLock::acquire(d.path(), Duration::from_secs(3)).unwrap();
    assert!(l.is_held());
}

#[test]
fn lock_of_other_host_waits_for_stale_timeout() {
    let d = tempfile::tempdir().unwrap();
    let lp = d.path().join("dovecot-uidlist.lock");
    fs::write(&lp, "1:some-other-host.example").unwrap();
    // With Dovecot's 120 s the lock is respected.
    let e = UidlistLock::acquire(d.path(), Duration::from_millis(200)).unwrap_err();
    assert!(matches!(e, MaildirError::LockTimeout { .. }));
    // With a zero stale timeout it is overridden once a second has passed.
    let l =
        UidlistLock::acquire_with_stale_timeout(d.path(), Duration::from_secs(5), Duration::ZERO)
            .unwrap();
    assert!(l.is_held());
    assert_eq!(LOCK_TIMEOUT, Duration::from_secs(122));
}

#[test]
fn lock_in_missing_dir_is_an_io_error() {
    let d = tempfile::tempdir().unwrap();
    let e = UidlistLock::acquire(&d.path().join("nope"), Duration::from_millis(10)).unwrap_err();
    assert!(e.is_not_found());
}

#[test]
fn overridden_lock_is_detected() {
    let d = tempfile::tempdir().unwrap();
    let mut l = lock(d.path());
    let lp = d.path().join("dovecot-uidlist.lock");
    fs::remove_file(&lp).unwrap();
    fs::write(&lp, "1:other").unwrap();
    assert!(!l.is_held());
    let e = l.write(&Uidlist::new(1)).unwrap_err();
    assert!(matches!(e, MaildirError::LockLost { .. }));
    assert!(matches!(l.touch(), Err(MaildirError::LockLost { .. })));
    drop(l);
    // Not ours: left alone.
    assert!(lp.exists());
}

#[test]
fn rewrite_replaces_and_releases() {
    let d = tempfile::tempdir().unwrap();
    let mut list = Uidlist::new(77);
    list.guid = None;
    list.records.push(UidRecord::new(1, "a:2,S"));
    list.next_uid = 2;
    lock(d.path()).rewrite(&list).unwrap();
    assert!(!d.path().join("dovecot-uidlist.lock").exists());
    assert!(!d.path().join("dovecot-uidlist.tmp").exists());
    let back = Uidlist::read(d.path()).unwrap().unwrap();
    assert_eq!(back.uidvalidity, 77);
    assert!(back.guid.is_some(), "a GUID is made on write");
    assert_eq!(back.records[0].file_name, "a");
}

#[test]
fn append_adds_lines_in_place() {
    let d = tempfile::tempdir().unwrap();
    let mut l = lock(d.path());
    let mut list = Uidlist::new(9);
    list.records.push(UidRecord::new(1, "a"));
    list.next_uid = 2;
    l.write(&list).unwrap();
    let path = d.path().join(UIDLIST_NAME);
    let ino = fs::metadata(&path).unwrap().ino();
    l.append(&[UidRecord::new(2, "b:2,S"), UidRecord::new(5, "c")], 6)
        .unwrap();
    assert_eq!(
        fs::metadata(&path).unwrap().ino(),
        ino,
        "appended, not replaced"
    );
    let back = l.read().unwrap().unwrap();
    assert_eq!(
        bases(&back).iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![1, 2, 5]
    );
    assert_eq!(back.next_uid, 6);
    assert_eq!(back.records[1].file_name, "b");
    // Reusing a UID is refused.
    let e = l.append(&[UidRecord::new(5, "d")], 6).unwrap_err();
    assert!(matches!(e, MaildirError::InvalidRecords { .. }));
    let e = l
        .append(&[UidRecord::new(7, "d"), UidRecord::new(7, "e")], 8)
        .unwrap_err();
    assert!(matches!(e, MaildirError::InvalidRecords { .. }));
    // Moving next_uid beyond last+1 rewrites the header.
    l.append(&[UidRecord::new(6, "d")], 20).unwrap();
    assert_ne!(fs::metadata(&path).unwrap().ino(), ino);
    let back = l.read().unwrap().unwrap();
    assert_eq!(back.next_uid, 20);
    assert_eq!(back.records.len(), 4);
    // A UID below the header's next_uid is refused even with no record that high.
    assert!(l.append(&[UidRecord::new(10, "e")], 11).is_err());
    l.append(&[UidRecord::new(20, "e")], 21).unwrap();
    // Only next_uid.
    l.append(&[], 30).unwrap();
    assert_eq!(l.read().unwrap().unwrap().next_uid, 30);
}

#[test]
fn append_repairs_cut_last_line_and_upgrades_v1() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join(UIDLIST_NAME);
    fs::write(&path, format!("3 V4 N3 G{GUID}\n1 :a\n2 :b\n3 :c.tru")).unwrap();
    let mut l = lock(d.path());
    l.append(&[UidRecord::new(3, "c")], 4).unwrap();
    let text = fs::read_to_string(&path).unwrap();
    assert_eq!(text, format!("3 V4 N4 G{GUID}\n1 :a\n2 :b\n3 :c\n"));
    fs::write(&path, "1 4 3\n1 a:2,S\n2 b\n").unwrap();
    l.append(&[UidRecord::new(3, "c")], 4).unwrap();
    let back = l.read().unwrap().unwrap();
    assert_eq!(back.version, 3);
    assert_eq!(back.uidvalidity, 4);
    assert_eq!(bases(&back).len(), 3);
}

#[test]
fn append_creates_missing_file() {
    let d = tempfile::tempdir().unwrap();
    let mut l = lock(d.path());
    l.append(&[UidRecord::new(1, "a")], 2).unwrap();
    let back = l.read().unwrap().unwrap();
    assert!(back.uidvalidity > 0);
    assert_eq!(back.records.len(), 1);
}

#[test]
fn append_refuses_corrupt_file() {
    let d = tempfile::tempdir().unwrap();
    // Append reads only the header and the last line; a bad last line makes it
    // read everything, and a corrupt file is reported, not appended to.
    fs::write(d.path().join(UIDLIST_NAME), "3 V1 N5\n2 :a\n1 :b\nx :c\n").unwrap();
    let mut l = lock(d.path());
    let e = l.append(&[UidRecord::new(9, "c")], 10).unwrap_err();
    assert!(matches!(e, MaildirError::Corrupt { line: 3, .. }), "{e}");
    fs::write(d.path().join(UIDLIST_NAME), "garbage").unwrap();
    let e = l.append(&[UidRecord::new(9, "c")], 10).unwrap_err();
    assert!(matches!(e, MaildirError::Corrupt { line: 1, .. }), "{e}");
}

#[test]
fn concurrent_appenders_never_share_a_uid() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_path_buf();
    lock(&dir).rewrite(&Uidlist::new(3)).unwrap();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let dir = dir.clone();
            std::thread::spawn(move || {
                for i in 0..10 {
                    let mut l = UidlistLock::acquire(&dir, Duration::from_secs(20)).unwrap();
                    let cur = l.read().unwrap().unwrap();
                    let uid = cur.next_uid;
                    l.append(&[UidRecord::new(uid, format!("t{t}-{i}"))], uid + 1)
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let back = Uidlist::read(&dir).unwrap().unwrap();
    assert_eq!(back.records.len(), 40);
    assert_eq!(back.next_uid, 41);
}
