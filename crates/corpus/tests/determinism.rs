//! Same seed -> byte-identical corpus (names, contents, mtimes); another seed -> another one.

mod common;

use maildex_corpus::{generate, message, Generator, Role, Spec};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn spec(seed: u64) -> Spec {
    Spec {
        seed,
        users: 3,
        messages_per_user: 120,
        folders: true,
        size_scale: 0.3,
    }
}

#[test]
fn same_seed_gives_identical_trees() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let sa = generate(&spec(7), a.path()).unwrap();
    let sb = generate(&spec(7), b.path()).unwrap();
    assert_eq!(sa, sb);
    let (ta, tb) = (common::tree(a.path()), common::tree(b.path()));
    assert_eq!(ta.len(), tb.len());
    for ((pa, (ca, ma)), (pb, (cb, mb))) in ta.iter().zip(tb.iter()) {
        assert_eq!(pa, pb);
        assert!(ca == cb, "contents of {} differ", pa.display());
        assert_eq!(ma, mb, "mtime of {}", pa.display());
    }
    let files = ta.values().filter(|(_, m)| *m >= 0).count();
    // 3 users x 120 messages plus one maildirfolder marker per subfolder.
    assert_eq!(files, 360 + 3 * 9);
}

#[test]
fn different_seed_gives_a_different_tree() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    generate(&spec(7), a.path()).unwrap();
    generate(&spec(8), b.path()).unwrap();
    let (ta, tb) = (common::tree(a.path()), common::tree(b.path()));
    let names_a: Vec<_> = ta
        .keys()
        .filter(|p| p.to_string_lossy().contains(",S="))
        .collect();
    let names_b: Vec<_> = tb
        .keys()
        .filter(|p| p.to_string_lossy().contains(",S="))
        .collect();
    assert_eq!(names_a.len(), names_b.len());
    let shared = names_a.iter().filter(|n| tb.contains_key(**n)).count();
    assert_eq!(shared, 0, "file names should differ between seeds");
    // Users are independent streams: user 1 differs from user 2 within one corpus too.
    let inbox = |t: &std::collections::BTreeMap<std::path::PathBuf, (Vec<u8>, i64)>, user: &str| {
        t.iter()
            .filter(|(p, (_, m))| {
                *m >= 0 && p.starts_with(format!("example.org/{user}/Maildir/cur"))
            })
            .map(|(_, (c, _))| c.clone())
            .next()
            .unwrap()
    };
    assert_ne!(inbox(&ta, "user0001"), inbox(&ta, "user0002"));
}

#[test]
fn message_and_generator_are_deterministic() {
    let one = |seed| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..20)
            .map(|i| message(&mut rng, i, 1.0))
            .collect::<Vec<_>>()
    };
    assert_eq!(one(3), one(3));
    assert_ne!(one(3), one(4));
    let stream = |seed| {
        let mut g = Generator::for_user(seed, 0, 0.5);
        (0..30)
            .map(|_| g.next_message(Role::Inbox).bytes)
            .collect::<Vec<_>>()
    };
    assert_eq!(stream(11), stream(11));
    assert_ne!(stream(11), stream(12));
}
