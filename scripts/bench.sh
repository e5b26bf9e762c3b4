#!/usr/bin/env bash
# The side-by-side benchmarks in one command, from a fresh Debian machine with Rust:
#   bash scripts/bench.sh --quick     # a few minutes
#   bash scripts/bench.sh --full      # the issue's sizes (about 7 minutes)
#   bash scripts/bench.sh --smoke     # seconds; what scripts/test-all.sh runs
# Installs what the reference side needs when it is missing (Debian's Dovecot IMAP and
# LMTP servers, the fts-xapian plugin `maildex-bench search --xapian` loads, strace),
# quietly; Dovecot is then started by hand by the benchmark, on loopback ports with its
# own config, never as a system service. Other arguments go to
# `maildex-bench all` (see docs/BENCHMARKS.md).
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/packages.sh
ensure_packages dovecot-core dovecot-imapd dovecot-lmtpd dovecot-fts-xapian strace fonts-dejavu-core
# the seed benchmark (`maildex-bench seed`): Dovecot's SQL and LDAP user lookups, and the
# MariaDB and slapd it starts privately on loopback
ensure_packages dovecot-mysql dovecot-ldap mariadb-server mariadb-client slapd ldap-utils
cargo build --release -q --locked -p maildex -p maildex-benches
exec ./target/release/maildex-bench all "$@"
