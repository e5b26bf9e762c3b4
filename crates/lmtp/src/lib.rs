//! maildex-lmtp: the LMTP server.
