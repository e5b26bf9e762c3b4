//! Micro benchmark for `summarize` (not a test; nothing asserts on time).
//!
//! `cargo run --release -p maildex-mime --example bench_summarize [FILE...]`
//! times summarize + BODYSTRUCTURE + ENVELOPE rendering on a generated
//! ~10 kB multipart message and on each FILE given (e.g. the golden .eml
//! files).

use std::hint::black_box;
use std::time::Instant;

use maildex_mime::{summarize, write_body_structure, write_envelope};

fn sample() -> Vec<u8> {
    let mut m = String::from(
        "Return-Path: <a@example.org>\nReceived: from x by y; Mon, 1 Jan 2024 00:00:00 +0000\n\
         From: Alice <a@example.org>\nTo: Bob <b@example.net>, c@example.net\n\
         Subject: report\nDate: Mon, 1 Jan 2024 00:00:00 +0000\nMessage-ID: <x@example.org>\n\
         MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"outer\"\n\n--outer\n\
         Content-Type: multipart/alternative; boundary=\"alt\"\n\n--alt\n\
         Content-Type: text/plain; charset=utf-8\n\n",
    );
    for i in 0..40 {
        m.push_str(&format!(
            "line {i} of the plain text part, some words here\n"
        ));
    }
    m.push_str("--alt\nContent-Type: text/html; charset=utf-8\n\n");
    for i in 0..40 {
        m.push_str(&format!("<p>line {i} of the html part, some words</p>\n"));
    }
    m.push_str("--alt--\n--outer\nContent-Type: application/pdf; name=a.pdf\n");
    m.push_str("Content-Transfer-Encoding: base64\n\n");
    for _ in 0..60 {
        m.push_str("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAx\n");
    }
    m.push_str("--outer--\n");
    m.into_bytes()
}

fn time(name: &str, msg: &[u8]) {
    let iters = (1_000_000 / (msg.len() + 1000)).clamp(10, 5_000);
    let mut out = Vec::new();
    // best of several rounds: the machine may be busy
    let mut best = std::time::Duration::MAX;
    for _ in 0..9 {
        let start = Instant::now();
        for _ in 0..iters {
            let s = summarize(black_box(msg));
            out.clear();
            write_body_structure(&s.root, true, &mut out);
            write_envelope(&s.envelope, &mut out);
            black_box(&out);
        }
        best = best.min(start.elapsed() / iters as u32);
    }
    println!(
        "{name}: {} bytes, {best:?} per message (best round)",
        msg.len()
    );
}

fn main() {
    time("generated", &sample());
    for path in std::env::args().skip(1) {
        match std::fs::read(&path) {
            Ok(data) => time(&path, &data),
            Err(e) => eprintln!("{path}: {e}"),
        }
    }
}
