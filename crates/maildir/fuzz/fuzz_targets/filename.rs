//! Any UTF-8 as a Maildir file name: the parse/format round trip
//! (see `maildex_maildir::fuzzing::filename`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| maildex_maildir::fuzzing::filename(data));
