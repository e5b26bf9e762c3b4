//! The whole server per state (not authenticated, authenticated, selected): the input's
//! first byte picks the state, the rest is what the client sends over an in-memory
//! connection to a real session (see `maildex_imap::fuzzing`).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use maildex_imap::fuzzing::Harness;

static HARNESS: OnceLock<Harness> = OnceLock::new();

fuzz_target!(|data: &[u8]| HARNESS.get_or_init(Harness::new).run(data));
