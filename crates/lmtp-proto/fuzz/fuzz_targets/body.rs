//! DATA / BDAT body decoding: chunked equals whole equals the line-by-line
//! reference (see `maildex_lmtp_proto::fuzzing::body`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| maildex_lmtp_proto::fuzzing::body(data));
