//! Writing one user's Maildir++ (Courier/Dovecot layout): `cur/ new/ tmp/` at the root
//! for INBOX, folders as `.Name` directories (`.` separating levels, each level in IMAP
//! modified UTF-7, RFC 3501 §5.1.3) holding an empty `maildirfolder` file, and message files
//! named the way Dovecot names them:
//! `<secs>.M<usecs>P<pid>Q<n>.<host>,S=<size>,W=<vsize>:2,<flags>` (flags sorted by ASCII;
//! files in `new/` carry no `:2,` info).

use std::fs::{self, File, FileTimes};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use rand::Rng;

use crate::encode::mutf7_encode;
use crate::generator::Generator;
use crate::message::Role;
use crate::stats::UserStats;
use crate::CorpusError;

/// The host part of generated file names.
pub const FILENAME_HOST: &str = "mail.example.org";

/// A mailbox of the generated layout.
#[derive(Clone, Copy, Debug)]
pub struct Folder {
    /// IMAP mailbox name (UTF-8, `.` as hierarchy separator); `INBOX` for the root.
    pub name: &'static str,
    /// What kind of mail it holds.
    pub role: Role,
    /// Relative share of the user's messages.
    pub weight: u32,
}

/// The folders of every generated mailbox when [`Spec::folders`](crate::Spec) is set
/// (without it everything goes to INBOX). "Réunions" is the non-ASCII name; on disk it is
/// `.R&AOk-unions`.
pub const FOLDERS: &[Folder] = &[
    Folder {
        name: "INBOX",
        role: Role::Inbox,
        weight: 50,
    },
    Folder {
        name: "Sent",
        role: Role::Sent,
        weight: 12,
    },
    Folder {
        name: "Drafts",
        role: Role::Drafts,
        weight: 1,
    },
    Folder {
        name: "Trash",
        role: Role::Inbox,
        weight: 3,
    },
    Folder {
        name: "Junk",
        role: Role::Junk,
        weight: 2,
    },
    Folder {
        name: "Archive",
        role: Role::Inbox,
        weight: 7,
    },
    Folder {
        name: "Archive.2022",
        role: Role::Inbox,
        weight: 5,
    },
    Folder {
        name: "Lists.rust",
        role: Role::List(0),
        weight: 8,
    },
    Folder {
        name: "Lists.dovecot",
        role: Role::List(1),
        weight: 8,
    },
    Folder {
        name: "Réunions",
        role: Role::Meetings,
        weight: 4,
    },
];

/// The on-disk directory name of an IMAP mailbox name under Maildir++: INBOX is the root,
/// others are `.` + the name with each level encoded in modified UTF-7.
pub fn folder_dir_name(name: &str) -> String {
    if name == "INBOX" {
        return String::new();
    }
    let levels: Vec<String> = name.split('.').map(mutf7_encode).collect();
    format!(".{}", levels.join("."))
}

fn create_dir(path: &Path) -> Result<(), CorpusError> {
    fs::create_dir_all(path).map_err(|error| CorpusError::CreateDir {
        path: path.to_owned(),
        error,
    })
}

/// Creates `cur/ new/ tmp/` (and `maildirfolder` for a subfolder) under `dir`.
fn make_maildir(dir: &Path, subfolder: bool) -> Result<(), CorpusError> {
    for sub in ["cur", "new", "tmp"] {
        create_dir(&dir.join(sub))?;
    }
    if subfolder {
        // An empty marker, dated at the corpus epoch so the tree stays reproducible.
        write_message(&dir.join("maildirfolder"), b"", crate::date::EPOCH_START)?;
    }
    Ok(())
}

/// Flags for a message in `folder`, by the habits of real users. `recent` is true for the
/// newest tenth of a folder, which is read less often. Returns Maildir info letters
/// (D draft, F flagged, R replied, S seen, T trashed) sorted by ASCII, as the
/// Maildir spec requires.
fn flags<R: Rng + ?Sized>(rng: &mut R, folder: &Folder, recent: bool) -> String {
    let mut f: Vec<char> = Vec::new();
    let seen_p = match folder.role {
        Role::Sent | Role::Drafts => 1.0,
        Role::Junk => 0.3,
        Role::List(_) => 0.7,
        _ if recent => 0.55,
        _ => 0.93,
    };
    if rng.gen_bool(seen_p) {
        f.push('S');
    }
    match folder.role {
        Role::Drafts => f.push('D'),
        Role::Inbox | Role::Meetings => {
            if f.contains(&'S') && rng.gen_bool(0.18) {
                f.push('R');
            }
            if rng.gen_bool(0.05) {
                f.push('F');
            }
            if rng.gen_bool(if folder.name == "Trash" { 0.25 } else { 0.01 }) {
                f.push('T');
            }
        }
        Role::Sent | Role::List(_) => {
            if rng.gen_bool(0.02) {
                f.push('F');
            }
        }
        Role::Junk => {}
    }
    f.sort_unstable();
    f.into_iter().collect()
}

/// Where and how one user's messages are written.
pub(crate) struct UserWriter<'a> {
    pub maildir: PathBuf,
    pub folders: &'a [Folder],
    pub messages: usize,
}

impl UserWriter<'_> {
    /// Generates and writes all messages of one user; returns their statistics.
    pub(crate) fn run<R: Rng>(
        &self,
        gen: &mut Generator<R>,
        rng: &mut R,
    ) -> Result<UserStats, CorpusError> {
        let subfolders = self.folders.len() > 1;
        for f in self.folders {
            make_maildir(
                &self.maildir.join(folder_dir_name(f.name)),
                f.name != "INBOX",
            )?;
        }
        // Pick every message's folder first so each folder knows its newest messages.
        let total_weight: u32 = self.folders.iter().map(|f| f.weight).sum::<u32>().max(1);
        let picks: Vec<usize> = (0..self.messages)
            .map(|_| {
                let mut x = rng.gen_range(0..total_weight);
                self.folders
                    .iter()
                    .position(|f| {
                        if x < f.weight {
                            true
                        } else {
                            x -= f.weight;
                            false
                        }
                    })
                    .unwrap_or(0)
            })
            .collect();
        let mut counts = vec![0usize; self.folders.len()];
        for &p in &picks {
            counts[p] += 1;
        }
        // Spread two years of mail over the messages.
        gen.set_mean_interval((730.0 * 86_400.0 / self.messages.max(1) as f64).min(6.0 * 3600.0));
        let mut stats = UserStats::new(self.folders.iter().map(|f| f.name));
        let mut seen_in = vec![0usize; self.folders.len()];
        let mut pid: u32 = rng.gen_range(1_000..60_000);
        for (q, &fi) in picks.iter().enumerate() {
            let folder = &self.folders[fi];
            let role = if subfolders { folder.role } else { Role::Inbox };
            let msg = gen.next_message(role);
            let idx = seen_in[fi];
            seen_in[fi] += 1;
            let n = counts[fi];
            // RFC 3501 §2.3.2 \Recent: the newest ~2% of INBOX and list mail is still in new/.
            let in_new = matches!(folder.role, Role::Inbox | Role::List(_))
                && folder.name != "Trash"
                && folder.name != "Archive"
                && folder.name != "Archive.2022"
                && idx + (n / 50).max(1) >= n
                && n >= 5;
            let recent = idx * 10 >= n * 9;
            if rng.gen_bool(0.05) {
                pid = rng.gen_range(1_000..60_000);
            }
            let size = msg.bytes.len();
            // Dovecot's W= is the size with CRLF line endings; the corpus has only LF.
            let vsize = size + msg.bytes.iter().filter(|&&b| b == b'\n').count();
            let base = format!(
                "{}.M{}P{pid}Q{}.{FILENAME_HOST},S={size},W={vsize}",
                msg.received,
                rng.gen_range(0..1_000_000),
                q + 1
            );
            let dir = self.maildir.join(folder_dir_name(folder.name));
            let (path, flag_str) = if in_new {
                (dir.join("new").join(&base), String::new())
            } else {
                let fl = flags(rng, folder, recent);
                (dir.join("cur").join(format!("{base}:2,{fl}")), fl)
            };
            write_message(&path, &msg.bytes, msg.received)?;
            stats.add(fi, size as u64, in_new, !flag_str.contains('S'));
        }
        Ok(stats)
    }
}

/// Writes a file and sets its modification and access time to `received`
/// (Dovecot takes a Maildir message's INTERNALDATE from its mtime).
fn write_message(path: &Path, bytes: &[u8], received: i64) -> Result<(), CorpusError> {
    let err = |error| CorpusError::WriteFile {
        path: path.to_owned(),
        error,
    };
    let mut f = File::create(path).map_err(err)?;
    f.write_all(bytes).map_err(err)?;
    let t = UNIX_EPOCH + Duration::from_secs(received.max(0) as u64);
    f.set_times(FileTimes::new().set_modified(t).set_accessed(t))
        .map_err(|error| CorpusError::SetTime {
            path: path.to_owned(),
            error,
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_dir_names() {
        assert_eq!(folder_dir_name("INBOX"), "");
        assert_eq!(folder_dir_name("Lists.rust"), ".Lists.rust");
        assert_eq!(folder_dir_name("Réunions"), ".R&AOk-unions");
    }

    #[test]
    fn flags_are_sorted_and_valid() {
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(5);
        for f in FOLDERS {
            for _ in 0..200 {
                let fl = flags(&mut rng, f, false);
                let mut sorted: Vec<char> = fl.chars().collect();
                sorted.sort_unstable();
                sorted.dedup();
                assert_eq!(sorted.into_iter().collect::<String>(), fl);
                assert!(fl.chars().all(|c| "DFRST".contains(c)), "{fl}");
            }
        }
    }
}
