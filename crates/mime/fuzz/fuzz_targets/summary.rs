//! Any bytes as a message file into the summary: offsets, sizes, header
//! sections and part numbers against slices of the input (see
//! `maildex_mime::fuzzing::summary`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| maildex_mime::fuzzing::summary(data));
