//! Special-use folders every user gets (`[mailboxes]`, RFC 6154) and autoexpunge, over
//! real sockets against the in-process daemon.

use std::time::Duration;

use crate::support::daemon::{Opts, Server};
use crate::support::imap::{simple, Client, Reply, Resp};

/// How long a change owed to an IDLE session may take (autoexpunge runs every second
/// here); never a statement about speed.
const WAKE: Duration = Duration::from_secs(20);

/// The default folders and their attributes.
const FIVE: [(&str, &str); 5] = [
    ("Drafts", "\\Drafts"),
    ("Sent", "\\Sent"),
    ("Trash", "\\Trash"),
    ("Junk", "\\Junk"),
    ("Archive", "\\Archive"),
];

/// The defaults: Drafts, Sent, Trash, Junk, Archive.
fn server_with_defaults() -> Server {
    Server::start_with(Opts {
        mailboxes: Some(""),
        ..Opts::default()
    })
}

/// `(attributes, name)` of each `* LIST` or `* LSUB` line (names are atoms here).
fn listed(r: &Reply, what: &str) -> Vec<(String, String)> {
    r.lines(&format!("* {what} "))
        .iter()
        .map(|l| {
            let open = l.find('(').unwrap();
            let close = l.find(')').unwrap();
            let name = l[close + 1..].trim().split_once(' ').unwrap().1;
            (
                l[open + 1..close].to_string(),
                name.trim_matches('"').to_string(),
            )
        })
        .collect()
}

fn attrs_of<'a>(list: &'a [(String, String)], name: &str) -> Option<&'a str> {
    list.iter()
        .find(|(_, n)| n == name)
        .map(|(a, _)| a.as_str())
}

/// LIST shows INBOX and the five folders, each with its RFC 6154 §2 attribute.
fn lists_the_five_with_their_roles(c: &mut Client) {
    let list = listed(&c.ok("LIST \"\" *"), "LIST");
    let names: Vec<&str> = list.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(
        names,
        ["INBOX", "Archive", "Drafts", "Junk", "Sent", "Trash"],
        "{list:?}"
    );
    for (name, role) in FIVE {
        let attrs = attrs_of(&list, name).unwrap();
        assert!(attrs.contains(role), "{name}: {attrs}");
    }
}

#[test]
fn a_fresh_user_lists_the_five_folders_with_their_roles_and_subscribed() {
    let s = server_with_defaults();
    let mut c = s.login("alice");
    lists_the_five_with_their_roles(&mut c);
    // subscribed, as Dovecot's `auto = subscribe`
    let lsub = listed(&c.ok("LSUB \"\" *"), "LSUB");
    let mut subscribed: Vec<&str> = lsub.iter().map(|(_, n)| n.as_str()).collect();
    subscribed.sort_unstable();
    assert_eq!(
        subscribed,
        ["Archive", "Drafts", "Junk", "Sent", "Trash"],
        "{lsub:?}"
    );
    let r = c.ok("LIST (SUBSCRIBED) \"\" \"Trash\"");
    let trash = listed(&r, "LIST");
    assert!(trash[0].0.contains("\\Subscribed"), "{trash:?}");
    // real Maildir++ folders, in Dovecot's subscriptions file
    let maildir = s.maildir("alice");
    for name in ["Drafts", "Sent", "Trash", "Junk", "Archive"] {
        assert!(
            maildir.join(format!(".{name}/cur")).is_dir(),
            "{name} on disk"
        );
    }
    let subs = std::fs::read_to_string(maildir.join("subscriptions")).unwrap();
    assert!(
        subs.starts_with("V\t2\n\n") && subs.contains("\nTrash\n"),
        "{subs:?}"
    );
}

/// Delivery makes only what it needs, as Dovecot's LMTP (which creates `auto` folders at
/// their first access in IMAP, not at delivery): a new user's first message makes the
/// Maildir, INBOX and the index; the folders come with the first login.
#[test]
fn a_first_delivery_makes_no_folders_and_the_first_login_makes_them() {
    let s = server_with_defaults();
    s.deliver("bob", &simple("hello", "first mail"));
    let maildir = s.maildir("bob");
    assert!(maildir.join("cur").is_dir() && maildir.join("new").is_dir());
    let folders: Vec<String> = std::fs::read_dir(&maildir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(folders.is_empty(), "made at delivery: {folders:?}");
    // a second delivery, to a user whose store is open, does not make them either
    s.deliver("bob", &simple("again", "second mail"));
    assert!(!maildir.join(".Trash").exists());

    let mut c = s.login("bob");
    lists_the_five_with_their_roles(&mut c);
    for (name, _) in FIVE {
        assert!(maildir.join(format!(".{name}/cur")).is_dir(), "{name}");
    }
    let lsub = listed(&c.ok("LSUB \"\" *"), "LSUB");
    assert_eq!(lsub.len(), 5, "{lsub:?}");
    assert_eq!(c.ok("SELECT INBOX").lines("* 2 EXISTS").len(), 1);
}

#[test]
fn a_new_user_can_save_a_draft_at_once() {
    let s = server_with_defaults();
    let mut c = s.login("bob");
    let msg = simple("draft", "unfinished").replace('\n', "\r\n");
    let r = c.ok(&format!(
        "APPEND Drafts (\\Draft) {{{}}}\r\n{msg}",
        msg.len()
    ));
    // RFC 4315 §3: APPENDUID names the new message
    assert!(r.done.text().contains("[APPENDUID "), "{}", r.all());
    let r = c.ok("STATUS Drafts (MESSAGES)");
    assert!(r.all().contains("(MESSAGES 1)"), "{}", r.all());
    // (`index check` reports a mailbox never synced, INBOX here, as not indexed)
    c.ok("SELECT INBOX");
    s.assert_clean("bob");
}

#[test]
fn folders_with_the_role_under_other_names_are_not_doubled() {
    let s = server_with_defaults();
    // Apple Mail's "Sent Messages" and Courier's INBOX.Trash, there before the first login
    let maildir = s.maildir("alice");
    for folder in [".Sent Messages", ".INBOX.Trash"] {
        for sub in ["cur", "new", "tmp"] {
            std::fs::create_dir_all(maildir.join(folder).join(sub)).unwrap();
        }
        std::fs::write(maildir.join(folder).join("maildirfolder"), "").unwrap();
    }
    let mut c = s.login("alice");
    let list = listed(&c.ok("LIST \"\" *"), "LIST");
    let names: Vec<&str> = list.iter().map(|(_, n)| n.as_str()).collect();
    assert!(
        !names.contains(&"Sent") && !names.contains(&"Trash"),
        "{list:?}"
    );
    assert!(attrs_of(&list, "Sent Messages").unwrap().contains("\\Sent"));
    assert!(attrs_of(&list, "INBOX.Trash").unwrap().contains("\\Trash"));
    for name in ["Drafts", "Junk", "Archive"] {
        assert!(names.contains(&name), "{name} missing: {list:?}");
    }
    assert!(!maildir.join(".Sent").exists() && !maildir.join(".Trash").exists());
    // the next login (a new process would do the same) creates nothing more
    drop(c);
    let mut c = s.login("alice");
    assert_eq!(listed(&c.ok("LIST \"\" *"), "LIST"), list);
}

/// APPENDs `msg` to `mailbox` with an INTERNALDATE years ago.
fn append_old(c: &mut Client, mailbox: &str, msg: &str) {
    let msg = msg.replace('\n', "\r\n");
    c.ok(&format!(
        "APPEND {mailbox} \"01-Jan-2020 00:00:00 +0000\" {{{}}}\r\n{msg}",
        msg.len()
    ));
}

#[test]
fn autoexpunge_empties_expired_trash_in_the_background_and_idle_is_told() {
    let s = Server::start_with(Opts {
        mailboxes: Some(
            "[mailboxes.Trash]\nspecial_use = \"\\\\Trash\"\nautoexpunge = \"3s\"\n\
             [mailboxes.Junk]\nspecial_use = \"Junk\"\nautoexpunge = \"30d\"\n",
        ),
        ..Opts::default()
    });
    let start_idle = |c: &mut Client| {
        let tag = c.tag();
        c.send(format!("{tag} IDLE\r\n"));
        let r = c.read_until(WAKE, Resp::is_continuation);
        assert!(r.last().is_some_and(Resp::is_continuation), "{r:?}");
        tag
    };
    let mut idler = s.select("alice", "Trash");
    let tag = start_idle(&mut idler);
    // RFC 7162 §3.2.10: a QRESYNC session is told VANISHED instead
    let mut qresync = s.login("alice");
    qresync.ok("ENABLE QRESYNC");
    qresync.ok("SELECT Trash");
    let qtag = start_idle(&mut qresync);
    let mut b = s.login("alice");
    // INTERNALDATE in 2020, saved now: Junk's 30 days count from the save
    append_old(&mut b, "Junk", &simple("junk", "x"));
    append_old(&mut b, "Trash", &simple("trash", "x"));
    let wait_for = |c: &mut Client, line: &str| {
        let got = c.read_until(WAKE, |r| r.text() == line);
        assert!(
            got.last().is_some_and(|r| r.text() == line),
            "{line:?} not seen: {:?}",
            got.iter().map(Resp::text).collect::<Vec<_>>()
        );
    };
    wait_for(&mut idler, "* 1 EXISTS\r\n");
    // three seconds after its save the background run expunges it; IDLE hears it
    wait_for(&mut idler, "* 1 EXPUNGE\r\n");
    wait_for(&mut qresync, "* VANISHED 1\r\n");
    idler.send("DONE\r\n");
    assert_eq!(idler.until(&tag).status(), "OK");
    qresync.send("DONE\r\n");
    assert_eq!(qresync.until(&qtag).status(), "OK");
    assert!(s.files("alice", ".Trash").is_empty());
    // the run that took Trash's message began after Junk's was saved, and left it
    let r = b.ok("STATUS Junk (MESSAGES)");
    assert!(r.all().contains("(MESSAGES 1)"), "{}", r.all());
    assert_eq!(s.files("alice", ".Junk").len(), 1);
    b.ok("SELECT INBOX");
    s.assert_clean("alice");
}

/// The roles (RFC 6154) among LIST attributes, and the LSUB names, as sets.
fn roles_and_subscriptions(c: &mut Client) -> (Vec<(String, String)>, Vec<String>) {
    let mut roles: Vec<(String, String)> = listed(&c.ok("LIST \"\" *"), "LIST")
        .into_iter()
        .map(|(attrs, name)| {
            let role = attrs
                .split(' ')
                .filter(|a| FIVE.iter().any(|(_, role)| role == a))
                .collect::<Vec<_>>()
                .join(" ");
            (name, role)
        })
        .collect();
    roles.sort();
    let mut subs: Vec<String> = listed(&c.ok("LSUB \"\" *"), "LSUB")
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    subs.sort();
    (roles, subs)
}

#[test]
fn a_fresh_user_sees_what_dovecot_with_auto_subscribe_shows() {
    use maildex_dovecot_harness::{Dovecot, Options, User};
    if !crate::support::imap::have_tool("dovecot") {
        return;
    }
    // Dovecot's reference: the five folders as `auto = subscribe` with their special_use
    let mut ns = String::from("namespace inbox {\n  inbox = yes\n  separator = .\n");
    for (name, role) in FIVE {
        ns.push_str(&format!(
            "  mailbox {name} {{\n    special_use = {role}\n    auto = subscribe\n  }}\n"
        ));
    }
    ns.push_str("}\n");
    let scratch = tempfile::tempdir().unwrap();
    let mail = scratch.path().join("mail");
    std::fs::create_dir(&mail).unwrap();
    let opts = Options {
        mail_location: format!("maildir:{}/%n/Maildir", mail.display()),
        users: vec![User::new("alice", "pw")],
        mail_root: Some(mail),
        extra_config: ns,
        ..Options::default()
    };
    let dv = Dovecot::start(&scratch.path().join("dovecot"), opts).unwrap();
    let mut c = Client::connect(dv.imap_addr());
    c.ok("LOGIN alice pw");
    let dovecot = roles_and_subscriptions(&mut c);
    assert_eq!(dovecot.0.len(), 6, "{dovecot:?}");

    let s = server_with_defaults();
    let mut c = s.login("alice");
    assert_eq!(roles_and_subscriptions(&mut c), dovecot);
}
