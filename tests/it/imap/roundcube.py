"""Roundcube (Debian's 1.6) in headless Chromium against maildex, driven with selenium.

Run by tests/it/imap/roundcube.rs, which starts maildex and Roundcube (PHP's built-in
server) on loopback and checks afterwards, over IMAP, what the browser did to the mail.

    roundcube.py IMAP_PORT WEB_URL USER PASSWORD SCREENSHOT_DIR

Seeds INBOX over IMAP (APPEND), then as a user would: logs in, lists, sorts by date and by
subject (checking the order), switches to the thread view, opens a message with an
attachment, searches, flags, moves, deletes (to Trash), saves a draft, and reads the quota.
Each step leaves a screenshot NN-step.png. Prints one line per step and "ok" at the end;
the first failed check raises (exit status 1) naming the step.
"""

import imaplib
import json
import os
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

IMAP_PORT, URL, USER, PASSWORD, SHOTS = sys.argv[1:6]
PATIENCE = 30


def message(n, subject, date, sender, extra="", body=None, attachment=None):
    """One message as it would arrive: Message-ID <mN@test>, headers, a text body."""
    head = (
        f"From: {sender}\r\nTo: user@example.org\r\nSubject: {subject}\r\n"
        f"Date: {date}\r\nMessage-ID: <m{n}@test>\r\nMIME-Version: 1.0\r\n{extra}"
    )
    text = body or f"Body of message {n}.\r\n"
    if attachment is None:
        return (head + "Content-Type: text/plain; charset=utf-8\r\n\r\n" + text).encode()
    name, data = attachment
    return (
        head
        + 'Content-Type: multipart/mixed; boundary="b"\r\n\r\n'
        + "--b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
        + text
        + f'--b\r\nContent-Type: text/plain; name="{name}"\r\n'
        + f'Content-Disposition: attachment; filename="{name}"\r\n'
        + "Content-Transfer-Encoding: base64\r\n\r\n"
        + data
        + "\r\n--b--\r\n"
    ).encode()


# (subject as shown, message); INBOX sequence numbers 1..8 in this order. Internal dates
# (APPEND order) differ from the Date: headers, so a DATE sort is not an ARRIVAL sort.
MESSAGES = [
    ("Quarterly report", message(
        1, "Quarterly report", "Mon, 05 Jan 2026 09:00:00 +0000", "Alice <alice@example.org>",
        attachment=("report.txt", "UXVhcnRlcmx5IGZpZ3VyZXMK"))),
    ("Re: Quarterly report", message(
        2, "Re: Quarterly report", "Tue, 06 Jan 2026 09:00:00 +0000", "Bob <bob@example.org>",
        extra="In-Reply-To: <m1@test>\r\nReferences: <m1@test>\r\n")),
    ("Été plans", message(
        3, "=?UTF-8?Q?=C3=89t=C3=A9_plans?=", "Sat, 03 Jan 2026 09:00:00 +0000",
        "=?UTF-8?Q?Zo=C3=A9?= <zoe@example.org>")),
    ("[list] Announce: maildex 1.0", message(
        4, "[list] Announce: maildex 1.0", "Sun, 04 Jan 2026 09:00:00 +0000",
        "List <list@example.org>")),
    ("Fwd: Budget", message(
        5, "Fwd: Budget", "Thu, 08 Jan 2026 09:00:00 +0000", "Carol <carol@example.org>")),
    ("budget", message(
        6, "budget", "Fri, 02 Jan 2026 09:00:00 +0000", "Dave <dave@example.org>")),
    ("Zebra crossing", message(
        7, "Zebra crossing", "Thu, 01 Jan 2026 09:00:00 +0000", "Erin <erin@example.org>")),
    ("apples", message(
        8, "apples", "Wed, 07 Jan 2026 09:00:00 +0000", "Frank <frank@example.org>")),
]

# RFC 5256 §3 with the sequence number breaking ties: DATE by the Date: header; SUBJECT by
# base subject ("Re:", "Fwd:", a leading "[list]" removed) in i;unicode-casemap (RFC 5051:
# "Été" sorts as "ETE", between "budget" and "quarterly").
BY_DATE = [7, 6, 3, 4, 1, 2, 8, 5]
BY_SUBJECT = [4, 8, 5, 6, 3, 1, 2, 7]


def subject(n):
    return MESSAGES[n - 1][0]


def seed():
    m = imaplib.IMAP4("127.0.0.1", int(IMAP_PORT))
    m.login(USER, PASSWORD)
    for day, (_, raw) in enumerate(MESSAGES):
        when = imaplib.Time2Internaldate(time.mktime((2026, 2, 20 - day, 12, 0, 0, 0, 0, 0)))
        typ, _ = m.append("INBOX", None, when, raw)
        assert typ == "OK", typ
    m.logout()


step_no = 0


def step(name, driver):
    global step_no
    step_no += 1
    driver.save_screenshot(os.path.join(SHOTS, f"{step_no:02}-{name}.png"))
    print(f"{step_no:02} {name}", flush=True)


def wait(driver, what, cond):
    try:
        return WebDriverWait(driver, PATIENCE).until(cond)
    except Exception:
        driver.save_screenshot(os.path.join(SHOTS, f"failed-{what}.png"))
        raise AssertionError(f"timed out waiting for {what}")


def idle(driver):
    """Roundcube's last request answered (no request in flight, no busy overlay)."""
    return driver.execute_script(
        "return !rcmail.busy && !(rcmail.env.request_timeout && rcmail._int && false)"
    )


def listed_subjects(driver):
    return driver.execute_script(
        "return $('#messagelist tbody tr:visible').map(function(){"
        " return $(this).find('span.subject a span, td.subject a span').last().text()"
        "}).get()"
    )


def settle(driver, what, check):
    """Waits until Roundcube is idle and `check()` holds; returns its value."""
    def ok(d):
        if not idle(d):
            return False
        return check() or False
    return wait(driver, what, ok)


def set_list_options(driver, sort_col, order, threads=None):
    """The list "Options" dialog, as a user changes the sort (or the list mode)."""
    driver.find_element(By.CSS_SELECTOR, "a.options, #listmenulink").click()
    dialog = wait(driver, "options dialog", lambda d: d.find_element(
        By.CSS_SELECTOR, ".ui-dialog select[name='sort_col']"))
    Select(dialog).select_by_value(sort_col)
    Select(driver.find_element(By.CSS_SELECTOR, ".ui-dialog select[name='sort_ord']")
           ).select_by_value(order)
    if threads is not None:
        Select(driver.find_element(By.CSS_SELECTOR, ".ui-dialog select[name='mode']")
               ).select_by_value("threads" if threads else "list")
    driver.find_element(By.CSS_SELECTOR, ".ui-dialog .ui-dialog-buttonpane .mainaction").click()


def select_row(driver, subj):
    """Clicks the list row of the message with that subject."""
    rows = driver.find_elements(By.CSS_SELECTOR, "#messagelist tbody tr")
    for r in rows:
        if r.text and subj in r.text.split("\n"):
            r.find_element(By.CSS_SELECTOR, "td.subject").click()
            # a command given while the preview loads is dropped (rcmail.busy): wait for it
            settle(driver, f"preview of {subj!r}", lambda: driver.execute_script(
                "var u = rcmail.message_list.get_single_selection(),"
                " f = document.getElementById('messagecontframe'),"
                " w = f && f.contentWindow;"
                " return u && w && w.rcmail && w.rcmail.env.uid == u && !w.rcmail.busy"))
            return
    raise AssertionError(f"no row {subj!r} in {[r.text for r in rows]}")


def main():
    seed()
    opts = webdriver.ChromeOptions()
    for a in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
              "--window-size=1280,800", "--lang=en-US"]:
        opts.add_argument(a)
    opts.binary_location = "/usr/bin/chromium"
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    try:
        run(d)
    finally:
        d.quit()
    print("ok")


def run(d):
    all_subjects = sorted(s for s, _ in MESSAGES)

    # log in; the list shows every message
    d.get(URL)
    wait(d, "login form", lambda d: d.find_element(By.ID, "rcmloginuser"))
    d.find_element(By.ID, "rcmloginuser").send_keys(USER)
    d.find_element(By.ID, "rcmloginpwd").send_keys(PASSWORD)
    d.find_element(By.ID, "rcmloginsubmit").click()
    got = settle(d, "the message list", lambda: sorted(listed_subjects(d)) == all_subjects
                 and listed_subjects(d))
    env = d.execute_script(
        "return {threads: !!rcmail.env.threads, quota: rcmail.env.quota,"
        " trash: rcmail.env.trash_mailbox, drafts: rcmail.env.drafts_mailbox,"
        " mailboxes: Object.keys(rcmail.env.mailboxes || {})}")
    print("env " + json.dumps(env), flush=True)
    for folder in ["Drafts", "Sent", "Trash", "Junk", "Archive"]:
        assert folder in env["mailboxes"], env
    step("list", d)

    # sort by date, then by subject, through the Options dialog
    set_list_options(d, "date", "ASC")
    want = [subject(n) for n in BY_DATE]
    settle(d, "sort by date", lambda: listed_subjects(d) == want)
    step("sorted-by-date", d)
    set_list_options(d, "subject", "ASC")
    want = [subject(n) for n in BY_SUBJECT]
    try:
        settle(d, "sort by subject", lambda: listed_subjects(d) == want)
    except AssertionError:
        raise AssertionError(f"subject order {listed_subjects(d)}, want {want}")
    step("sorted-by-subject", d)

    # the thread view: offered only when the server has THREAD. Roundcube asks for
    # THREAD=REFS when it is offered (as it is by Dovecot), which links by References and
    # does not merge by subject: "Quarterly report" with its reply is a thread of two, the
    # rest stand alone ("Fwd: Budget" names no message it forwards)
    assert env["threads"], "Roundcube offers no thread view (no THREAD capability)"
    set_list_options(d, "date", "ASC", threads=True)
    settle(d, "thread view", lambda: d.execute_script(
        "return rcmail.env.threading && $('#messagelist tbody tr:visible').length == 7"))
    parents = d.execute_script(
        "var r = rcmail.message_list.rows, n = 0;"
        " for (var k in r) { if (r[k].has_children) n++; } return n")
    assert parents == 1, f"{parents} threads with replies, want 1"
    step("threads", d)
    set_list_options(d, "date", "ASC", threads=False)
    settle(d, "list view", lambda: len(listed_subjects(d)) == len(MESSAGES))

    # open the message with the attachment in the preview pane
    select_row(d, "Quarterly report")
    frame = wait(d, "preview", lambda d: d.find_element(By.ID, "messagecontframe"))
    d.switch_to.frame(frame)
    names = wait(d, "attachment list", lambda d: [
        e.text for e in d.find_elements(By.CSS_SELECTOR, "#attachment-list li")] or None)
    assert any("report.txt" in n for n in names), names
    body = d.find_element(By.ID, "messagebody").text
    assert "Body of message 1." in body, body
    d.switch_to.default_content()
    step("message-with-attachment", d)

    # search (Roundcube searches subject and sender by default): two messages
    box = d.find_element(By.CSS_SELECTOR, "#mailsearchform")
    box.click()
    box.send_keys("quarterly", Keys.ENTER)
    settle(d, "search results", lambda: sorted(listed_subjects(d)) ==
           ["Quarterly report", "Re: Quarterly report"])
    step("search", d)
    d.execute_script("rcmail.command('reset-search')")
    settle(d, "search reset", lambda: len(listed_subjects(d)) == len(MESSAGES))

    # flag "Été plans" through the Mark menu
    select_row(d, "Été plans")
    wait(d, "mark button", lambda d: d.find_element(
        By.CSS_SELECTOR, "#toolbar-menu a.markmessage:not(.disabled)")).click()
    wait(d, "mark menu", lambda d: d.find_element(By.CSS_SELECTOR, "#markmessage-menu a.flag.active")
         ).click()
    settle(d, "flag shown", lambda: d.execute_script(
        "var u = rcmail.message_list.get_single_selection();"
        " return u && rcmail.message_list.rows[u].flagged"))
    step("flagged", d)

    # move "Zebra crossing" to Archive
    select_row(d, "Zebra crossing")
    d.execute_script("rcmail.command('move', 'Archive')")
    settle(d, "moved", lambda: "Zebra crossing" not in listed_subjects(d))
    step("moved-to-archive", d)

    # delete "apples" with the toolbar button: it goes to Trash
    select_row(d, "apples")
    wait(d, "delete button", lambda d: d.find_element(
        By.CSS_SELECTOR, "#toolbar-menu a.delete:not(.disabled)")).click()
    settle(d, "deleted", lambda: "apples" not in listed_subjects(d))
    step("deleted", d)
    d.find_element(By.CSS_SELECTOR, "#mailboxlist li.trash a").click()
    settle(d, "Trash listed", lambda: listed_subjects(d) == ["apples"])
    step("trash", d)

    # save a draft from the compose screen
    d.get(URL + "?_task=mail&_action=compose")
    wait(d, "compose form", lambda d: d.find_element(By.ID, "compose-subject"))
    settle(d, "compose ready", lambda: d.execute_script("return !!rcmail.env.compose_id"))
    d.find_element(By.ID, "compose-subject").send_keys("Draft from the browser")
    d.find_element(By.ID, "composebody").send_keys("Half a thought.")
    d.execute_script("rcmail.command('savedraft')")
    settle(d, "draft saved", lambda: d.execute_script("return !!rcmail.env.draft_id"))
    step("draft-saved", d)

    # quota as Roundcube shows it (GETQUOTAROOT INBOX)
    d.get(URL + "?_task=mail&_mbox=INBOX")
    settle(d, "list again", lambda: len(listed_subjects(d)) == len(MESSAGES) - 2)
    quota = d.execute_script("return rcmail.env.quota")
    print("quota " + json.dumps(quota), flush=True)
    step("quota", d)
    assert quota, "Roundcube shows no quota (no QUOTA capability)"
    # 20 KiB for the user (tests/it/imap/roundcube.rs): the few messages take a visible part
    shown = settle(d, "quota shown", lambda: d.execute_script(
        "var q = document.getElementById('quotadisplay'); return q && q.innerText.trim()"))
    print("quota shown " + json.dumps(shown), flush=True)
    percent = int(shown.rstrip("%")) if shown.rstrip("%").isdigit() else 0
    assert 0 < percent < 100, f"quota as Roundcube shows it: {shown!r}"


if __name__ == "__main__":
    main()
