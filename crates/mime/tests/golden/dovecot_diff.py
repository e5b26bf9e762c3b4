#!/usr/bin/env python3
"""Compares maildex-mime with Dovecot on a whole Maildir.  NOT part of CI.

For every message file in MAILDIR/cur and MAILDIR/new, fetches RFC822.SIZE,
ENVELOPE, BODY and BODYSTRUCTURE from a Dovecot started as in
dovecot_oracle.py (same requirements: root, Debian's dovecot-imapd) and
compares them with what maildex-mime answers for the same file (the
summary_dump example).  Prints each difference and a count; exits 1 when
there is one.  A difference found this way becomes a golden case: copy the
file here as NAME.eml and run dovecot_oracle.py NAME.

    python3 crates/mime/tests/golden/dovecot_diff.py MAILDIR [MAX_SHOWN]

A realistic Maildir to try: `maildex-corpus --out DIR --users 1 --no-folders`.
"""

import glob
import os
import re
import shutil
import subprocess
import sys

import dovecot_oracle as oracle

ROOT = os.path.abspath(os.path.join(oracle.HERE, "../../../.."))
ITEMS = ("RFC822.SIZE", "ENVELOPE", "BODY", "BODYSTRUCTURE")


def ours(files):
    """file name (without the :2, flags) -> {item: bytes}, from summary_dump."""
    out = subprocess.run(
        ["cargo", "run", "-q", "-p", "maildex-mime", "--example", "summary_dump",
         "--"] + files, cwd=ROOT, capture_output=True, check=True).stdout
    answers = {}
    cur = None
    pos = 0
    while pos < len(out):
        nl = out.index(b"\n", pos)
        head = out[pos:nl].decode()
        if head.startswith("== FILE "):
            cur = answers.setdefault(head[8:].split(":")[0], {})
            pos = nl + 1
            continue
        key, n = head[3:].rsplit(" ", 1)
        n = int(n)
        cur[key] = out[nl + 1:nl + 1 + n]
        pos = nl + 1 + n + 1
    return answers


def uid_files(md):
    """UID -> base file name, from the dovecot-uidlist Dovecot wrote."""
    out = {}
    with open(f"{md}/dovecot-uidlist") as f:
        for line in f:
            m = re.match(r"(\d+) .*?:(\S+)", line.strip())
            if m:
                out[int(m.group(1))] = m.group(2).split(":")[0]
    return out


def main():
    src = sys.argv[1]
    shown_max = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    files = sorted(glob.glob(f"{src}/cur/*") + glob.glob(f"{src}/new/*"))
    mine = ours(files)

    def fill(md):
        for f in files:
            shutil.copy(f, f"{md}/{os.path.basename(os.path.dirname(f))}/")

    diffs = 0
    try:
        conn = oracle.start_dovecot(fill)
        typ, data = conn.select("INBOX", readonly=True)
        count = int(data[0])
        names = uid_files(f"{oracle.SCRATCH}/home/{oracle.USER}/Maildir")
        for seq in range(1, count + 1):
            _, uid = oracle.fetch_item(conn, seq, "UID")
            name = names[uid]
            for item in ITEMS:
                raw, _ = oracle.fetch_item(conn, seq, item)
                if raw != mine[name][item]:
                    diffs += 1
                    if diffs <= shown_max:
                        print(f"{name} {item}\n  dovecot: {raw[:800]!r}\n"
                              f"  maildex: {mine[name][item][:800]!r}")
        conn.logout()
        print(f"{count} messages, {diffs} differences")
    finally:
        oracle.stop_dovecot()
    sys.exit(1 if diffs else 0)


if __name__ == "__main__":
    main()
