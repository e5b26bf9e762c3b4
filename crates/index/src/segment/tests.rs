use super::*;

#[test]
fn small_segments_stay_raw_and_full_ones_are_compressed() {
    let small = Entries((1..4).map(|u| (u, vec![b'a'; 100])).collect());
    let full = Entries(
        (1..=SEG as u32)
            .map(|u| (u, b"Received: from x by y\n".repeat(20)))
            .collect(),
    );
    let (s, f) = (
        encode(&small.0, Packing::Zstd(LISTING_LEVEL)).unwrap(),
        encode(&full.0, Packing::Zstd(LISTING_LEVEL)).unwrap(),
    );
    assert_eq!(s[0], RAW);
    assert_eq!(f[0], ZSTD);
    assert!(f.len() < 16 * 440 / 4, "{} bytes", f.len());
    assert_eq!(decode(&s, &"t").unwrap(), small);
    assert_eq!(decode(&f, &"t").unwrap(), full);
    // a filling segment over RAW_MAX is compressed, its count readable up front
    let big = Entries(
        (1..=200)
            .map(|u| (u, b"the same line of text\n".repeat(10)))
            .collect(),
    );
    let mut big15 = big.clone();
    big15.0.truncate(SEG - 1);
    big15.0.iter_mut().for_each(|e| e.1 = e.1.repeat(20));
    let b = encode(&big15.0, Packing::Zstd(LISTING_LEVEL)).unwrap();
    assert_eq!(b[0], FILLING_ZSTD);
    assert_eq!(read_varint(&b[1..]), Some(SEG - 1));
    assert!(b.len() < RAW_MAX / 4, "{} bytes", b.len());
    assert_eq!(decode(&b, &"t").unwrap(), big15);
    assert_eq!(
        encode(&big.0, Packing::Zstd(LISTING_LEVEL)).unwrap()[0],
        ZSTD
    );
}

/// Frames made one after another on one thread (its compression context reused) each
/// hold their own input after the kind and length; a frame written by another zstd
/// context and level reads the same.
#[test]
fn frames_from_a_reused_context_read_back() {
    let inputs: [Vec<u8>; 3] = [
        b"Subject: hello\r\n".repeat(200),
        Vec::new(),
        (0..5000u32).flat_map(|i| i.to_le_bytes()).collect(),
    ];
    // the listing's and the text's levels in turn, each level's context reused
    for level in [LISTING_LEVEL, TEXT_LEVEL, LISTING_LEVEL] {
        for (i, plain) in inputs.iter().enumerate() {
            let framed = zstd_frame(ZSTD, plain, level).unwrap();
            assert_eq!(framed[0], ZSTD);
            assert_eq!(&framed[1..5], &(plain.len() as u32).to_be_bytes());
            assert_eq!(&zstd_unframe(&framed[1..], &i).unwrap(), plain);
        }
    }
    COMPRESSORS.with(|c| assert_eq!(c.borrow().len(), 2, "one context per level"));
    let mut other = vec![ZSTD];
    other.extend_from_slice(&(inputs[0].len() as u32).to_be_bytes());
    other.extend_from_slice(&zstd::bulk::compress(&inputs[0], 19).unwrap());
    assert_eq!(zstd_unframe(&other[1..], &"level 19").unwrap(), inputs[0]);
}

#[test]
fn entries_keep_the_derived_wire_format() {
    // indexes written before Entries was serialized by hand must still read
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Derived(Vec<(u32, Vec<u8>)>);
    let items: Vec<(u32, Vec<u8>)> = vec![(1, vec![]), (7, vec![0, 255, 3]), (300, vec![9; 200])];
    let old = crate::schema::encode(&Derived(items.clone())).unwrap();
    assert_eq!(crate::schema::encode(&Entries(items.clone())).unwrap(), old);
    assert_eq!(
        crate::schema::decode::<Entries>(&old, &"t").unwrap(),
        Entries(items)
    );
}

/// Calls `f` with a fresh env and two columns in it: `z` compresses full segments, `r`
/// does not.
fn with_columns(f: impl FnOnce(&heed::Env<WithoutTls>, Segments<'_>, Segments<'_>)) {
    let dir = tempfile::tempdir().unwrap();
    let env = unsafe {
        heed::EnvOpenOptions::new()
            .read_txn_without_tls()
            .max_dbs(2)
            .map_size(64 << 20)
            .open(dir.path())
    }
    .unwrap();
    let (z, r) = env
        .create_databases_and_commit(env.write_txn().unwrap(), |dbo, w| {
            Ok::<_, heed::Error>(heed::CommitOrAbort::<_, ()>::Commit((
                dbo.create_database::<Bytes, Bytes>(w, Some("z"))?,
                dbo.create_database::<Bytes, Bytes>(w, Some("r"))?,
            )))
        })
        .unwrap()
        .unwrap_commit();
    let z = Segments {
        db: z,
        name: "z",
        packing: Packing::Zstd(LISTING_LEVEL),
    };
    let r = Segments {
        db: r,
        name: "r",
        packing: Packing::Raw,
    };
    f(&env, z, r)
}

/// The pages a column's database takes (leaf, branch and overflow).
fn pages(col: &Segments, t: &RoTxn<WithoutTls>) -> usize {
    let st = col.db.stat(t).unwrap();
    st.leaf_pages + st.branch_pages + st.overflow_pages
}

/// Data like a listing column's: a few hundred bytes a message, compressing about 3x.
fn listing_like(uid: u32) -> Vec<u8> {
    let words = [
        "invoice",
        "meeting",
        "Re:",
        "next week",
        "report",
        "Grüße",
        "lunch",
    ];
    let mut out = format!("From: user{}@example.org\nSubject: ", uid % 37).into_bytes();
    let mut x = uid.wrapping_mul(2_654_435_761);
    for _ in 0..(20 + uid % 40) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        out.extend_from_slice(words[x as usize % words.len()].as_bytes());
        out.extend_from_slice(format!(" {} ", x % 1000).as_bytes());
    }
    out
}

/// How a column's data is written in [`segments_fill_their_pages_in_bulk_and_one_at_a_time`].
#[derive(Clone, Copy, Debug)]
enum Layout {
    /// In one batch, as a rebuild writes it.
    Bulk,
    /// One message at a time, as deliveries are.
    OneByOne,
    /// Segments of sixteen, as written before segments filled their pages.
    Sixteens,
}

/// Writes 2,000 messages' data into both columns of a fresh env as `layout` says,
/// checks that they read back and that every segment holds 1 or [`SEG`] to
/// [`MAX_SEG`] entries, and returns the pages of each column.
fn pages_of(layout: Layout) -> [usize; 2] {
    let mut out = [0; 2];
    with_columns(|env, z, r| {
        let uids = 1..=2_000u32;
        let mut w = env.write_txn().unwrap();
        for col in [&z, &r] {
            match layout {
                Layout::Bulk => {
                    let all = uids.clone().map(|u| (u, listing_like(u))).collect();
                    col.put_many(&mut w, 1, all).unwrap();
                }
                Layout::OneByOne => {
                    for u in uids.clone() {
                        col.put_many(&mut w, 1, vec![(u, listing_like(u))]).unwrap();
                    }
                }
                Layout::Sixteens => {
                    for chunk in uids.clone().collect::<Vec<_>>().chunks(SEG) {
                        let items: Vec<_> = chunk.iter().map(|&u| (u, listing_like(u))).collect();
                        let value = encode(&items, col.packing).unwrap();
                        let key = raw_msg_key(1, chunk[0]);
                        col.db.put(&mut w, &key[..], &value).unwrap();
                    }
                }
            }
        }
        w.commit().unwrap();
        let t = env.read_txn().unwrap();
        for (i, col) in [&z, &r].into_iter().enumerate() {
            let mut seen = Vec::new();
            col.for_each_ref(&t, 1, 1..=u32::MAX, |uid, d| {
                seen.push((uid, d.to_vec()));
                Ok(ControlFlow::Continue(()))
            })
            .unwrap();
            let want: Vec<_> = uids.clone().map(|u| (u, listing_like(u))).collect();
            assert!(seen == want, "{} {layout:?} reads back", col.name);
            for item in col.db.iter(&t).unwrap() {
                let n = decode(item.unwrap().1, &"t").unwrap().0.len();
                assert!(n == 1 || (SEG..=MAX_SEG).contains(&n), "{n} entries");
            }
            out[i] = pages(col, &t);
        }
    });
    out
}

#[test]
fn segments_fill_their_pages_in_bulk_and_one_at_a_time() {
    let fixed = pages_of(Layout::Sixteens);
    for layout in [Layout::Bulk, Layout::OneByOne] {
        let filled = pages_of(layout);
        // compressed segments of sixteen (about 2 KB) left a third of their pages
        // empty, raw ones (about 5 KB, two pages) a fifth
        for (name, (f, s), (most, of)) in [
            ("z", (filled[0], fixed[0]), (3, 4)),
            ("r", (filled[1], fixed[1]), (7, 8)),
        ] {
            assert!(
                f * of <= s * most,
                "{name} {layout:?}: {f} pages against {s} in segments of sixteen"
            );
        }
    }
}

#[test]
fn a_column_of_raw_full_segments_appends_past_them_and_reads_in_place() {
    with_columns(a_column_appends_past_full_segments);
}

fn a_column_appends_past_full_segments(
    env: &heed::Env<WithoutTls>,
    z: Segments<'_>,
    r: Segments<'_>,
) {
    let data = |uid: u32| format!("subject of message {uid}").into_bytes();
    // delivered one at a time: a full segment, which the next sixteen grow (they fit
    // in its page), then eight of one message each
    for uid in 1..=40 {
        let mut w = env.write_txn().unwrap();
        for col in [&z, &r] {
            col.put_many(&mut w, 1, vec![(uid, data(uid))]).unwrap();
        }
        w.commit().unwrap();
    }
    let t = env.read_txn().unwrap();
    let kinds = |col: &Segments| -> Vec<(u8, usize)> {
        col.db
            .iter(&t)
            .unwrap()
            .map(|i| {
                let (_, v) = i.unwrap();
                (v[0], decode(v, &"t").unwrap().0.len())
            })
            .collect()
    };
    let mut want = vec![(ZSTD, 2 * SEG)];
    want.extend([(RAW, 1); 8]);
    assert_eq!(kinds(&z), want);
    want[0] = (RAW, 2 * SEG);
    assert_eq!(kinds(&r), want);
    // the tail a delivery merges holds the eight, not the full raw segments before
    assert_eq!(r.raw_tail(&t, 1).unwrap().len(), 8);
    // in place or decoded, compressed or not: the same entries, from the segment
    // holding the first UID asked for on
    for col in [&z, &r] {
        let mut seen = Vec::new();
        col.for_each_ref(&t, 1, 5..=37, |uid, d| {
            seen.push((uid, d.to_vec()));
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
        assert_eq!(seen, (5..=37).map(|u| (u, data(u))).collect::<Vec<_>>());
        // a sparse set, with UIDs never stored (0, 41, 50) among them
        let asked: Vec<crate::Uid> = [0, 1, 2, 15, 16, 17, 33, 40, 41, 50]
            .into_iter()
            .map(crate::Uid)
            .collect();
        let mut seen = Vec::new();
        col.for_uids(&t, 1, &asked, |uid, d| {
            seen.push((uid, d.to_vec()));
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
        let want: Vec<_> = [1, 2, 15, 16, 17, 33, 40]
            .into_iter()
            .map(|u| (u, data(u)))
            .collect();
        assert_eq!(seen, want);
    }
    drop(t);
    // a message gone from the middle of a full segment: asked for, not found, and the
    // UIDs after it in that segment and the next still are
    let mut w = env.write_txn().unwrap();
    for col in [&z, &r] {
        assert!(col.remove(&mut w, 1, 20).unwrap());
    }
    w.commit().unwrap();
    let t = env.read_txn().unwrap();
    let asked: Vec<crate::Uid> = [19, 20, 21, 32, 33].into_iter().map(crate::Uid).collect();
    for col in [&z, &r] {
        let mut seen = Vec::new();
        col.for_uids(&t, 1, &asked, |uid, d| {
            seen.push((uid, d.to_vec()));
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
        let want: Vec<_> = [19, 21, 32, 33].into_iter().map(|u| (u, data(u))).collect();
        assert_eq!(seen, want, "{}", col.name);
    }
}

#[test]
fn entries_read_in_place_stop_at_corrupt_bytes() {
    let e = Entries(vec![(3, b"abc".to_vec()), (300, vec![])]);
    let plain = crate::schema::encode(&e).unwrap();
    let all: Vec<_> = EntryIter::new(&plain).collect();
    assert_eq!(all, vec![Some((3, &b"abc"[..])), Some((300, &b""[..]))]);
    let cut: Vec<_> = EntryIter::new(&plain[..plain.len() - 2]).collect();
    assert_eq!(cut, vec![Some((3, &b"abc"[..])), None]);
    assert_eq!(EntryIter::new(&[0x80]).collect::<Vec<_>>(), vec![None]);
    // a UID over 32 bits
    assert_eq!(
        EntryIter::new(&[1, 0xff, 0xff, 0xff, 0xff, 0x7f, 0]).next(),
        Some(None)
    );
}

#[test]
fn corrupt_segments_are_errors() {
    assert!(decode(&[], &"t").is_err());
    assert!(decode(&[7, 1, 2], &"t").is_err());
    assert!(decode(&[ZSTD, 0, 0, 0, 9, 1, 2], &"t").is_err());
    assert!(decode(&[FILLING_ZSTD, 3, 0, 0, 0, 9, 1, 2], &"t").is_err());
    assert!(decode(&[FILLING_ZSTD, 0x80], &"t").is_err());
}
