#!/usr/bin/env bash
# Runs every test of maildex, from a fresh Debian machine with Rust:
#   1. installs what the tests need, quietly, skipping what is already there;
#   2. checks formatting and lints (warnings are errors);
#   3. runs the whole test suite and a seconds-long smoke run of the benchmarks.
# .ci/run calls exactly this script.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages the tests use: Dovecot's doveadm, to check that Dovecot reads the
# Maildirs we write (UIDs, flags, keywords, folders) and that we read Dovecot's.
source scripts/packages.sh
ensure_packages adduser openssl dovecot-core dovecot-imapd dovecot-lmtpd strace postfix isync mutt tmux offlineimap3 haproxy
# PostgreSQL and MariaDB for the SQL user-directory tests (tests/support/sqldb.rs starts
# private servers in scratch folders on loopback; no system instance is used)
ensure_packages postgresql-15 mariadb-server mariadb-client
# OpenLDAP for the LDAP user-directory tests (tests/support/ldapdir.rs starts a private
# slapd in a scratch folder on loopback; the tools add users and make {SSHA} hashes)
ensure_packages slapd ldap-utils
# Roundcube in headless Chromium (tests/it/imap/roundcube.rs): Debian's Roundcube with its
# SQLite backend, PHP's built-in server, Chromium and its driver
ensure_packages roundcube roundcube-core roundcube-sqlite3 php-cli php-sqlite3 sqlite3 chromium chromium-driver fonts-dejavu-core
# Python packages: imapclient for the IMAP client test (tests/it/imap/imap_client.py),
# selenium to drive Chromium; Debian's own Python refuses plain pip installs (PEP 668),
# hence the second form
for module in imapclient selenium; do
    if ! python3 -c "import $module" 2>/dev/null; then
        echo "installing: $module (pip)"
        python3 -m pip install -q "$module" 2>/dev/null ||
            python3 -m pip install -q --break-system-packages "$module"
    fi
done

echo "== cargo fmt --check"
cargo fmt --all --check
echo "== cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --locked -q -- -D warnings
echo "== layer rules (dependency graph)"
bash scripts/check-layers.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "== cargo test"
cargo test --workspace --locked 2>&1 | tee -a "$log"
echo "== tests against a real Dovecot (ignored by plain cargo test: they need dovecot-core)"
cargo test --workspace --locked -- --ignored 2>&1 | tee -a "$log"
echo "== benchmark smoke run (rebuild on 300 small messages)"
cargo run -q --locked -p maildex-benches -- rebuild --messages 300 --scale 0.1
echo "== benchmark smoke run (maildex and Dovecot side by side on 300 small messages)"
cargo build -q --locked -p maildex
cargo run -q --locked -p maildex-benches -- all --smoke
# one closing line with the totals of both test runs
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
