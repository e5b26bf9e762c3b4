#!/usr/bin/env bash
# Runs every test of maildex, from a fresh Debian machine with Rust:
#   1. installs what the tests need, quietly, skipping what is already there;
#   2. checks formatting and lints (warnings are errors);
#   3. runs the whole test suite and a seconds-long smoke run of the benchmarks.
# .ci/run calls exactly this script.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages the tests use. (None yet: the store and index tests need only cargo.
# The IMAP/LMTP issues add postfix, mutt, isync here.)
apt_packages=()
missing=()
for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "installing: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

echo "== cargo fmt --check"
cargo fmt --all --check
echo "== cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --locked -q -- -D warnings
echo "== cargo test"
cargo test --workspace --locked
echo "== benchmark smoke run (rebuild on 300 small messages)"
cargo run -q --locked -p maildex-benches -- rebuild --messages 300 --scale 0.1
