#!/usr/bin/env bash
# The layer rules of docs/ARCHITECTURE.md, checked on the dependency graph (cargo tree) so
# that they cannot silently come back once kept:
#   - index, mime, text, maildir and the protocol crates (postfix-proto too) use no tokio;
#   - the shipped binary does not link the corpus generator or the Dovecot test harness;
#   - the IMAP, LMTP and postfix-socket crates reach mail only through the store (no direct
#     dependency on maildir, index, mime or text). An edge that must stay for a while goes into PENDING
#     (empty now), and the check fails when one is gone, so the list only shrinks.
set -euo pipefail
cd "$(dirname "$0")/.."

fail=0
# a lock file out of step would make every `cargo tree` below fail, and an empty answer
# would pass for a kept rule: stop here instead
cargo metadata --locked -q --format-version 1 >/dev/null
deps() { # direct normal dependencies of $1
    cargo tree --locked -q -p "$1" -e normal --depth 1 --prefix none | tail -n +2 | awk '{print $1}' | sort -u
}
all_deps() { # every normal dependency of $1, transitively
    cargo tree --locked -q -p "$1" -e normal --prefix none | awk '{print $1}' | sort -u
}

for c in maildex-index maildex-mime maildex-text maildex-maildir maildex-imap-proto maildex-lmtp-proto maildex-postfix-proto; do
    if all_deps "$c" | grep -qx tokio; then
        echo "layer rule broken: $c depends on tokio"; fail=1
    fi
done
for d in maildex-corpus maildex-dovecot-harness; do
    if all_deps maildex | grep -qx "$d"; then
        echo "layer rule broken: the maildex binary links $d"; fail=1
    fi
done

PENDING=""
for c in maildex-imap maildex-lmtp maildex-postfix; do
    for d in maildex-maildir maildex-index maildex-mime maildex-text; do
        edge="$c:$d"
        if deps "$c" | grep -qx "$d"; then
            case " $PENDING " in
                *" $edge "*) ;;
                *) echo "layer rule broken: $c depends on $d (reach mail through maildex-store)"; fail=1 ;;
            esac
        else
            case " $PENDING " in
                *" $edge "*) echo "layer rule kept: $c no longer depends on $d; remove it from PENDING in $0"; fail=1 ;;
            esac
        fi
    done
done
# Nor by a way round the dependency graph: no index transaction, Maildir path or MIME
# parse of their own in the IMAP, LMTP and postfix-socket sources (tests included).
found=$(grep -rnE '\.index\(\)|index\.(read|write)\(|join\("(cur|new|tmp)"\)|maildex_mime::' \
    crates/imap/src crates/lmtp/src crates/postfix/src || true)
if [ -n "$found" ]; then
    echo "layer rule broken: storage work outside the store:"; echo "$found"; fail=1
fi
if [ "$fail" = 0 ]; then
    echo "layer rules: kept${PENDING:+ (pending: $PENDING)}"
fi
exit "$fail"
