//! maildex's integration tests in one binary (`cargo test -p maildex-tests --test it`),
//! grouped by area: `imap` (sessions against the in-process daemon, real clients),
//! `lmtp` (deliveries, Postfix, kills under load) and `system` (processes, signals,
//! listeners, logs, fault injection). Tests run in parallel threads of this one process:
//! a test that changes process-wide state takes care of it itself (docs/ARCHITECTURE.md,
//! "Tests"). The store's own tests are in crates/store/tests; the attacks that measure
//! this process's memory are in tests/hostile, a binary of their own.

#[path = "../support/mod.rs"]
mod support;

mod imap {
    mod concurrency;
    mod condstore;
    mod conformance;
    mod dovecot_condstore;
    mod dovecot_search;
    mod dovecot_sort;
    mod edges;
    mod extensions;
    mod fetch;
    mod large_bodies;
    mod limits;
    mod listing;
    mod login;
    mod mailboxes;
    mod maildirsize;
    mod mime;
    mod protocol;
    mod proxy_protocol;
    mod python;
    mod quota;
    mod real_clients;
    mod reconnect;
    mod resync_rescan;
    mod roundcube;
    mod search_index;
    mod search_text;
    mod sessions;
    mod sort;
    mod special_use;
    mod store_race;
    mod text_indexer;
}

mod lmtp {
    mod bad_input;
    mod crash;
    mod delivery;
    mod postfix;
    mod postfix_auth;
    mod quota_warning;
}

mod system {
    mod crash_points;
    mod ldap_users;
    mod listeners;
    mod log_secrets;
    mod logging;
    mod postfix_sockets;
    mod signals;
    mod sql_users;
    mod users;
}
