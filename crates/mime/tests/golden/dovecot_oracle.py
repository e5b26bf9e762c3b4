#!/usr/bin/env python3
"""Dovecot oracle for the maildex-mime golden tests.  NOT part of CI.

Writes, for every NAME.eml beside this script, NAME.expected holding what a
real Dovecot answers for that message over IMAP.  The Rust test
crates/mime/tests/golden.rs compares maildex-mime against those files.

How to run (as root, on a Debian machine):

    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends dovecot-imapd
    python3 crates/mime/tests/golden/dovecot_oracle.py            # all messages
    python3 crates/mime/tests/golden/dovecot_oracle.py NAME ...    # only these

The script starts its own Dovecot by hand (no system service) with its own
config under /tmp/maildex-oracle (loopback port, passwd-file auth,
mail_location = maildir on a scratch Maildir holding copies of the .eml
files, unchanged byte for byte), fetches with imaplib, and stops that
Dovecot again.  The system's /etc/dovecot is not used.

NAME.expected format: a sequence of records, each
    "== <KEY> <length>\n" <length raw bytes> "\n"
where KEY is one of
    RFC822.SIZE            decimal size as Dovecot reports it
    ENVELOPE               the ENVELOPE value, exactly as sent (may hold literals)
    BODY, BODYSTRUCTURE    same
    SECTION <spec>         the bytes of BODY.PEEK[<spec>] (spec as in the FETCH)
    NIL <spec>             (length 0) Dovecot answered NIL for that section
Values are raw bytes: no escaping, so the file is exact for 8-bit data.
Sections are fetched for HEADER, TEXT, a few HEADER.FIELDS[.NOT] lists and,
for the first MAX_PARTS_FETCHED parts (numbered from Dovecot's own
BODYSTRUCTURE), n, n.MIME and for message/rfc822 parts n.HEADER, n.TEXT,
n.HEADER.FIELDS[.NOT].
"""

import imaplib
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRATCH = "/tmp/maildex-oracle"
USER = "oracle"
MAX_PARTS_FETCHED = 60
PASSWORD = "oracle-pass"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def system_user(name):
    """`name` if the system has it (Debian's dovecot-core creates dovenull and
    dovecot), else nobody, which Dovecot accepts as well."""
    try:
        pwd.getpwnam(name)
        return name
    except KeyError:
        return "nobody"


def write_config(port):
    login_user = system_user("dovenull")
    internal_user = system_user("dovecot")
    conf = f"""
base_dir = {SCRATCH}/run
state_dir = {SCRATCH}/state
log_path = {SCRATCH}/dovecot.log
info_log_path = {SCRATCH}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain
first_valid_uid = 1
default_login_user = {login_user}
default_internal_user = {internal_user}
mail_location = maildir:{SCRATCH}/home/%u/Maildir
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {SCRATCH}/passwd
}}
userdb {{
  driver = static
  args = uid=nobody gid=nogroup home={SCRATCH}/home/%u
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service anvil {{
  chroot =
}}
"""
    path = f"{SCRATCH}/dovecot.conf"
    with open(path, "w") as f:
        f.write(conf)
    with open(f"{SCRATCH}/passwd", "w") as f:
        f.write(f"{USER}:{{PLAIN}}{PASSWORD}::::::\n")
    return path


def setup_maildir(md, names):
    for i, name in enumerate(names):
        src = os.path.join(HERE, name + ".eml")
        dst = f"{md}/cur/{1700000000 + i}.M{i}P1.oracle:2,"
        shutil.copyfile(src, dst)


# --- a small IMAP response tokenizer -------------------------------------

def join_response(data):
    """imaplib splits literals out; glue the raw response back together."""
    out = b""
    for piece in data:
        if isinstance(piece, tuple):
            out += piece[0] + b"\r\n" + piece[1]
        elif piece is not None:
            out += piece
    return out


def parse_value(buf, pos):
    """Parse one IMAP value at buf[pos:], return (value, raw_bytes, newpos).

    value: None for NIL, bytes for strings, int for numbers, list for lists,
    str for atoms."""
    start = pos
    c = buf[pos:pos + 1]
    if c == b"(":
        pos += 1
        items = []
        while True:
            while buf[pos:pos + 1] == b" ":
                pos += 1
            if buf[pos:pos + 1] == b")":
                pos += 1
                break
            v, _, pos = parse_value(buf, pos)
            items.append(v)
        return items, buf[start:pos], pos
    if c == b'"':
        pos += 1
        out = b""
        while buf[pos:pos + 1] != b'"':
            if buf[pos:pos + 1] == b"\\":
                pos += 1
            out += buf[pos:pos + 1]
            pos += 1
        pos += 1
        return out, buf[start:pos], pos
    if c == b"{" or buf[pos:pos + 2] == b"~{":
        m = re.compile(rb"~?\{(\d+)\}\r\n").match(buf, pos)
        n = int(m.group(1))
        pos = m.end()
        val = buf[pos:pos + n]
        pos += n
        return val, buf[start:pos], pos
    m = re.compile(rb"[^ ()\[\]]+(\[[^\]]*\](<\d+>)?)?").match(buf, pos)
    tok = m.group(0)
    pos = m.end()
    if tok.upper() == b"NIL":
        return None, tok, pos
    if tok.isdigit():
        return int(tok), tok, pos
    return tok.decode("latin-1"), tok, pos


def fetch_item(conn, seq, item):
    """FETCH one item; return (raw value bytes, parsed value)."""
    typ, data = conn.fetch(str(seq), f"({item})")
    if typ != "OK":
        raise RuntimeError(f"FETCH {seq} {item}: {typ} {data}")
    raw = join_response(data)
    # raw = b'<seq> (ITEM value)'
    m = re.match(rb"\d+ \(", raw)
    pos = m.end()
    resp_item, _, pos = parse_value(raw, pos)
    assert raw[pos:pos + 1] == b" ", raw
    value, value_raw, pos = parse_value(raw, pos + 1)
    return value_raw, value


# --- part enumeration from BODYSTRUCTURE ---------------------------------

def is_multipart(bs):
    return isinstance(bs, list) and len(bs) > 0 and isinstance(bs[0], list)


def is_message_rfc822(bs):
    return (isinstance(bs, list) and len(bs) > 8 and isinstance(bs[0], bytes)
            and bs[0].lower() == b"message" and isinstance(bs[1], bytes)
            and bs[1].lower() == b"rfc822")


def enumerate_parts(bs, prefix, out):
    """RFC 3501 section 6.4.5 part numbering. Appends (spec, is_rfc822)."""
    if is_multipart(bs):
        i = 0
        for child in bs:
            if not isinstance(child, list):
                break
            i += 1
            spec = f"{prefix}.{i}" if prefix else str(i)
            out.append((spec, is_message_rfc822(child)))
            walk_into(child, spec, out)
    else:
        # a non-multipart body: part 1 is the body itself
        spec = f"{prefix}.1" if prefix else "1"
        out.append((spec, is_message_rfc822(bs)))
        walk_into(bs, spec, out)


def walk_into(bs, spec, out):
    if is_multipart(bs):
        enumerate_parts(bs, spec, out)
    elif is_message_rfc822(bs):
        inner = bs[8]
        if is_multipart(inner):
            enumerate_parts(inner, spec, out)
        else:
            out.append((f"{spec}.1", is_message_rfc822(inner)))
            walk_into(inner, f"{spec}.1", out)


# --- main ----------------------------------------------------------------

def record(out, key, value):
    out.append(b"== " + key.encode() + b" " + str(len(value)).encode() + b"\n")
    out.append(value)
    out.append(b"\n")


def section(conn, seq, spec, out):
    raw, val = fetch_item(conn, seq, f"BODY.PEEK[{spec}]")
    if val is None:
        record(out, f"NIL {spec}", b"")
    else:
        record(out, f"SECTION {spec}", val)


def crlf(b):
    return re.sub(rb"(?<!\r)\n", b"\r\n", b)


def start_dovecot(fill_maildir):
    """Starts Dovecot on a fresh SCRATCH; `fill_maildir(path)` puts the
    messages into the user's Maildir first. Returns a logged-in IMAP4."""
    if os.path.exists(SCRATCH):
        shutil.rmtree(SCRATCH)
    os.makedirs(f"{SCRATCH}/run")
    os.makedirs(f"{SCRATCH}/state")
    port = free_port()
    conf = write_config(port)
    md = f"{SCRATCH}/home/{USER}/Maildir"
    for sub in ("cur", "new", "tmp"):
        os.makedirs(f"{md}/{sub}", exist_ok=True)
    fill_maildir(md)
    subprocess.run(["chown", "-R", "nobody:nogroup", f"{SCRATCH}/home"], check=True)
    subprocess.run(["/usr/sbin/dovecot", "-c", conf], check=True)
    for _ in range(50):
        try:
            conn = imaplib.IMAP4("127.0.0.1", port)
            break
        except OSError:
            time.sleep(0.1)
    version = subprocess.run(["/usr/sbin/dovecot", "--version"],
                             capture_output=True, text=True).stdout.strip()
    print("dovecot", version)
    conn.login(USER, PASSWORD)
    return conn


def stop_dovecot():
    pidfile = f"{SCRATCH}/run/master.pid"
    if os.path.exists(pidfile):
        with open(pidfile) as f:
            pid = int(f.read().strip())
        os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            try:
                os.kill(pid, 0)
                time.sleep(0.1)
            except ProcessLookupError:
                break
        print("stopped dovecot", pid)


def main():
    names = sys.argv[1:] or sorted(
        f[:-4] for f in os.listdir(HERE) if f.endswith(".eml"))
    all_names = sorted(f[:-4] for f in os.listdir(HERE) if f.endswith(".eml"))
    try:
        conn = start_dovecot(lambda md: setup_maildir(md, all_names))
        typ, data = conn.select("INBOX", readonly=True)
        count = int(data[0])
        # Files were copied in sorted order with increasing names, and Dovecot
        # numbers them in that order; check it by comparing the full message
        # (Dovecot sends NUL bytes as 0x80 and bare LF as CRLF).
        if count != len(all_names):
            raise RuntimeError(f"{count} messages, {len(all_names)} files")
        seq_of = {}
        for i, name in enumerate(all_names):
            seq = i + 1
            with open(os.path.join(HERE, name + ".eml"), "rb") as f:
                want = crlf(f.read()).replace(b"\0", b"\x80")
            _, val = fetch_item(conn, seq, "BODY.PEEK[]")
            if (val or b"") != want:
                raise RuntimeError(f"seq {seq} is not {name}")
            seq_of[name] = seq
        for name in names:
            seq = seq_of[name]
            out = []
            raw, val = fetch_item(conn, seq, "RFC822.SIZE")
            record(out, "RFC822.SIZE", raw)
            for item in ("ENVELOPE", "BODY", "BODYSTRUCTURE"):
                raw, val = fetch_item(conn, seq, item)
                record(out, item, raw)
                if item == "BODYSTRUCTURE":
                    bs = val
            for spec in ("HEADER", "TEXT",
                         "HEADER.FIELDS (From Subject X-Missing)",
                         "HEADER.FIELDS.NOT (Received Subject Content-Type)",
                         "HEADER.FIELDS.NOT (X-Nothing)"):
                section(conn, seq, spec, out)
            parts = []
            enumerate_parts(bs, "", parts)
            # keep the files small for messages with very many parts
            for spec, rfc822 in parts[:MAX_PARTS_FETCHED]:
                section(conn, seq, spec, out)
                section(conn, seq, spec + ".MIME", out)
                if rfc822:
                    section(conn, seq, spec + ".HEADER", out)
                    section(conn, seq, spec + ".TEXT", out)
                    section(conn, seq, spec + ".HEADER.FIELDS (Subject From)", out)
                    section(conn, seq, spec + ".HEADER.FIELDS.NOT (Subject)", out)
            with open(os.path.join(HERE, name + ".expected"), "wb") as f:
                f.write(b"".join(out))
            print("wrote", name)
        conn.logout()
    finally:
        stop_dovecot()


if __name__ == "__main__":
    main()
