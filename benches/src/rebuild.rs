//! `maildex-bench rebuild`: index build throughput (messages/s, from a warm page cache) and
//! index size (bytes per message, share of the mail's bytes) on a generated corpus.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use maildex_store::{StoreOptions, UserStore};

/// Reads every file once so the measurement starts from a warm page cache.
fn warm(p: &Path) {
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let path = e.path();
            if path.is_dir() {
                warm(&path);
            } else {
                let _ = std::fs::read(&path);
            }
        }
    }
}

struct Sizes {
    records: usize,
    hot: usize,
    headers: usize,
    envelope: usize,
    bodystructure: usize,
}

fn record_sizes(store: &UserStore) -> Result<Sizes> {
    Ok(store.index().read(|r| {
        let mut s = Sizes {
            records: 0,
            hot: 0,
            headers: 0,
            envelope: 0,
            bodystructure: 0,
        };
        for (id, _) in r.mailboxes()? {
            for (uid, m) in r.messages(id)? {
                s.records += 1;
                s.hot += m.cached.hot_headers.len();
                s.envelope += m.cached.envelope.len();
                s.bodystructure += m.cached.body_structure.len() + m.cached.body.len();
                s.headers += r.headers(id, uid)?.map_or(0, |h| h.len());
            }
        }
        Ok(s)
    })?)
}

pub fn rebuild(messages: usize, seed: u64, scale: f64, dir: Option<PathBuf>) -> Result<()> {
    let tmp;
    let root = match dir {
        Some(d) => d,
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let spec = maildex_corpus::Spec {
        seed,
        users: 1,
        messages_per_user: messages,
        folders: true,
        size_scale: scale,
    };
    let t = Instant::now();
    let stats =
        maildex_corpus::generate(&spec, &root.join("mail")).context("generating the corpus")?;
    println!(
        "corpus: {} messages, {:.1} MB, sizes p50 {} B, p90 {} B, p99 {} B, max {} B (generated in {:.1}s)",
        stats.messages,
        stats.bytes as f64 / 1e6,
        stats.sizes.p50,
        stats.sizes.p90,
        stats.sizes.p99,
        stats.sizes.max,
        t.elapsed().as_secs_f64()
    );
    let maildir = maildex_corpus::user_maildir(&root.join("mail"), 0);
    let index_dir = root.join("index");
    warm(&maildir);

    let store = UserStore::open(&maildir, &index_dir, StoreOptions::default())?;
    let t = Instant::now();
    let first = store.sync_all()?;
    let first_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let again = store.rebuild(&mut |_| {})?;
    let rebuild_secs = t.elapsed().as_secs_f64();
    // the full text, written after the listing records (as `maildex index rebuild` does)
    let text = store.index_all_pending_text(&mut |_| {})?;
    let t = Instant::now();
    let idle = store.sync_all()?;
    let idle_secs = t.elapsed().as_secs_f64();

    let (_, used) = store.index().usage();
    for s in store.index().read(|r| r.page_stats())? {
        println!(
            "  db {}: {} entries, {} leaf + {} overflow + {} branch pages",
            s.name, s.entries, s.leaf_pages, s.overflow_pages, s.branch_pages
        );
    }
    let sizes = record_sizes(&store)?;
    drop(store);
    let (before, after) = maildex_index::compact(&index_dir)?;
    let n = first.added.max(1) as f64;
    println!(
        "first index (no index yet): {} messages in {first_secs:.2}s = {:.0} messages/s",
        first.added,
        first.added as f64 / first_secs
    );
    println!(
        "rebuild (index exists):     {} messages in {rebuild_secs:.2}s = {:.0} messages/s",
        again.sync.added,
        again.sync.added as f64 / rebuild_secs
    );
    println!(
        "then its full text:         {} messages in {:.2}s = {:.0} messages/s",
        text.written,
        text.elapsed.as_secs_f64(),
        text.written as f64 / text.elapsed.as_secs_f64().max(1e-9)
    );
    println!(
        "sync with nothing changed:  {} mailboxes in {:.3} ms",
        idle.mailboxes,
        idle_secs * 1e3
    );
    println!(
        "index size: {:.1} MB used pages ({:.0} B/message), {:.1} MB file after compact ({:.0} B/message) = {:.1}% of the mail's {:.1} MB",
        used as f64 / 1e6,
        used as f64 / n,
        after as f64 / 1e6,
        after as f64 / n,
        after as f64 * 100.0 / stats.bytes as f64,
        stats.bytes as f64 / 1e6
    );
    println!("  (file before compact {:.1} MB)", before as f64 / 1e6);
    let r = sizes.records.max(1) as f64;
    println!(
        "per message, before compression: hot headers {:.0} B, header blocks {:.0} B, envelope {:.0} B, body+bodystructure {:.0} B",
        sizes.hot as f64 / r,
        sizes.headers as f64 / r,
        sizes.envelope as f64 / r,
        sizes.bodystructure as f64 / r
    );
    deliveries(&maildir, &root, messages.min(2000))?;
    println!("command: maildex-bench rebuild --messages {messages} --seed {seed} --scale {scale}");
    Ok(())
}

/// Delivers corpus messages one at a time through the store's delivery path (fsync on, as
/// in production) into a fresh user: the steady state in which most indexes are written.
fn deliveries(corpus: &Path, root: &Path, n: usize) -> Result<()> {
    let mut files = Vec::new();
    collect(corpus, &mut files);
    files.sort();
    files.truncate(n);
    let store = UserStore::open(
        &root.join("delivered/Maildir"),
        &root.join("delivered/index"),
        StoreOptions::default(),
    )?;
    let (mut bytes, t) = (0u64, Instant::now());
    for f in &files {
        let msg = std::fs::read(f)?;
        bytes += msg.len() as u64;
        store.deliver("INBOX", &mut &msg[..], &Default::default())?;
    }
    let secs = t.elapsed().as_secs_f64();
    let (_, used) = store.index().usage();
    println!(
        "one at a time through deliver (fsync on): {} messages in {secs:.2}s = {:.0} messages/s; index {:.0} B/message = {:.1}% of the mail's bytes",
        files.len(),
        files.len() as f64 / secs,
        used as f64 / files.len().max(1) as f64,
        used as f64 * 100.0 / bytes.max(1) as f64
    );
    Ok(())
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                collect(&p, out);
            } else if p
                .parent()
                .is_some_and(|d| d.ends_with("cur") || d.ends_with("new"))
            {
                out.push(p);
            }
        }
    }
}
