//! One LMTP command line into the command parser: no panic, and accepted
//! addresses round-trip (see `maildex_lmtp_proto::fuzzing::command`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| maildex_lmtp_proto::fuzzing::command(data));
