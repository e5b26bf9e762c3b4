//! maildex's IMAP server (RFC 3501 / RFC 9051 and the extensions listed in the README):
//! listeners, TLS, and sessions whose listings are answered from the LMDB index.

#![warn(missing_docs)]

pub mod context;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod search;
pub mod server;
mod session;
pub mod sort;
pub mod stream;
pub mod thread;
pub mod tls;
pub mod view;
