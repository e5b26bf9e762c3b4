//! Property: any sequence of deliveries, external additions, flag renames, deletions, syncs
//! and index rebuilds keeps the index equal to the Maildir (`check` is clean) and every UID
//! stable (a file keeps its UID, a UID is never given to another file, UIDVALIDITY stays).

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use crate::support::{message, put_file, Scratch};
use maildex_maildir::{Flags, MaildirName};
use maildex_store::{DeliverOptions, UserStore};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Deliver {
        folder: usize,
        seen: bool,
    },
    ExternalAdd {
        folder: usize,
        to_new: bool,
    },
    ExternalRename {
        pick: usize,
        letters: u8,
    },
    ExternalDelete {
        pick: usize,
    },
    Sync,
    Rebuild,
    DropIndex,
    /// Close the store (index kept), so the next changes happen while it is closed.
    Reopen,
}

const FOLDERS: [&str; 2] = ["INBOX", "Lists.rust"];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..2usize, any::<bool>()).prop_map(|(folder, seen)| Op::Deliver { folder, seen }),
        3 => (0..2usize, any::<bool>()).prop_map(|(folder, to_new)| Op::ExternalAdd { folder, to_new }),
        3 => (any::<usize>(), 0u8..32).prop_map(|(pick, letters)| Op::ExternalRename { pick, letters }),
        2 => any::<usize>().prop_map(|pick| Op::ExternalDelete { pick }),
        2 => Just(Op::Sync),
        1 => Just(Op::Rebuild),
        1 => Just(Op::DropIndex),
        1 => Just(Op::Reopen),
    ]
}

/// Every message file of the user: (folder path, sub, file name).
fn files(root: &Path) -> Vec<(std::path::PathBuf, &'static str, String)> {
    let mut out = Vec::new();
    for dir in [root.to_path_buf(), root.join(".Lists.rust")] {
        for sub in ["new", "cur"] {
            if let Ok(rd) = fs::read_dir(dir.join(sub)) {
                for e in rd.flatten() {
                    out.push((
                        dir.clone(),
                        sub,
                        e.file_name().to_string_lossy().into_owned(),
                    ));
                }
            }
        }
    }
    out.sort();
    out
}

struct Model {
    /// (mailbox, base) -> uid, for every file ever seen
    uid_of: HashMap<(String, String), u32>,
    /// (mailbox, uid) -> base
    base_of: HashMap<(String, u32), String>,
    validity: HashMap<String, u32>,
    counter: usize,
}

/// Lets time pass for the folders: their last change is a minute old. A sync removes a
/// message whose file is gone only on a listing of quiet folders (a removal is an EXPUNGE
/// for clients, and readdir can miss files renamed while it runs).
fn settle(root: &Path) {
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    for dir in [root.to_path_buf(), root.join(".Lists.rust")] {
        for sub in ["new", "cur"] {
            let f = fs::File::open(dir.join(sub)).unwrap();
            f.set_times(fs::FileTimes::new().set_modified(past))
                .unwrap();
        }
    }
}

impl Model {
    fn observe(&mut self, store: &UserStore) -> Result<(), TestCaseError> {
        settle(store.root());
        store
            .sync_all()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let diffs = store
            .check()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(diffs.is_empty(), "check: {diffs:?}");
        let seen = store
            .index()
            .read(|r| {
                let mut v = Vec::new();
                for (id, m) in r.mailboxes()? {
                    for (uid, h) in r.states(id)? {
                        v.push((
                            m.name.clone(),
                            m.uidvalidity,
                            uid.get(),
                            maildex_maildir::filename::base_of(&h.file_name).to_string(),
                        ));
                    }
                    v.push((m.name.clone(), m.uidvalidity, 0, String::new()));
                }
                Ok(v)
            })
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        for (mailbox, validity, uid, base) in seen {
            let v = *self.validity.entry(mailbox.clone()).or_insert(validity);
            prop_assert_eq!(v, validity, "UIDVALIDITY of {} changed", mailbox);
            if uid == 0 {
                continue;
            }
            let known = *self
                .uid_of
                .entry((mailbox.clone(), base.clone()))
                .or_insert(uid);
            prop_assert_eq!(known, uid, "{} in {} changed UID", base, mailbox);
            let owner = self
                .base_of
                .entry((mailbox.clone(), uid))
                .or_insert(base.clone())
                .clone();
            prop_assert_eq!(owner, base, "UID {} of {} reused", uid, mailbox);
        }
        Ok(())
    }
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let s = Scratch::new();
    let mut store = Some(s.open());
    fs::create_dir_all(s.maildir.join(".Lists.rust")).unwrap();
    crate::support::make_folder(&s.maildir.join(".Lists.rust"));
    let mut model = Model {
        uid_of: HashMap::new(),
        base_of: HashMap::new(),
        validity: HashMap::new(),
        counter: 0,
    };
    for op in ops {
        let st = match &store {
            Some(st) => st,
            None => store.insert(s.open()),
        };
        model.counter += 1;
        let n = model.counter;
        match op {
            Op::Deliver { folder, seen } => {
                let flags = if seen { Flags::SEEN } else { Flags::EMPTY };
                st.sync_mailbox(FOLDERS[folder])
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                st.deliver(
                    FOLDERS[folder],
                    &mut &message(&format!("d{n}"))[..],
                    &DeliverOptions {
                        flags,
                        ..Default::default()
                    },
                )
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            Op::ExternalAdd { folder, to_new } => {
                let dir = if folder == 0 {
                    s.maildir.clone()
                } else {
                    s.maildir.join(".Lists.rust")
                };
                let name = format!("1800000{n:03}.M{n}P99.other.host");
                let name = if to_new { name } else { format!("{name}:2,S") };
                put_file(
                    &dir,
                    if to_new { "new" } else { "cur" },
                    &name,
                    &message(&format!("x{n}")),
                );
            }
            Op::ExternalRename { pick, letters } => {
                let all = files(&s.maildir);
                if !all.is_empty() {
                    let (dir, sub, name) = &all[pick % all.len()];
                    let parsed = MaildirName::parse(name).unwrap();
                    let mut flags = Flags::EMPTY;
                    for (bit, f) in [
                        (1, Flags::SEEN),
                        (2, Flags::ANSWERED),
                        (4, Flags::FLAGGED),
                        (8, Flags::DELETED),
                        (16, Flags::DRAFT),
                    ] {
                        if letters & bit != 0 {
                            flags.insert(f);
                        }
                    }
                    let renamed = parsed.with_flags(flags, parsed.keywords).file_name();
                    let renamed = if renamed.contains(":2,") {
                        renamed
                    } else {
                        format!("{renamed}:2,")
                    };
                    fs::rename(dir.join(sub).join(name), dir.join("cur").join(renamed)).unwrap();
                }
            }
            Op::ExternalDelete { pick } => {
                let all = files(&s.maildir);
                if !all.is_empty() {
                    let (dir, sub, name) = &all[pick % all.len()];
                    fs::remove_file(dir.join(sub).join(name)).unwrap();
                }
            }
            Op::Sync => model.observe(st)?,
            Op::Rebuild => {
                st.rebuild(&mut |_| {})
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            Op::DropIndex => {
                store = None;
                fs::remove_dir_all(&s.index).unwrap();
                continue;
            }
            Op::Reopen => {
                store = None;
                continue;
            }
        }
    }
    let st = match &store {
        Some(st) => st,
        None => store.insert(s.open()),
    };
    model.observe(st)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, max_shrink_iters: 200, ..ProptestConfig::default() })]

    #[test]
    fn index_and_maildir_stay_equal_and_uids_stable(ops in proptest::collection::vec(op(), 1..40)) {
        run(ops)?;
    }
}
