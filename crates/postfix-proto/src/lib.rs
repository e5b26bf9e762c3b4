//! maildex-postfix-proto: the two protocols postfix uses to ask maildex about its users,
//! as pure code without I/O (the daemon's `maildex-postfix` crate serves them):
//!
//! - [`auth`]: the server side of the Dovecot authentication protocol 1.x, which postfix's
//!   `smtpd_sasl_type = dovecot` speaks (`xsasl_dovecot_server.c`), with the PLAIN and
//!   LOGIN mechanisms;
//! - [`socketmap`]: postfix's socketmap table protocol (socketmap_table(5)): netstring
//!   requests `name key`, answers `OK value`, `NOTFOUND `, `TEMP reason`, `PERM reason`.

#![warn(missing_docs)]

pub mod auth;
pub mod socketmap;
