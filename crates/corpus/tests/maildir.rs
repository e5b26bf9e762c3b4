//! The written Maildir++ tree: layout, Dovecot-style file names, flags, mtimes, folder names.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use maildex_corpus::{generate, user_maildir, CorpusError, Spec, FOLDERS};

/// Parses `<secs>.M<usecs>P<pid>Q<n>.<host>,S=<size>,W=<vsize>[:2,<flags>]`.
fn parse_name(name: &str) -> Option<(i64, usize, usize, Option<String>)> {
    let (base, info) = match name.split_once(":2,") {
        Some((b, f)) => (b, Some(f.to_owned())),
        None => (name, None),
    };
    let mut it = base.split(',');
    let unique = it.next()?;
    let size = it.next()?.strip_prefix("S=")?.parse().ok()?;
    let vsize = it.next()?.strip_prefix("W=")?.parse().ok()?;
    if it.next().is_some() {
        return None;
    }
    let (secs, rest) = unique.split_once('.')?;
    let rest = rest.strip_prefix('M')?;
    let (usecs, rest) = rest.split_once('P')?;
    let (pid, rest) = rest.split_once('Q')?;
    let (q, host) = rest.split_once('.')?;
    usecs.parse::<u32>().ok().filter(|&u| u < 1_000_000)?;
    pid.parse::<u32>().ok()?;
    q.parse::<u32>().ok()?;
    if host.is_empty() || host.contains('/') {
        return None;
    }
    Some((secs.parse().ok()?, size, vsize, info))
}

fn check_user(maildir: &Path, per_folder: &mut BTreeMap<String, usize>) -> (usize, u64, usize) {
    let (mut files, mut bytes, mut in_new) = (0usize, 0u64, 0usize);
    let mut dirs = vec![(maildir.to_owned(), "INBOX".to_owned())];
    for e in std::fs::read_dir(maildir).unwrap() {
        let e = e.unwrap();
        let n = e.file_name().to_string_lossy().into_owned();
        if let Some(enc) = n.strip_prefix('.') {
            assert!(
                e.path().join("maildirfolder").is_file(),
                "{n} lacks maildirfolder"
            );
            let decoded: Vec<String> = enc
                .split('.')
                .map(|l| common::mutf7_decode(l).unwrap())
                .collect();
            dirs.push((e.path(), decoded.join(".")));
        }
    }
    for (dir, name) in dirs {
        for sub in ["cur", "new", "tmp"] {
            assert!(dir.join(sub).is_dir(), "{} lacks {sub}", dir.display());
        }
        assert_eq!(std::fs::read_dir(dir.join("tmp")).unwrap().count(), 0);
        for sub in ["cur", "new"] {
            for e in std::fs::read_dir(dir.join(sub)).unwrap() {
                let e = e.unwrap();
                let fname = e.file_name().to_string_lossy().into_owned();
                let (secs, size, vsize, flags) =
                    parse_name(&fname).unwrap_or_else(|| panic!("bad name {fname}"));
                let data = std::fs::read(e.path()).unwrap();
                assert_eq!(size, data.len(), "S= of {fname}");
                assert!(!data.contains(&b'\r'), "{fname} has CR");
                let lf = data.iter().filter(|&&b| b == b'\n').count();
                assert_eq!(vsize, data.len() + lf, "W= of {fname}");
                let mtime = e
                    .metadata()
                    .unwrap()
                    .modified()
                    .unwrap()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs() as i64;
                assert_eq!(mtime, secs, "mtime of {fname}");
                match (sub, flags) {
                    ("new", None) => in_new += 1,
                    ("cur", Some(f)) => {
                        let mut sorted: Vec<char> = f.chars().collect();
                        sorted.sort_unstable();
                        sorted.dedup();
                        assert_eq!(
                            sorted.iter().collect::<String>(),
                            f,
                            "flags of {fname} not sorted/unique"
                        );
                        assert!(f.chars().all(|c| "DFRST".contains(c)), "{fname}");
                    }
                    (s, f) => panic!("{fname} in {s} with info {f:?}"),
                }
                files += 1;
                bytes += data.len() as u64;
                *per_folder.entry(name.clone()).or_insert(0) += 1;
            }
        }
    }
    (files, bytes, in_new)
}

#[test]
fn tree_layout_names_and_stats_agree() {
    let dir = tempfile::tempdir().unwrap();
    let spec = Spec {
        seed: 42,
        users: 3,
        messages_per_user: 400,
        folders: true,
        size_scale: 0.2,
    };
    let stats = generate(&spec, dir.path()).unwrap();
    let mut per_folder = BTreeMap::new();
    let (mut files, mut bytes, mut in_new) = (0, 0, 0);
    for u in 0..3 {
        let md = user_maildir(dir.path(), u);
        assert!(md.ends_with(format!("example.org/user000{}/Maildir", u + 1)));
        let (f, b, n) = check_user(&md, &mut per_folder);
        files += f;
        bytes += b;
        in_new += n;
    }
    assert_eq!(files, 1200);
    assert_eq!(stats.messages, files);
    assert_eq!(stats.bytes, bytes);
    assert_eq!(stats.in_new, in_new);
    assert!(in_new > 0, "a few messages should wait in new/");
    assert!(in_new < files / 20, "{in_new} in new/");
    // Decoded on-disk names equal the documented folder names, counts agree.
    let names: Vec<&str> = FOLDERS.iter().map(|f| f.name).collect();
    assert!(
        per_folder.keys().all(|k| names.contains(&k.as_str())),
        "{per_folder:?}"
    );
    for (name, n) in &stats.per_folder {
        assert_eq!(per_folder.get(name).copied().unwrap_or(0), *n, "{name}");
    }
    assert!(stats.per_folder["Réunions"] > 0);
    assert!(
        stats.sizes.p50 <= stats.sizes.p90
            && stats.sizes.p90 <= stats.sizes.p99
            && stats.sizes.p99 <= stats.sizes.max
    );
    // Most messages are \Seen.
    assert!(stats.unseen * 3 < stats.messages, "{} unseen", stats.unseen);
}

#[test]
fn non_ascii_folder_is_stored_in_modified_utf7() {
    let dir = tempfile::tempdir().unwrap();
    let spec = Spec {
        seed: 1,
        users: 1,
        messages_per_user: 30,
        folders: true,
        size_scale: 0.1,
    };
    generate(&spec, dir.path()).unwrap();
    let md = user_maildir(dir.path(), 0);
    // RFC 3501 §5.1.3: "é" (U+00E9) is "&AOk-".
    assert!(md.join(".R&AOk-unions").join("maildirfolder").is_file());
    assert!(md.join(".Lists.rust").is_dir());
    assert_eq!(
        common::mutf7_decode("R&AOk-unions").as_deref(),
        Some("Réunions")
    );
    assert_eq!(
        common::mutf7_decode("~peter/mail/&U,BTFw-/&ZeVnLIqe-").as_deref(),
        Some("~peter/mail/台北/日本語")
    );
}

#[test]
fn without_folders_everything_is_in_inbox() {
    let dir = tempfile::tempdir().unwrap();
    let spec = Spec {
        seed: 3,
        users: 1,
        messages_per_user: 50,
        folders: false,
        size_scale: 0.1,
    };
    let stats = generate(&spec, dir.path()).unwrap();
    assert_eq!(stats.per_folder.len(), 1);
    assert_eq!(stats.per_folder["INBOX"], 50);
    let md = user_maildir(dir.path(), 0);
    let subdirs = std::fs::read_dir(&md)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('.')
        })
        .count();
    assert_eq!(subdirs, 0);
}

#[test]
fn refuses_existing_maildir_and_bad_scale() {
    let dir = tempfile::tempdir().unwrap();
    let spec = Spec {
        seed: 3,
        users: 1,
        messages_per_user: 5,
        folders: false,
        size_scale: 0.1,
    };
    generate(&spec, dir.path()).unwrap();
    match generate(&spec, dir.path()) {
        Err(CorpusError::Exists { path }) => assert_eq!(path, user_maildir(dir.path(), 0)),
        other => panic!("expected Exists, got {other:?}"),
    }
    let other = tempfile::tempdir().unwrap();
    for scale in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let bad = Spec {
            size_scale: scale,
            ..spec.clone()
        };
        assert!(
            matches!(
                generate(&bad, other.path()),
                Err(CorpusError::InvalidSpec { .. })
            ),
            "{scale}"
        );
    }
}
