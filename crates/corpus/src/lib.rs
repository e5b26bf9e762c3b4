//! maildex-corpus: a deterministic generator of realistic mail corpora for maildex's
//! benchmarks and tests.
//!
//! The same [`Spec`] (seed included) always produces a byte-identical tree: same file names,
//! same contents, same file modification times. maildex and Dovecot are benchmarked on copies
//! of one generated tree.
//!
//! # Layout
//!
//! [`generate`] writes, for user `i` (0-based) with address `user{i+1:04}@example.org`:
//!
//! ```text
//! ROOT/example.org/user0001/Maildir/          INBOX (cur/ new/ tmp/)
//! ROOT/example.org/user0001/Maildir/.Sent/    a folder (cur/ new/ tmp/ maildirfolder)
//! ROOT/example.org/user0001/Maildir/.Lists.rust/   "Lists.rust" (child of "Lists")
//! ROOT/example.org/user0001/Maildir/.R&AOk-unions/ "Réunions" (modified UTF-7)
//! ```
//!
//! i.e. Dovecot's `mail_location = maildir:ROOT/%d/%n/Maildir` (Maildir++ layout). Folders
//! (see [`FOLDERS`]) exist only with [`Spec::folders`]; otherwise all mail is in INBOX.
//! Message files are named `<secs>.M<usecs>P<pid>Q<n>.mail.example.org,S=<size>,W=<vsize>`
//! plus `:2,<flags>` in `cur/`; `<secs>` and the file mtime are the delivery time. Mail is
//! spread over about two years from 2022-01-03. No `dovecot-uidlist`, index or
//! `subscriptions` file is written: the server under test assigns UIDs on first sync.
//!
//! # Realism
//!
//! Sizes follow the distribution documented in [`size`] (median ≈ 10 kB, p99 ≈ 0.5 MB, tail
//! to several MB). Generating 10,000 messages at scale 1.0 (≈ 350 MB) takes about 2.5 s of
//! CPU in a release build; writing them is bound by the file system. Incoming mail carries Return-Path, Delivered-To, 2-6 folded Received
//! headers with documentation-range IPs, DKIM-Signature, Authentication-Results, some ARC
//! sets and SpamAssassin/rspamd verdicts; header blocks are typically 2-5 kB. Bodies span
//! text/plain (7bit, 8bit, quoted-printable, base64), multipart/alternative,
//! multipart/mixed with base64 attachments, multipart/related, forwarded message/rfc822,
//! multipart/signed, and list mail with List-* headers. Replies form real threads with
//! In-Reply-To/References and quoted text.

mod body;
mod date;
mod encode;
mod generator;
mod header;
mod lists;
mod maildir;
mod message;
mod origin;
mod payload;
mod render;
mod shape;
pub mod size;
mod stats;
mod trace;
mod words;

use std::path::{Path, PathBuf};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

pub use encode::mutf7_encode;
pub use generator::{message, Generator};
pub use lists::{MailingList, MAILING_LISTS};
pub use maildir::{folder_dir_name, Folder, FILENAME_HOST, FOLDERS};
pub use message::{Generated, Role};
pub use size::sample_size;
pub use stats::{size_quantiles, SizeQuantiles, Stats};

/// The domain of every generated user.
pub const DOMAIN: &str = "example.org";

/// What to generate.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// Seed of every random choice; the same spec gives a byte-identical corpus.
    pub seed: u64,
    /// Number of users (`user0001@example.org` ...).
    pub users: usize,
    /// Messages per user, over all of the user's folders.
    pub messages_per_user: usize,
    /// Spread mail over Maildir++ subfolders ([`FOLDERS`]: Sent, Drafts, Trash, Junk,
    /// Archive, Archive.2022, Lists.rust, Lists.dovecot and the non-ASCII "Réunions");
    /// otherwise everything goes to INBOX.
    pub folders: bool,
    /// Multiplier on drawn message sizes: 1.0 is the real distribution, smaller values give
    /// quick test corpora (header blocks are not scaled). Must be finite and > 0.
    pub size_scale: f64,
}

impl Default for Spec {
    /// 10 users × 1,000 messages, with folders, real sizes, seed 1.
    fn default() -> Self {
        Spec {
            seed: 1,
            users: 10,
            messages_per_user: 1_000,
            folders: true,
            size_scale: 1.0,
        }
    }
}

/// Errors of corpus generation; each names the path involved.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// A directory could not be created.
    #[error("cannot create directory {path}: {error}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
    /// A message or marker file could not be written.
    #[error("cannot write {path}: {error}")]
    WriteFile {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
    /// A file's modification time could not be set.
    #[error("cannot set the time of {path}: {error}")]
    SetTime {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
    /// The target Maildir already exists (generation never mixes with existing mail).
    #[error("{path} already exists; generate into an empty directory")]
    Exists {
        /// The existing Maildir.
        path: PathBuf,
    },
    /// The spec cannot be generated.
    #[error("invalid spec: {reason}")]
    InvalidSpec {
        /// What is wrong.
        reason: String,
    },
    /// A worker thread panicked (a bug in the generator).
    #[error("a generator thread for {path} panicked")]
    Worker {
        /// The Maildir that thread was writing.
        path: PathBuf,
    },
}

/// One user's result, filled by a worker thread.
type UserSlot = Option<Result<stats::UserStats, CorpusError>>;

/// The address of user `index` (0-based): `user0001@example.org` for index 0.
pub fn user_address(index: usize) -> String {
    format!("user{:04}@{DOMAIN}", index + 1)
}

/// The Maildir of user `index` under `root`: `root/example.org/user0001/Maildir`.
pub fn user_maildir(root: &Path, index: usize) -> PathBuf {
    root.join(DOMAIN)
        .join(format!("user{:04}", index + 1))
        .join("Maildir")
}

/// Generates the corpus described by `spec` under `root` (see the crate docs for the
/// layout). Users are generated in parallel on up to the machine's core count; the result
/// does not depend on the number of threads.
pub fn generate(spec: &Spec, root: &Path) -> Result<Stats, CorpusError> {
    if !(spec.size_scale.is_finite() && spec.size_scale > 0.0) {
        return Err(CorpusError::InvalidSpec {
            reason: format!("size_scale must be finite and > 0, got {}", spec.size_scale),
        });
    }
    for i in 0..spec.users {
        let dir = user_maildir(root, i);
        if dir.exists() {
            return Err(CorpusError::Exists { path: dir });
        }
    }
    let folders: &[Folder] = if spec.folders { FOLDERS } else { &FOLDERS[..1] };
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, spec.users.max(1));
    let mut results: Vec<UserSlot> = (0..spec.users).map(|_| None).collect();
    std::thread::scope(|scope| {
        let chunks: Vec<(usize, &mut [UserSlot])> = {
            let per = spec.users.div_ceil(threads).max(1);
            results
                .chunks_mut(per)
                .enumerate()
                .map(|(c, s)| (c * per, s))
                .collect()
        };
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|(first, slots)| {
                scope.spawn(move || {
                    for (k, slot) in slots.iter_mut().enumerate() {
                        *slot = Some(generate_user(spec, root, first + k, folders));
                    }
                })
            })
            .collect();
        for h in handles {
            // A panic leaves its slots empty; reported below as CorpusError::Worker.
            let _ = h.join();
        }
    });
    let mut users = Vec::with_capacity(spec.users);
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Some(r) => users.push(r?),
            None => {
                return Err(CorpusError::Worker {
                    path: user_maildir(root, i),
                })
            }
        }
    }
    Ok(stats::merge(users))
}

fn generate_user(
    spec: &Spec,
    root: &Path,
    index: usize,
    folders: &[Folder],
) -> Result<stats::UserStats, CorpusError> {
    let mut gen = Generator::for_user(spec.seed, index, spec.size_scale);
    // A second stream for folder picks, flags and file names, so message content does not
    // depend on the layout choices.
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    rng.set_stream((1u64 << 40) + index as u64);
    let writer = maildir::UserWriter {
        maildir: user_maildir(root, index),
        folders,
        messages: spec.messages_per_user,
    };
    writer.run(&mut gen, &mut rng)
}
