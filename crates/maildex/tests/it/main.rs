//! The tests of the shipped binary, in one test binary (`cargo test -p maildex --test it`):
//! each runs `maildex` (CARGO_BIN_EXE_maildex) as a child process, as root where it needs
//! to (owners and modes, dropping root, the README's setup), so none changes the state of
//! this process.

mod mail_user;
#[path = "../../../../tests/support/postfix.rs"]
mod postfix_support;

mod admin_files;
mod cli;
mod drop_root;
mod maildir_links;
mod permission_errors;
mod readme_setup;
mod user_owners;
mod users_reload;
