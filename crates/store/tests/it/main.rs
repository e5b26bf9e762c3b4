//! The store's own tests, in one binary: they call `maildex_store` directly (no daemon, no
//! socket) on scratch Maildirs, alone or with other tools (Dovecot's doveadm) changing the
//! same files. `cargo test -p maildex-store --test it`; the ones needing Dovecot or root
//! are ignored by default (`-- --ignored`).

mod support;

mod bad_input;
mod cached_headers;
mod concurrent_stores;
mod deliver;
mod dovecot_maildir;
mod flag_column;
mod full_disk;
mod races;
mod sort_keys;
mod store_ops;
mod store_props;
mod sync_stamps;
mod sync_watch;
mod text_index;
