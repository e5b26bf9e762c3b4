# Sourced by scripts/test-all.sh and scripts/bench.sh.
# ensure_packages PKG...: installs the Debian packages that are missing, quietly (one
# `apt-get update` first, only when something is missing); installs nothing otherwise.
ensure_packages() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    echo "installing: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    # Debian's package starts no service here; make sure no system Dovecot runs either way
    # (tests and benchmarks start their own, on their own config)
    if command -v doveadm >/dev/null; then doveadm stop >/dev/null 2>&1 || true; fi
}
