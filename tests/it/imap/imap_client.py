#!/usr/bin/env python3
"""Drives maildex with real Python IMAP clients: the standard library's imaplib and,
unless --no-imapclient is given, imapclient (pip install imapclient).

Usage: imap_client.py HOST PORT USER PASSWORD [--no-imapclient]

The mailbox must hold exactly three messages with subjects "first", "second" and
"third", and a mailbox "Archive" must exist. Exits 1 with a message on the first failed
check; prints "ok" at the end.
"""
import imaplib
import sys
import time


def check(cond, what):
    if not cond:
        print("FAILED:", what, file=sys.stderr)
        sys.exit(1)


def ok(result, what):
    typ, data = result
    check(typ == "OK", "%s: %s %r" % (what, typ, data))
    return data


NEW_MESSAGE = (
    b"From: Py <py@example.org>\r\nTo: alice@example.org\r\n"
    b"Subject: from python\r\nMessage-ID: <py@example.org>\r\n\r\nappended by imaplib\r\n"
)


def with_imaplib(host, port, user, password):
    m = imaplib.IMAP4(host, port)
    caps = m.capabilities
    check("IMAP4REV1" in caps, "capabilities %r" % (caps,))
    ok(m.login(user, password), "login")
    boxes = ok(m.list(), "list")
    names = [b.decode().rsplit(" ", 1)[-1].strip('"') for b in boxes]
    check("INBOX" in names and "Archive" in names, "list %r" % (names,))
    count = ok(m.select("INBOX"), "select")
    check(count[0] == b"3", "select count %r" % (count,))
    data = ok(m.fetch("1:*", "(ENVELOPE BODYSTRUCTURE)"), "fetch envelope")
    text = b" ".join(d if isinstance(d, bytes) else d[0] + d[1] for d in data)
    for subject in (b'"first"', b'"second"', b'"third"'):
        check(subject in text, "envelope subject %r in %r" % (subject, text))
    check(text.count(b'("TEXT" "PLAIN"') == 3 or text.count(b'("text" "plain"') == 3,
          "bodystructure %r" % (text,))
    found = ok(m.search(None, "SUBJECT", '"second"'), "search")
    check(found == [b"2"], "search %r" % (found,))
    found = ok(m.uid("SEARCH", None, "ALL"), "uid search")
    check(found == [b"1 2 3"], "uid search %r" % (found,))
    data = ok(m.store("1", "+FLAGS", "(\\Flagged)"), "store")
    check(b"\\Flagged" in data[0], "store answer %r" % (data,))
    data = ok(m.fetch("2", "(BODY.PEEK[TEXT] FLAGS)"), "fetch body")
    check(data[0][1] == b"body of second\r\n", "body %r" % (data,))
    date = imaplib.Time2Internaldate(time.time())
    data = ok(m.append("INBOX", "(\\Seen)", date, NEW_MESSAGE), "append")
    check(b"APPENDUID" in data[0], "append answer %r" % (data,))
    ok(m.noop(), "noop")
    data = ok(m.fetch("4", "(BODY.PEEK[])"), "fetch appended")
    check(data[0][1] == NEW_MESSAGE, "appended bytes %r" % (data,))
    ok(m.copy("2", "Archive"), "copy")
    ok(m.close(), "close")
    typ, data = m.logout()
    check(typ == "BYE", "logout: %s %r" % (typ, data))  # imaplib reports the BYE


def with_imapclient(host, port, user, password):
    from imapclient import IMAPClient

    c = IMAPClient(host, port=port, ssl=False, timeout=30)
    c.login(user, password)
    folders = [f[2] for f in c.list_folders()]
    check("Archive" in folders, "folders %r" % (folders,))
    info = c.select_folder("INBOX")
    check(info[b"EXISTS"] == 4, "select %r" % (info,))
    uids = c.search(["ALL"])
    check(uids == [1, 2, 3, 4], "search %r" % (uids,))
    resp = c.fetch(uids, ["ENVELOPE", "BODYSTRUCTURE", "FLAGS", "RFC822.SIZE", "INTERNALDATE"])
    subjects = [resp[u][b"ENVELOPE"].subject for u in uids]
    check(subjects == [b"first", b"second", b"third", b"from python"], "subjects %r" % (subjects,))
    check(b"\\Flagged" in resp[1][b"FLAGS"], "flags %r" % (resp[1],))
    check(resp[2][b"BODYSTRUCTURE"][0].lower() == b"text", "bodystructure %r" % (resp[2],))
    c.set_flags([3], [b"$Label1"])
    check(b"$Label1" in c.get_flags([3])[3], "keyword")
    # IDLE woken by another connection's APPEND
    c.idle()
    other = IMAPClient(host, port=port, ssl=False, timeout=30)
    other.login(user, password)
    other.append("INBOX", b"Subject: wake up\r\n\r\nhi\r\n")
    other.logout()
    deadline = time.time() + 15
    woke = False
    while time.time() < deadline and not woke:
        for r in c.idle_check(timeout=2):
            if len(r) >= 2 and r[1] == b"EXISTS" and r[0] == 5:
                woke = True
    c.idle_done()
    check(woke, "IDLE saw no * 5 EXISTS")
    check(len(c.search(["ALL"])) == 5, "after idle")
    c.logout()


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    host, port, user, password = args[0], int(args[1]), args[2], args[3]
    with_imaplib(host, port, user, password)
    if "--no-imapclient" not in sys.argv:
        with_imapclient(host, port, user, password)
    print("ok")


if __name__ == "__main__":
    main()
