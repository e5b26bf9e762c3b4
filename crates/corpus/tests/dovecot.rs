//! Dovecot 2.3 reads a generated corpus as we describe it: the same folders (decoded
//! "Réunions"), message counts, unseen counts and virtual sizes (the `W=` in file names),
//! and a BODYSTRUCTURE and ENVELOPE for every message.
//!
//! Needs Dovecot (`dovecot-core dovecot-imapd dovecot-lmtpd`, started through
//! maildex-dovecot-harness, which hands the Maildir to uid 65534 when run as root since
//! Dovecot refuses uid 0), so it is ignored by default:
//! `cargo test -p maildex-corpus --test dovecot -- --ignored`.

use std::collections::BTreeMap;

use maildex_corpus::{generate, user_address, Spec};
use maildex_dovecot_harness::{Dovecot, Options, User};

/// Starts Dovecot on `mail_root` with mail_location as documented in the crate docs:
/// ROOT/%d/%n/Maildir.
fn start(base: &std::path::Path, mail_root: &std::path::Path, users: usize) -> Dovecot {
    let opts = Options {
        mail_location: format!("maildir:{}/%d/%n/Maildir", mail_root.display()),
        users: (0..users)
            .map(|i| User::new(user_address(i), "unused"))
            .collect(),
        mail_root: Some(mail_root.to_owned()),
        ..Options::default()
    };
    Dovecot::start(base, opts).unwrap_or_else(|e| panic!("{e}"))
}

fn doveadm(dc: &Dovecot, args: &[&str]) -> String {
    dc.doveadm(args).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
#[ignore = "needs dovecot-core, dovecot-imapd, dovecot-lmtpd"]
fn dovecot_reads_the_corpus() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("mail");
    let spec = Spec {
        seed: 5,
        users: 2,
        messages_per_user: 250,
        folders: true,
        size_scale: 0.5,
    };
    let stats = generate(&spec, &root).unwrap();
    let dc = start(&tmp.path().join("dovecot"), &root, 2);

    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let (mut unseen, mut vsize_dovecot) = (0usize, 0u64);
    for user in ["user0001@example.org", "user0002@example.org"] {
        let status = doveadm(
            &dc,
            &[
                "mailbox",
                "status",
                "-u",
                user,
                "messages unseen vsize",
                "*",
            ],
        );
        for line in status.lines() {
            // "<name> messages=N unseen=N vsize=N"; names may contain spaces.
            let (name, rest) = line.split_once(" messages=").unwrap();
            let nums: Vec<u64> = rest
                .split(' ')
                .map(|kv| kv.rsplit('=').next().unwrap().parse().unwrap())
                .collect();
            *counts.entry(name.to_owned()).or_insert(0) += nums[0] as usize;
            unseen += nums[1] as usize;
            vsize_dovecot += nums[2];
        }
        let fetched = doveadm(
            &dc,
            &[
                "fetch",
                "-u",
                user,
                "uid imap.bodystructure imap.envelope",
                "all",
            ],
        );
        let structures = fetched
            .lines()
            .filter(|l| l.len() > 25 && l.starts_with("imap.bodystructure: "))
            .count();
        let envelopes = fetched
            .lines()
            .filter(|l| l.len() > 20 && l.starts_with("imap.envelope: "))
            .count();
        assert_eq!(structures, 250, "{user}");
        assert_eq!(envelopes, 250, "{user}");
    }
    counts.retain(|_, n| *n > 0);
    let ours: BTreeMap<String, usize> = stats
        .per_folder
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    assert_eq!(counts, ours);
    assert!(counts.contains_key("Réunions"));
    assert_eq!(unseen, stats.unseen);

    // Dovecot's vsize is the CRLF size, which the file names carry as W=.
    let mut vsize_names = 0u64;
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if let Some(w) = p.file_name().unwrap().to_string_lossy().split(",W=").nth(1) {
                vsize_names += w.split(':').next().unwrap().parse::<u64>().unwrap();
            }
        }
    }
    assert_eq!(vsize_dovecot, vsize_names);
}
