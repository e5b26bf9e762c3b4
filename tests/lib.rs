//! Integration tests for maildex (see tests/*.rs).
