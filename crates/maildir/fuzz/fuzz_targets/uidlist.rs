//! Any bytes as `dovecot-uidlist`: shape, write/read round trip, and
//! `scan_for_append` against the full parse
//! (see `maildex_maildir::fuzzing::uidlist`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| maildex_maildir::fuzzing::uidlist(data));
