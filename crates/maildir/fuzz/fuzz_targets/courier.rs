//! Any bytes as `courierimapuiddb`: shape and the migration round trip
//! (see `maildex_maildir::fuzzing::courier`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| maildex_maildir::fuzzing::courier(data));
