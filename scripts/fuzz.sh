#!/usr/bin/env bash
# Runs every cargo-fuzz target for SECONDS_PER_TARGET seconds (default 60),
# one at a time on one core, and prints the executions, exec/s and corpus
# size of each. docs/FUZZING.md lists the targets and the recorded run.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# TARGET is `crate/target` (e.g. `mime/summary`); without one, all run.
# Needs the nightly toolchain; installs cargo-fuzz when missing. New inputs
# go to $FUZZ_WORK (default target/fuzz-work/<crate>/<target>), never into
# the committed corpus (crates/<crate>/fuzz/corpus/<target>/, read as
# seeds). A crash leaves its input in crates/<crate>/fuzz/artifacts/<target>/;
# once fixed, copy it into the corpus so tests/fuzz_corpus.rs replays it.
# Not part of scripts/test-all.sh: CI replays the corpus on stable instead.
set -euo pipefail

secs=${1:-60}
shift || true
root=$(cd "$(dirname "$0")/.." && pwd)
target_dir=${CARGO_TARGET_DIR:-$root/target}/fuzz
work=${FUZZ_WORK:-$root/target/fuzz-work}

all=(imap-proto/receiver imap-proto/command imap-proto/oracle lmtp-proto/command lmtp-proto/body
     mime/summary maildir/uidlist maildir/keywords maildir/courier maildir/filename
     imap/session)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo install --locked cargo-fuzz
fi

summary=()
failed=0
for t in "${targets[@]}"; do
    crate=${t%%/*}
    name=${t#*/}
    dir=$root/crates/$crate/fuzz
    mkdir -p "$work/$crate/$name"
    log=$work/$crate/$name.log
    echo "== $t: ${secs}s"
    status=ok
    (cd "$dir" && cargo +nightly fuzz run --target-dir "$target_dir/$crate" "$name" \
        "$work/$crate/$name" "corpus/$name" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1) \
        >"$log" 2>&1 || { status="FAILED (see $log)"; failed=1; }
    fstat() { grep -o "stat::$1: *[0-9]*" "$log" | grep -o '[0-9]*$' | tail -1 || true; }
    execs=$(fstat number_of_executed_units)
    rate=$(fstat average_exec_per_sec)
    corpus=$(grep -o 'corp: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
    summary+=("$t: ${execs:-?} executions in ${secs}s (${rate:-?}/s), corpus ${corpus:-?}, $status")
    echo "${summary[-1]}"
done

echo
echo "== summary"
printf '%s\n' "${summary[@]}"
exit "$failed"
