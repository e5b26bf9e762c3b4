//! Dovecot 2.3 reads a generated corpus as we describe it: the same folders (decoded
//! "Réunions"), message counts, unseen counts and virtual sizes (the `W=` in file names),
//! and a BODYSTRUCTURE and ENVELOPE for every message.
//!
//! Needs `dovecot` and `doveadm` (Debian package `dovecot-core`) and root (the Maildir is
//! handed to uid 65534 since Dovecot refuses uid 0), so it is ignored by default:
//! `cargo test -p maildex-corpus --test dovecot -- --ignored`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use maildex_corpus::{generate, Spec};

struct Dovecot {
    conf: PathBuf,
}

impl Drop for Dovecot {
    fn drop(&mut self) {
        let _ = Command::new("doveadm")
            .arg("-c")
            .arg(&self.conf)
            .arg("stop")
            .status();
    }
}

impl Dovecot {
    fn start(base: &Path, mail_root: &Path) -> Dovecot {
        for d in ["run", "state", "home"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        let conf = base.join("dovecot.conf");
        // mail_location as documented in the crate docs: ROOT/%d/%n/Maildir.
        std::fs::write(
            &conf,
            format!(
                "ssl = no\nprotocols =\nmail_location = maildir:{m}/%d/%n/Maildir\n\
                 base_dir = {b}/run\nstate_dir = {b}/state\nlog_path = {b}/dovecot.log\n\
                 userdb {{\n  driver = static\n  args = uid=65534 gid=65534 home={b}/home/%u\n}}\n\
                 passdb {{\n  driver = static\n  args = nopassword\n}}\n",
                m = mail_root.display(),
                b = base.display()
            ),
        )
        .unwrap();
        let st = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(mail_root)
            .arg(base.join("home"))
            .status()
            .unwrap();
        assert!(st.success());
        assert!(Command::new("dovecot")
            .arg("-c")
            .arg(&conf)
            .status()
            .expect("dovecot")
            .success());
        Dovecot { conf }
    }

    fn doveadm(&self, args: &[&str]) -> String {
        let out = Command::new("doveadm")
            .arg("-c")
            .arg(&self.conf)
            .args(args)
            .output()
            .expect("doveadm");
        assert!(
            out.status.success(),
            "doveadm {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

#[test]
#[ignore = "needs dovecot-core and root"]
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
    let dc = Dovecot::start(&tmp.path().join("dovecot"), &root);

    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let (mut unseen, mut vsize_dovecot) = (0usize, 0u64);
    for user in ["user0001@example.org", "user0002@example.org"] {
        let status = dc.doveadm(&[
            "mailbox",
            "status",
            "-u",
            user,
            "messages unseen vsize",
            "*",
        ]);
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
        let fetched = dc.doveadm(&[
            "fetch",
            "-u",
            user,
            "uid imap.bodystructure imap.envelope",
            "all",
        ]);
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
