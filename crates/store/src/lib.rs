//! maildex-store
