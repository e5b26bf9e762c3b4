//! Mailbox commands over real sockets: CREATE, DELETE, RENAME, LIST (wildcards,
//! LIST-EXTENDED RETURN options, SPECIAL-USE), LSUB/SUBSCRIBE, STATUS with SIZE, and
//! hostile names.

use crate::support::daemon::Server;
use crate::support::imap::{simple, Reply};

/// `(attributes, name)` of each `* LIST` line.
fn listed(r: &Reply) -> Vec<(String, String)> {
    r.lines("* LIST ")
        .iter()
        .map(|l| {
            let open = l.find('(').unwrap();
            let close = l.find(')').unwrap();
            let attrs = l[open + 1..close].to_string();
            // after `) "." ` comes the name (atom or quoted)
            let rest = &l[close + 1..];
            let name = rest
                .trim_start()
                .split_once(' ')
                .unwrap()
                .1
                .trim_matches('"')
                .to_string();
            (attrs, name)
        })
        .collect()
}

fn names(r: &Reply) -> Vec<String> {
    let mut v: Vec<String> = listed(r).into_iter().map(|(_, n)| n).collect();
    v.sort();
    v
}

fn attrs_of(r: &Reply, name: &str) -> String {
    listed(r)
        .into_iter()
        .find(|(_, n)| n == name)
        .unwrap_or_else(|| panic!("{name} not listed: {}", r.all()))
        .0
}

#[test]
fn create_list_wildcards_and_children() {
    let s = Server::start();
    let mut c = s.login("alice");
    c.ok("CREATE Work");
    c.ok("CREATE Work.Sub");
    c.ok("CREATE Work.Sub.Deep.");
    c.ok("CREATE Sent");
    c.ok("CREATE \"&AOk-t&AOk-\""); // "été" in modified UTF-7
    let r = c.cmd("CREATE Work");
    assert!(r.done.text().contains("NO [ALREADYEXISTS]"), "{}", r.all());
    let r = c.cmd("CREATE inbox");
    assert_eq!(r.status(), "NO", "{}", r.all());
    let all = c.ok("LIST \"\" \"*\"");
    assert_eq!(
        names(&all),
        [
            "&AOk-t&AOk-",
            "INBOX",
            "Sent",
            "Work",
            "Work.Sub",
            "Work.Sub.Deep"
        ]
    );
    for l in all.lines("* LIST ") {
        assert!(l.contains(" \".\" "), "separator: {l}");
    }
    assert!(
        attrs_of(&all, "Work").contains("\\HasChildren"),
        "{}",
        all.all()
    );
    assert!(attrs_of(&all, "Work.Sub.Deep").contains("\\HasNoChildren"));
    let top = c.ok("LIST \"\" %");
    assert_eq!(names(&top), ["&AOk-t&AOk-", "INBOX", "Sent", "Work"]);
    assert_eq!(names(&c.ok("LIST \"\" Work.%")), ["Work.Sub"]);
    assert_eq!(names(&c.ok("LIST Work. *")), ["Work.Sub", "Work.Sub.Deep"]);
    assert_eq!(names(&c.ok("LIST \"\" inbox")), ["INBOX"]);
    assert!(names(&c.ok("LIST \"\" nothing*")).is_empty());
    // RFC 3501 §6.3.8: an empty pattern gives the separator
    let r = c.ok("LIST \"\" \"\"");
    assert!(
        r.all().contains("* LIST (\\Noselect) \".\" \"\""),
        "{}",
        r.all()
    );
}

#[test]
fn list_extended_special_use_and_status() {
    let s = Server::start();
    s.deliver("alice", &simple("one", "1"));
    s.deliver("alice", &simple("two", "2"));
    let mut c = s.login("alice");
    for m in ["Sent", "Drafts", "Trash", "Junk", "Archive", "Plain"] {
        c.ok(&format!("CREATE {m}"));
    }
    c.ok("SELECT INBOX");
    c.ok("STORE 1 +FLAGS.SILENT (\\Seen)");
    let r = c.ok("LIST \"\" \"*\" RETURN (CHILDREN SPECIAL-USE STATUS (MESSAGES UNSEEN))");
    for (m, use_) in [
        ("Sent", "\\Sent"),
        ("Drafts", "\\Drafts"),
        ("Trash", "\\Trash"),
        ("Junk", "\\Junk"),
        ("Archive", "\\Archive"),
    ] {
        assert!(attrs_of(&r, m).contains(use_), "{m}: {}", r.all());
    }
    assert!(!attrs_of(&r, "Plain").contains("\\Sent"));
    assert!(attrs_of(&r, "Plain").contains("\\HasNoChildren"));
    // RFC 5819 §1: a STATUS after each selectable mailbox's LIST
    let status = r.lines("* STATUS ");
    assert_eq!(status.len(), 7, "{}", r.all());
    assert!(
        status
            .iter()
            .any(|l| l == "* STATUS INBOX (MESSAGES 2 UNSEEN 1)"),
        "{}",
        r.all()
    );
    let r = c.ok("LIST (SPECIAL-USE) \"\" \"*\"");
    assert_eq!(names(&r), ["Archive", "Drafts", "Junk", "Sent", "Trash"]);
    // STATUS with SIZE (RFC 8438): the sum of RFC822.SIZE
    let sizes = c.ok("FETCH 1:* RFC822.SIZE");
    let total: u64 = sizes
        .lines("* ")
        .iter()
        .map(|l| {
            l.rsplit(' ')
                .next()
                .unwrap()
                .trim_end_matches(')')
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    let r = c.ok("STATUS INBOX (MESSAGES RECENT UIDNEXT UIDVALIDITY UNSEEN SIZE)");
    let l = &r.lines("* STATUS")[0];
    for want in [
        "MESSAGES 2".to_string(),
        "UIDNEXT 3".into(),
        "UNSEEN 1".into(),
        format!("SIZE {total}"),
    ] {
        assert!(l.contains(&want), "{want}: {l}");
    }
    let r = c.cmd("STATUS Nope (MESSAGES)");
    assert!(r.done.text().contains("NO [NONEXISTENT]"), "{}", r.all());
}

#[test]
fn rename_delete_and_subscriptions() {
    let s = Server::start();
    s.deliver("alice", &simple("one", "1"));
    let mut c = s.login("alice");
    c.ok("CREATE Work");
    c.ok("CREATE Work.Sub");
    c.ok("CREATE Other");
    let r = c.cmd("RENAME Work Other");
    assert!(r.done.text().contains("NO [ALREADYEXISTS]"), "{}", r.all());
    let r = c.cmd("RENAME Missing Fresh");
    assert!(r.done.text().contains("NO [NONEXISTENT]"), "{}", r.all());
    c.ok("RENAME Work Play");
    assert_eq!(
        names(&c.ok("LIST \"\" *")),
        ["INBOX", "Other", "Play", "Play.Sub"]
    );
    // RENAME INBOX moves its messages and leaves an empty INBOX (RFC 3501 §6.3.5)
    c.ok("RENAME INBOX Old");
    let r = c.ok("STATUS INBOX (MESSAGES)");
    assert!(r.all().contains("(MESSAGES 0)"), "{}", r.all());
    let r = c.ok("STATUS Old (MESSAGES)");
    assert!(r.all().contains("(MESSAGES 1)"), "{}", r.all());
    let r = c.cmd("DELETE INBOX");
    assert_eq!(r.status(), "NO", "{}", r.all());
    let r = c.cmd("DELETE Gone");
    assert!(r.done.text().contains("NO [NONEXISTENT]"), "{}", r.all());
    c.ok("DELETE Play.Sub");
    c.ok("DELETE Other");
    assert_eq!(names(&c.ok("LIST \"\" *")), ["INBOX", "Old", "Play"]);
    // subscriptions
    c.ok("SUBSCRIBE Play");
    c.ok("SUBSCRIBE Old");
    let r = c.ok("LSUB \"\" \"*\"");
    let mut l: Vec<String> = r.lines("* LSUB ");
    l.sort();
    assert_eq!(l.len(), 2, "{}", r.all());
    assert!(l[0].ends_with(" Old") && l[1].ends_with(" Play"), "{l:?}");
    let r = c.ok("LIST (SUBSCRIBED) \"\" \"*\"");
    assert_eq!(names(&r), ["Old", "Play"]);
    assert!(attrs_of(&r, "Play").contains("\\Subscribed"), "{}", r.all());
    c.ok("UNSUBSCRIBE Old");
    let r = c.ok("LSUB \"\" \"*\"");
    assert_eq!(r.lines("* LSUB ").len(), 1, "{}", r.all());
    s.assert_clean("alice");
}

#[test]
fn hostile_mailbox_names_stay_inside_the_maildir() {
    let s = Server::start();
    let mut c = s.login("alice");
    for name in [
        "\"../escape\"",
        "\"a/b\"",
        "\"..\"",
        "\"a..b\"",
        "\".hidden\"",
        "\"&AGE-\"", // "a" encoded: RFC 3501 §5.1.3 forbids it
        "\"&AGE\"",
    ] {
        let r = c.cmd(&format!("CREATE {name}"));
        assert!(
            matches!(r.status().as_str(), "NO" | "BAD"),
            "CREATE {name}: {}",
            r.all()
        );
    }
    c.ok("NOOP");
    // wildcards in a name: RFC 9051 §5.1 allows them ("valid in a mailbox name") and
    // Dovecot creates them; they stay inside the Maildir, and LIST finds them by matching
    for name in ["x%y", "x*y"] {
        let r = c.cmd(&format!("CREATE \"{name}\""));
        assert_eq!(r.status(), "OK", "CREATE {name}: {}", r.all());
        assert!(
            s.maildir("alice").join(format!(".{name}")).is_dir(),
            "{name}"
        );
        assert!(names(&c.ok("LIST \"\" *")).contains(&name.to_string()));
        let r = c.ok(&format!("DELETE \"{name}\""));
        assert_eq!(r.status(), "OK");
    }
    let root = s.dir.path();
    for stray in ["escape", "mail/escape", "mail/b", "index/escape"] {
        assert!(!root.join(stray).exists(), "{stray} was created");
    }
    assert_eq!(names(&c.ok("LIST \"\" *")), ["INBOX"]);
}
