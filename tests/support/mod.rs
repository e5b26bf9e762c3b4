//! What the integration tests share, for both test binaries (tests/it and tests/hostile):
//! the daemon in-process (`daemon`) or as a `maildex serve` process (`process`), the IMAP
//! client whose every response imap-codec parses (`imap`), the LMTP client (`lmtp`),
//! Postfix (`postfix`), private SQL and LDAP directories (`sqldb`, `ldapdir`), and the attackers' tools (`hostile`).
// each binary uses its own part
#![allow(dead_code)]

pub mod daemon;
pub mod hostile;
pub mod imap;
pub mod ldapdir;
pub mod lmtp;
pub mod postfix;
pub mod process;
pub mod sqldb;
