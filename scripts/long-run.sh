#!/usr/bin/env bash
# The reliability issue's long run in one command: the concurrency checker, the kill and
# fault harnesses of the IMAP write paths and of LMTP, the hostile clients with their
# peak memory, and (when nightly Rust is there) every fuzz target. Short runs of the same
# tests are part of scripts/test-all.sh; docs/RELIABILITY.md, docs/SECURITY.md and
# docs/FUZZING.md record what the long runs gave.
#
#   scripts/long-run.sh [--quick]
#
# Defaults (about 40 minutes of tests on 2 cores, plus the fuzzing):
#   CONC_SECS=600 CRASH_POINT_ITERATIONS=300 LMTP_ITERATIONS=300 FUZZ_SECS=300
# --quick sets them to 10 / 6 / 6 / 0 to check the script itself. FUZZ_SECS=0 skips the
# fuzzing. Logs go to $LONG_RUN_LOGS (default target/long-run); the last lines of each
# are printed at the end.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if [ "${1:-}" = "--quick" ]; then
    : "${CONC_SECS:=10}" "${CRASH_POINT_ITERATIONS:=6}" "${LMTP_ITERATIONS:=6}" "${FUZZ_SECS:=0}"
fi
: "${CONC_SECS:=600}" "${CRASH_POINT_ITERATIONS:=300}" "${LMTP_ITERATIONS:=300}" "${FUZZ_SECS:=300}"
logs=${LONG_RUN_LOGS:-$root/target/long-run}
mkdir -p "$logs"

step() {
    local name=$1
    shift
    echo "== $name: $*"
    local t0=$SECONDS
    if "$@" >"$logs/$name.log" 2>&1; then
        echo "   ok in $((SECONDS - t0)) s ($logs/$name.log)"
    else
        echo "   FAILED after $((SECONDS - t0)) s; the end of $logs/$name.log:"
        tail -n 30 "$logs/$name.log"
        exit 1
    fi
}

t="cargo test -q -p maildex-tests --test"
step concurrency env MAILDEX_CONC_SECS="$CONC_SECS" $t it imap::concurrency -- --nocapture
step crash_points env MAILDEX_CRASH_POINT_ITERATIONS="$CRASH_POINT_ITERATIONS" \
    MAILDEX_CRASH_SEED="${CRASH_SEED:-7}" $t it system::crash_points -- --nocapture
step lmtp_crash env MAILDEX_CRASH_ITERATIONS="$LMTP_ITERATIONS" \
    MAILDEX_CRASH_SEED="${CRASH_SEED:-11}" $t it lmtp::crash::sigkill -- --nocapture
step hostile $t hostile -- clients:: floods:: --nocapture

if [ "$FUZZ_SECS" -gt 0 ]; then
    if cargo +nightly --version >/dev/null 2>&1; then
        step fuzz scripts/fuzz.sh "$FUZZ_SECS"
    else
        echo "== fuzz: skipped (no nightly toolchain; see docs/FUZZING.md)"
    fi
fi

echo "== figures"
grep -h "MEMORY\|per held" "$logs/hostile.log" || true
grep -h "concurrency: seed" "$logs/concurrency.log" || true
grep -h -A 12 "cycles" "$logs/crash_points.log" | head -n 14 || true
grep -h "kill/restart cycles" "$logs/lmtp_crash.log" || true
[ -f "$logs/fuzz.log" ] && tail -n 15 "$logs/fuzz.log"
echo "long run passed"
