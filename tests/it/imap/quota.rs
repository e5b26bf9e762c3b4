//! QUOTA (RFC 9208; issue 20 #5): GETQUOTAROOT and GETQUOTA tell the users file's storage
//! limit and the bytes the user's mailboxes take (all of them, in KiB), as LMTP and APPEND
//! count them; SETQUOTA is refused; STATUS DELETED and DELETED-STORAGE tell what EXPUNGE
//! would give back. Responses are parsed by imap-codec.

use imap_codec::imap_types::extensions::quota::Resource;
use imap_codec::imap_types::response::{Data, Response};
use imap_codec::imap_types::status::StatusDataItem;

use crate::support::daemon::{Opts, Server};
use crate::support::imap::{simple, Client, Reply};

/// `(mailbox, roots)` of the reply's QUOTAROOT and `(root, [(resource, usage, limit)])` of
/// its QUOTA lines, from imap-codec's parse.
#[allow(clippy::type_complexity)]
fn quota_data(
    r: &Reply,
) -> (
    Vec<(String, Vec<String>)>,
    Vec<(String, Vec<(String, u64, u64)>)>,
) {
    let (mut roots, mut quotas) = (Vec::new(), Vec::new());
    for u in &r.untagged {
        match &u.parsed {
            Some(Response::Data(Data::QuotaRoot { mailbox, roots: rs })) => roots.push((
                format!("{mailbox:?}"),
                rs.iter()
                    .map(|a| String::from_utf8_lossy(a.as_ref()).into_owned())
                    .collect(),
            )),
            Some(Response::Data(Data::Quota { root, quotas: qs })) => quotas.push((
                String::from_utf8_lossy(root.as_ref()).into_owned(),
                qs.as_ref()
                    .iter()
                    .map(|q| {
                        let name = match &q.resource {
                            Resource::Storage => "STORAGE".to_string(),
                            other => format!("{other:?}"),
                        };
                        (name, q.usage, q.limit)
                    })
                    .collect(),
            )),
            _ => {}
        }
    }
    (roots, quotas)
}

/// The tagged answer starts with `start` (`NO [CODE]` or `BAD`).
fn refused(r: &Reply, start: &str) {
    let done = r.done.text();
    let after_tag = done.split_once(' ').map_or("", |x| x.1);
    assert!(after_tag.starts_with(start), "{}", r.all());
}

/// The RFC822.SIZE of each message of the selected mailbox.
fn sizes(c: &mut Client) -> Vec<u64> {
    let r = c.ok("FETCH 1:* RFC822.SIZE");
    r.all()
        .lines()
        .filter_map(|l| l.split("RFC822.SIZE ").nth(1))
        .map(|n| n.trim_end_matches(')').trim().parse::<u64>().unwrap())
        .collect()
}

/// The sum of RFC822.SIZE over a mailbox.
fn size_of(c: &mut Client, mailbox: &str) -> u64 {
    c.ok(&format!("EXAMINE {mailbox}"));
    sizes(c).iter().sum()
}

#[test]
fn getquotaroot_and_getquota_report_the_storage_limit_and_use() {
    let s = Server::start_with(Opts {
        users: "alice:{PLAIN}pw::::::userdb_quota_rule=*:storage=10M\nbob:{PLAIN}pw\n".into(),
        ..Opts::default()
    });
    for i in 0..3 {
        s.deliver("alice", &simple(&format!("m{i}"), &"x".repeat(3000)));
    }
    let mut c = s.login("alice");
    let caps = c.ok("CAPABILITY").all();
    assert!(
        caps.contains(" QUOTA ") && caps.contains(" QUOTA=RES-STORAGE"),
        "{caps}"
    );
    c.ok("CREATE Kept");
    let msg = simple("kept", &"y".repeat(5000)).replace('\n', "\r\n");
    c.send(format!("a1 APPEND Kept {{{}}}\r\n", msg.len()));
    let cont = c.read();
    assert!(cont.is_continuation(), "{}", cont.text());
    c.send(format!("{msg}\r\n"));
    let r = c.until("a1");
    assert_eq!(r.status(), "OK", "{}", r.all());
    let used = size_of(&mut c, "INBOX") + size_of(&mut c, "Kept");
    c.ok("UNSELECT");

    // RFC 9208 §4.3: the roots of the mailbox, then each root's QUOTA
    let r = c.ok("GETQUOTAROOT INBOX");
    let (roots, quotas) = quota_data(&r);
    assert_eq!(roots.len(), 1, "{}", r.all());
    assert_eq!(roots[0].1, vec!["User quota".to_string()], "{}", r.all());
    let want = vec![(
        "User quota".to_string(),
        vec![("STORAGE".to_string(), used.div_ceil(1024), 10 * 1024)],
    )];
    assert_eq!(quotas, want, "{}", r.all());
    // every mailbox is under the one root
    let r = c.ok("GETQUOTAROOT Kept");
    assert_eq!(quota_data(&r).1, want, "{}", r.all());
    let r = c.ok("GETQUOTA \"User quota\"");
    assert_eq!(quota_data(&r).1, want, "{}", r.all());

    // expunging gives the space back
    c.ok("SELECT Kept");
    c.ok("STORE 1 +FLAGS.SILENT (\\Deleted)");
    c.ok("EXPUNGE");
    let r = c.ok("GETQUOTA \"User quota\"");
    let used = size_of(&mut c, "INBOX");
    assert_eq!(
        quota_data(&r).1[0].1,
        vec![("STORAGE".to_string(), used.div_ceil(1024), 10 * 1024)],
        "{}",
        r.all()
    );

    // refusals: a root or mailbox that does not exist, and SETQUOTA
    let r = c.cmd("GETQUOTA \"other\"");
    refused(&r, "NO [NONEXISTENT]");
    let r = c.cmd("GETQUOTAROOT Nowhere");
    refused(&r, "NO [NONEXISTENT]");
    let r = c.cmd("SETQUOTA \"User quota\" (STORAGE 1000000)");
    refused(&r, "NO [NOPERM]");
    let r = c.cmd("GETQUOTA");
    refused(&r, "BAD");

    // a user without a limit has no quota root
    let mut b = s.login("bob");
    let r = b.ok("GETQUOTAROOT INBOX");
    let (roots, quotas) = quota_data(&r);
    assert_eq!(roots.len(), 1, "{}", r.all());
    assert!(roots[0].1.is_empty() && quotas.is_empty(), "{}", r.all());
    let r = b.cmd("GETQUOTA \"User quota\"");
    refused(&r, "NO [NONEXISTENT]");

    // not before login
    let mut anon = s.connect();
    let r = anon.cmd("GETQUOTAROOT INBOX");
    refused(&r, "BAD");
    s.assert_clean("alice");
}

/// The items of the reply's STATUS line, from imap-codec's parse.
fn status_items(r: &Reply) -> Vec<StatusDataItem> {
    r.untagged
        .iter()
        .find_map(|u| match &u.parsed {
            Some(Response::Data(Data::Status { items, .. })) => Some(items.to_vec()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no STATUS line: {}", r.all()))
}

#[test]
fn status_deleted_and_deleted_storage_tell_what_expunge_gives_back() {
    let s = Server::start_with(Opts {
        users: "alice:{PLAIN}pw::::::userdb_quota_rule=*:storage=10M\n".into(),
        ..Opts::default()
    });
    for i in 0..3 {
        s.deliver(
            "alice",
            &simple(&format!("m{i}"), &"x".repeat(1500 * (i + 1))),
        );
    }
    let mut c = s.login("alice");
    c.ok("SELECT INBOX");
    let sizes = sizes(&mut c);
    c.ok("STORE 1,3 +FLAGS.SILENT (\\Deleted)");
    let used = size_of(&mut c, "INBOX");
    c.ok("UNSELECT");

    // RFC 9051 §6.3.11 DELETED: how many have \Deleted; RFC 9208 §4.2 DELETED-STORAGE: what
    // EXPUNGE gives back, in KiB as STORAGE counts it
    let reclaim = sizes[0] + sizes[2];
    let r = c.ok("STATUS INBOX (MESSAGES DELETED DELETED-STORAGE)");
    assert_eq!(
        status_items(&r),
        vec![
            StatusDataItem::Messages(3),
            StatusDataItem::Deleted(2),
            StatusDataItem::DeletedStorage(reclaim.div_ceil(1024)),
        ],
        "{}",
        r.all()
    );
    // in LIST-STATUS too (RFC 5819)
    let r = c.ok("LIST \"\" INBOX RETURN (STATUS (DELETED-STORAGE))");
    assert_eq!(
        status_items(&r),
        vec![StatusDataItem::DeletedStorage(reclaim.div_ceil(1024))],
        "{}",
        r.all()
    );

    c.ok("SELECT INBOX");
    c.ok("EXPUNGE");
    assert_eq!(
        size_of(&mut c, "INBOX"),
        used - reclaim,
        "EXPUNGE gave that back"
    );
    c.ok("UNSELECT");
    let r = c.ok("STATUS INBOX (DELETED DELETED-STORAGE)");
    assert_eq!(
        status_items(&r),
        vec![
            StatusDataItem::Deleted(0),
            StatusDataItem::DeletedStorage(0)
        ],
        "{}",
        r.all()
    );
}
