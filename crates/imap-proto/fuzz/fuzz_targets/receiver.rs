//! Arbitrary bytes in arbitrary chunkings into the receiver: no panic, the
//! buffer stays within its bound, APPEND data adds up, and the inputs do
//! not depend on the chunking (see `maildex_imap_proto::fuzzing::receiver`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| maildex_imap_proto::fuzzing::receiver(data));
