//! One command line read by imap-codec and by us: where both accept it, they must
//! understand the same command (see `tests/support/oracle_check.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/support/oracle_check.rs"]
mod oracle_check;

fuzz_target!(|data: &[u8]| oracle_check::differential(data));
