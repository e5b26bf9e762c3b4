#!/usr/bin/env bash
# The side-by-side benchmarks in one command, from a fresh Debian machine with Rust:
#   bash scripts/bench.sh --quick     # a few minutes
#   bash scripts/bench.sh --full      # the issue's sizes (about 7 minutes)
#   bash scripts/bench.sh --smoke     # seconds; what scripts/test-all.sh runs
# Installs what the reference side needs when it is missing (Debian's Dovecot IMAP and
# LMTP servers, strace), quietly; Dovecot is then started by hand by the benchmark, on
# loopback ports with its own config, never as a system service. Other arguments go to
# `maildex-bench all` (see docs/BENCHMARKS.md).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(dovecot-core dovecot-imapd dovecot-lmtpd strace fonts-dejavu-core)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "installing: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    if command -v doveadm >/dev/null; then doveadm stop >/dev/null 2>&1 || true; fi
fi
cargo build --release -q --locked -p maildex -p maildex-benches
exec ./target/release/maildex-bench all "$@"
