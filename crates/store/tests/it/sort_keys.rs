//! SORT and THREAD keys come from the index: computed at delivery and at sync (a file put
//! into the Maildir by another tool), read back through `UserStore::sort_keys` without
//! opening a message file.

use crate::support::{make_folder, put_file, Scratch};
use maildex_store::records::SortNeed;
use maildex_store::{DeliverOptions, SnapshotRequest, SyncFirst, Uid};

const MSG: &[u8] = b"From: =?iso-8859-1?q?=C9ric?= <eric@example.org>\n\
To: Bob <bob@example.org>, carol@example.org\n\
Cc: dave@example.net\n\
Subject: Re: [list] =?utf-8?b?w6l0w6k=?= (fwd)\n\
Date: Fri, 21 Nov 1997 09:55:06 -0600\n\
Message-ID: <m1@example.org>\n\
In-Reply-To: <p0@example.org>\n\
References: <p0@example.org> broken <p1@example.org>\n\n\
body\n";

#[test]
fn keys_are_computed_at_delivery_and_at_sync_and_read_from_the_index() {
    let s = Scratch::new();
    let store = s.open();
    store
        .deliver("INBOX", &mut &MSG[..], &DeliverOptions::default())
        .unwrap();
    // a file another tool wrote, without Date and From
    make_folder(&s.folder("INBOX"));
    put_file(
        &s.folder("INBOX"),
        "cur",
        "1700000000.x.host:2,S",
        b"Subject: plain\nIn-Reply-To: <a@b> <c@d>\n\nx\n",
    );
    let snap = store
        .snapshot(
            "INBOX",
            &SnapshotRequest {
                sync: SyncFirst::Always,
                since: None,
                claim_recent: false,
                first_unseen: false,
            },
        )
        .unwrap()
        .unwrap();
    let keys = store
        .sort_keys(&snap.mailbox, &[Uid(1), Uid(2), Uid(3)], SortNeed::ALL)
        .unwrap();
    assert_eq!(keys.len(), 2, "{keys:?}");
    let k = &keys[0].keys;
    assert_eq!(keys[0].uid, Uid(1));
    assert_eq!(k.sent_date, Some(880_127_706));
    assert_eq!(keys[0].date(), 880_127_706);
    assert_eq!(k.subject, "E\u{301}TE\u{301}");
    assert!(k.reply_or_forward);
    assert_eq!(
        (k.from.as_str(), k.to.as_str(), k.cc.as_str()),
        ("ERIC", "BOB", "DAVE")
    );
    assert_eq!(
        (k.display_from.as_str(), k.display_to.as_str()),
        ("E\u{301}RIC", "BOB")
    );
    assert_eq!(k.message_id.as_deref(), Some("m1@example.org"));
    assert_eq!(k.references, vec!["p0@example.org", "p1@example.org"]);
    assert_eq!(
        keys[0].vsize,
        MSG.len() as u64 + MSG.iter().filter(|&&b| b == b'\n').count() as u64
    );

    // a sparse set reads each UID on its own, to the same keys
    let sparse = store
        .sort_keys(&snap.mailbox, &[Uid(1), Uid(500)], SortNeed::ALL)
        .unwrap();
    assert_eq!(sparse, keys[..1].to_vec());
    // DATE needs the sent date alone, ARRIVAL and SIZE nothing of the column
    let dates = store
        .sort_keys(&snap.mailbox, &[Uid(1), Uid(2)], SortNeed::SENT_DATE)
        .unwrap();
    assert_eq!(dates[0].keys.sent_date, Some(880_127_706));
    assert_eq!(dates[0].keys.subject, "");
    let none = store
        .sort_keys(&snap.mailbox, &[Uid(1), Uid(2)], SortNeed::NOTHING)
        .unwrap();
    assert_eq!(
        (none[0].vsize, &none[0].keys),
        (keys[0].vsize, &Default::default())
    );

    let k = &keys[1];
    assert_eq!(k.keys.sent_date, None);
    assert_eq!(k.date(), k.internal_date, "no Date: the internal date");
    assert_eq!(k.keys.subject, "PLAIN");
    assert_eq!(
        (k.keys.from.as_str(), k.keys.display_from.as_str()),
        ("", "")
    );
    assert_eq!(k.keys.references, vec!["a@b"]);
}
