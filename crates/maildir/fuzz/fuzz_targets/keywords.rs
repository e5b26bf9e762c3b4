//! Any bytes as `dovecot-keywords`: lookups and the write/read round trip
//! (see `maildex_maildir::fuzzing::keywords`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| maildex_maildir::fuzzing::keywords(data));
