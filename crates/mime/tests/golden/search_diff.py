#!/usr/bin/env python3
"""Compares SEARCH FROM/TO/CC/SUBJECT of maildex and Dovecot.  NOT part of CI.

APPENDs every message file of the Maildirs given (cur/ and new/, in name
order) to a maildex started from this checkout (`cargo run -p maildex --
serve` on a scratch config) and to a Dovecot started as dovecot_oracle.py
does (same requirements: root, Debian's dovecot-imapd), then runs the same
keys on both: for each message, its addresses (`local@domain`,
`<local@`), display names and a random piece of each From/To/Cc/Subject
line. Prints every key whose answers differ and a count; exits 1 when one
does.

    python3 crates/mime/tests/golden/search_diff.py MAILDIR... [--max N]
"""

import glob
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from email.parser import BytesHeaderParser
from email.utils import getaddresses

import dovecot_oracle as oracle

ROOT = os.path.abspath(os.path.join(oracle.HERE, "../../../.."))
FIELDS = ("from", "to", "cc", "subject")


def keys_of(msgs):
    rnd = random.Random(7)
    keys = set()
    for m in msgs:
        try:
            h = BytesHeaderParser().parsebytes(m)
        except Exception:  # a message Python cannot read gives no keys
            continue
        for field in FIELDS:
            key = field.upper()
            for v in map(str, h.get_all(field) or []):
                if field != "subject":
                    for name, addr in getaddresses([v]):
                        if addr:
                            keys.add((key, addr))
                            keys.add((key, "<" + addr.split("@")[0] + "@"))
                        if name:
                            keys.add((key, name[:20]))
                raw = re.sub(r"\s+", " ", v)
                if len(raw) > 6:
                    i = rnd.randrange(0, len(raw) - 5)
                    keys.add((key, raw[i:i + rnd.randrange(4, 15)]))
    return sorted(k for k in keys
                  if k[1].strip() and not set(k[1]) & set("\r\n\0"))


class Imap:
    """A tiny LITERAL+ client: commands in, lines (with literals) out."""

    def __init__(self, port):
        for _ in range(100):
            try:
                self.sock = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                time.sleep(0.1)
        self.sock.settimeout(60)
        self.file = self.sock.makefile("rb")
        self.file.readline()

    def cmd(self, *parts):
        data = b"t"
        for p in parts:
            data += p if isinstance(p, bytes) else b" {%d+}\r\n" % len(p.b) + p.b
        self.sock.sendall(data + b"\r\n")
        lines = []
        while True:
            line = self.file.readline()
            m = re.search(rb"\{(\d+)\}\r\n$", line)
            if m:
                line += self.file.read(int(m.group(1))) + self.file.readline()
            lines.append(line)
            if line.startswith(b"t "):
                return lines


class Lit:
    def __init__(self, b):
        self.b = b


def answers(port, user, password, msgs, keys):
    c = Imap(port)
    c.cmd(b" LOGIN ", user, b" ", password)
    for m in msgs:
        r = c.cmd(b" APPEND INBOX", Lit(m))
        if not r[-1].startswith(b"t OK"):
            raise RuntimeError(f"APPEND: {r[-1]!r}")
    c.cmd(b" SELECT INBOX")
    out = {}
    for key, value in keys:
        r = c.cmd(b" SEARCH CHARSET UTF-8 " + key.encode(), Lit(value.encode()))
        found = b"".join(x for x in r if x.startswith(b"* SEARCH")).strip()
        out[(key, value)] = found or r[-1].strip()
    return out


def maildex_answers(msgs, keys):
    subprocess.run(["cargo", "build", "-q", "-p", "maildex"], cwd=ROOT, check=True)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    with tempfile.TemporaryDirectory() as tmp:
        port = oracle.free_port()
        with open(f"{tmp}/users", "w") as f:
            f.write("alice:{PLAIN}pw\n")
        with open(f"{tmp}/maildex.toml", "w") as f:
            f.write(f"""[imap]
listen = ["127.0.0.1:{port}"]
plaintext_auth_on_loopback = true
[lmtp]
listen = ["127.0.0.1:{oracle.free_port()}"]
hostname = "mx.test"
[storage]
mail_location = "{tmp}/mail/%u"
index_root = "{tmp}/index/%u"
fsync = false
[auth]
users_file = "{tmp}/users"
""")
        server = subprocess.Popen(
            [f"{target}/debug/maildex", "serve", "-c", f"{tmp}/maildex.toml"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            return answers(port, b"alice", b"pw", msgs, keys)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait()


def dovecot_answers(msgs, keys):
    try:
        conn = oracle.start_dovecot(lambda md: None)
        port = conn.port
        conn.logout()
        return answers(port, oracle.USER.encode(), oracle.PASSWORD.encode(),
                       msgs, keys)
    finally:
        oracle.stop_dovecot()


def main():
    args = sys.argv[1:]
    shown_max = 25
    if "--max" in args:
        i = args.index("--max")
        shown_max = int(args[i + 1])
        del args[i:i + 2]
    files = []
    for md in args:
        files += sorted(glob.glob(f"{md}/cur/*") + glob.glob(f"{md}/new/*"))
    msgs = [m for m in (open(f, "rb").read() for f in files) if m]
    keys = keys_of(msgs)
    print(f"{len(msgs)} messages, {len(keys)} keys")
    ours = maildex_answers(msgs, keys)
    theirs = dovecot_answers(msgs, keys)
    diffs = [k for k in keys if ours[k] != theirs[k]]
    for k in diffs[:shown_max]:
        print(f"{k}\n  maildex: {ours[k][:300]!r}\n  dovecot: {theirs[k][:300]!r}")
    hits = sum(1 for k in keys if re.match(rb"\* SEARCH \d", ours[k]))
    print(f"{len(diffs)} of {len(keys)} keys answered differently "
          f"({hits} keys found messages in maildex)")
    sys.exit(1 if diffs else 0)


if __name__ == "__main__":
    main()
