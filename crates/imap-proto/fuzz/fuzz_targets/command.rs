//! One whole command into the typed command parser: tag, limits and final
//! CRLF invariants (see `maildex_imap_proto::fuzzing::command`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| maildex_imap_proto::fuzzing::command(data));
