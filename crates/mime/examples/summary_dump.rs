//! Prints what maildex-mime answers for each message file given, in the record format of the
//! golden `.expected` files (`== KEY LENGTH`, the bytes, a newline), each file starting with
//! `== FILE <file name>`: RFC822.SIZE, ENVELOPE, BODY and BODYSTRUCTURE. Used by
//! `tests/golden/dovecot_diff.py` to compare a whole Maildir with Dovecot.
//!
//! `cargo run -p maildex-mime --example summary_dump -- FILE...`

use std::io::Write;
use std::path::Path;

use maildex_mime::{summarize, write_body_structure, write_envelope};

fn record(out: &mut impl Write, key: &str, value: &[u8]) -> std::io::Result<()> {
    writeln!(out, "== {key} {}", value.len())?;
    out.write_all(value)?;
    out.write_all(b"\n")
}

fn main() -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for path in std::env::args().skip(1) {
        let msg = std::fs::read(&path)?;
        let s = summarize(&msg);
        let name = Path::new(&path)
            .file_name()
            .map_or_else(|| path.clone(), |n| n.to_string_lossy().into_owned());
        writeln!(out, "== FILE {name}")?;
        record(&mut out, "RFC822.SIZE", s.vsize.to_string().as_bytes())?;
        let mut v = Vec::new();
        write_envelope(&s.envelope, &mut v);
        record(&mut out, "ENVELOPE", &v)?;
        for (key, extended) in [("BODY", false), ("BODYSTRUCTURE", true)] {
            v.clear();
            write_body_structure(&s.root, extended, &mut v);
            record(&mut out, key, &v)?;
        }
    }
    out.flush()
}
