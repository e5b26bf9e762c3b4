//! One checker session: a connection with its own model and RNG, doing random commands and
//! meeting the others at checkpoints. Every check that fails panics with the reason; the
//! runner adds the seed and every session's history.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::model::{expand, hash_bytes, Effects, Facts, Model};
use super::{Shared, Snap, HISTORY, MAILBOXES};
use crate::support::imap::{Client, Reply, Resp};

/// One kind of step a session can take.
type Op = fn(&mut Session);

/// Commands each session runs between checkpoints.
const OPS_PER_ROUND: usize = 8;
/// How long a change made while a session idles may take to be announced (a bound on a
/// response that is owed, not a speed claim).
const IDLE_PATIENCE: Duration = Duration::from_secs(10);

/// A message of about `size` body octets with CRLF line ends; `multipart` gives it a
/// text part and a base64 attachment (so BODYSTRUCTURE has parts).
pub fn message(subject: &str, size: usize, multipart: bool) -> String {
    let mut m = format!(
        "From: Sender <sender@example.net>\r\nTo: Alice <alice@example.org>\r\n\
         Subject: {subject}\r\nMessage-ID: <{subject}@example.net>\r\n\
         Date: Mon, 7 Feb 1994 21:52:25 -0800\r\n"
    );
    let mut text = String::new();
    while text.len() < size {
        text.push_str(&format!(
            "line {} of {subject}, some words to fill it\r\n",
            text.len()
        ));
    }
    if multipart {
        m.push_str(&format!(
            "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b-{subject}\"\r\n\r\n\
             --b-{subject}\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n{text}\
             --b-{subject}\r\nContent-Type: application/octet-stream\r\n\
             Content-Transfer-Encoding: base64\r\n\r\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYX\r\n\
             --b-{subject}--\r\n"
        ));
    } else {
        m.push_str("\r\n");
        m.push_str(&text);
    }
    m
}

fn set_of(nums: &[u32]) -> String {
    nums.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn short(cmd: &str) -> &str {
    let cut = cmd.find(['{', '\r']).unwrap_or(cmd.len());
    &cmd[..cut]
}

pub struct Session {
    id: usize,
    c: Client,
    m: Model,
    rng: ChaCha8Rng,
    sh: Arc<Shared>,
    appended: u32,
    keyword: String,
}

impl Session {
    pub fn start(id: usize, addr: SocketAddr, sh: Arc<Shared>) -> Session {
        let rng = ChaCha8Rng::seed_from_u64(sh.seed ^ (id as u64).wrapping_mul(0x9e37_79b9));
        let mut s = Session {
            id,
            c: Client::connect(addr),
            m: Model {
                id,
                ..Model::default()
            },
            rng,
            sh,
            appended: 0,
            keyword: format!("$s{id}"),
        };
        s.must("LOGIN alice pw");
        let (_, ef, _) = s.cmd("CAPABILITY");
        if ef.capability.is_some_and(|c| c.contains(" CONDSTORE")) {
            s.sh.condstore.store(true, Ordering::SeqCst);
        }
        s.select(id % MAILBOXES.len());
        s
    }

    pub fn run(mut self) {
        loop {
            for _ in 0..OPS_PER_ROUND {
                if self.sh.failed.load(Ordering::SeqCst) {
                    panic!("aborted");
                }
                self.op();
            }
            if !self.checkpoint() {
                break;
            }
        }
        self.cmd("LOGOUT");
    }

    fn fail(&self, msg: impl std::fmt::Display) -> ! {
        panic!(
            "{msg}\n  (session {} on {}, seed {}; model: {} messages {:?})",
            self.id,
            MAILBOXES[self.m.mbox],
            self.sh.seed,
            self.m.uids.len(),
            self.m.uids
        )
    }

    fn note(&self, line: String) {
        let mut h = self.sh.history[self.id].lock().unwrap();
        if h.len() == HISTORY {
            h.pop_front();
        }
        h.push_back(line);
    }

    fn note_reply(&self, mark: u64, cmd: &str, untagged: &[Resp], done: &str) {
        let mut u: String = untagged.iter().map(|r| r.text()).collect();
        if let Some(log) = &self.sh.log {
            let line = format!("#{mark} s{} {}\n{u}{done}", self.id, short(cmd));
            let _ = std::io::Write::write_all(&mut *log.lock().unwrap(), line.as_bytes());
        }
        u = u.replace("\r\n", " | ");
        if u.len() > 300 {
            let mut cut = 300;
            while !u.is_char_boundary(cut) {
                cut -= 1;
            }
            u.truncate(cut);
            u.push_str("...");
        }
        self.note(format!(
            "#{mark} s{} {} => {} <{u}>",
            self.id,
            short(cmd),
            done.trim_end()
        ));
    }

    /// Applies `resp` to the model, failing the run on an inconsistency.
    fn apply(&mut self, what: &str, resp: &Resp, ef: &mut Effects) {
        let sh = Arc::clone(&self.sh);
        if let Err(e) = self.m.apply(&sh.common(), resp, ef) {
            self.fail(format!("{}: {e} (in {:?})", short(what), resp.text()));
        }
    }

    /// Sends a command, records it, applies every response; BAD fails the run.
    fn cmd(&mut self, text: &str) -> (Reply, Effects, u64) {
        let mark = self.sh.mark.fetch_add(1, Ordering::SeqCst);
        let r = self.c.cmd(text);
        self.note_reply(mark, text, &r.untagged, &r.done.text());
        let mut ef = Effects::default();
        for u in &r.untagged {
            self.apply(text, u, &mut ef);
        }
        let done = r.done.clone();
        self.apply(text, &done, &mut ef);
        if r.status() != "OK" && r.status() != "NO" {
            self.fail(format!("{}: {}", short(text), r.done.text()));
        }
        (r, ef, mark)
    }

    /// [`Self::cmd`] that must answer OK.
    fn must(&mut self, text: &str) -> (Reply, Effects, u64) {
        let out = self.cmd(text);
        if out.0.status() != "OK" {
            self.fail(format!("{}: {}", short(text), out.0.done.text()));
        }
        out
    }

    fn count(&self, what: &str) {
        self.sh.count(what);
    }

    /// Learns the UIDs and flags of slots only EXISTS announced, and the flags of
    /// messages a FETCH without FLAGS gave the UID of (a `FETCH 1:* (UID ENVELOPE)` right
    /// after an EXISTS): a checkpoint compares every message's flags, and `\Recent` is
    /// known only from FLAGS.
    fn fill(&mut self) {
        let mut idle_rounds = 0;
        for _ in 0..50 {
            let unlearned = |m: &Model| -> Vec<usize> {
                (0..m.uids.len())
                    .filter(|&i| m.uids[i] == 0 || !m.flags.contains_key(&m.uids[i]))
                    .collect()
            };
            let todo = unlearned(&self.m);
            let (Some(&a), Some(&b)) = (todo.first(), todo.last()) else {
                return;
            };
            let before = todo.len();
            self.fetch_checked("", &format!("{}:{}", a + 1, b + 1), "UID FLAGS");
            let after = unlearned(&self.m).len();
            if after >= before {
                idle_rounds += 1;
                if idle_rounds > 5 {
                    self.fail("messages announced by EXISTS never got a UID and FLAGS");
                }
                self.must("NOOP");
            }
        }
        self.fail("could not learn the UIDs of new messages in 50 rounds");
    }

    /// `{prefix}FETCH {set} ({items})`, where `items` has UID, checked for completeness: OK
    /// answers every message asked for (known UIDs and slots only EXISTS announced alike);
    /// NO is allowed only as `[EXPUNGEISSUED]` (RFC 5530 §3; RFC 2180 §4.1.2: a message
    /// another session expunged, which cannot be announced during FETCH, RFC 3501 §7.4.1),
    /// with at least one message left out, and every known one left out must then be
    /// announced expunged. UID FETCH skips UIDs expunged meanwhile and answers OK (RFC 3501
    /// §6.4.8, issue 15 #20); those too must be announced expunged. The data that did come
    /// is checked like any other.
    fn fetch_checked(&mut self, prefix: &str, set: &str, items: &str) -> Reply {
        let n = self.m.uids.len();
        let (asked, slots): (Vec<u32>, Vec<usize>) = if prefix.is_empty() {
            let slots: Vec<usize> = expand(&set.replace('*', &n.to_string()))
                .into_iter()
                .filter(|&s| s >= 1 && s as usize <= n)
                .map(|s| s as usize - 1)
                .collect();
            let known = slots
                .iter()
                .map(|&i| self.m.uids[i])
                .filter(|&u| u != 0)
                .collect();
            (known, slots)
        } else {
            let known = self.m.known();
            let uids = expand(set).into_iter().filter(|u| known.contains(u));
            (uids.collect(), Vec::new())
        };
        let cmd = format!("{prefix}FETCH {set} ({items})");
        let (r, ef, _) = self.cmd(&cmd);
        let left_out: Vec<u32> = asked
            .iter()
            .copied()
            .filter(|u| !ef.fetched.contains(u))
            .collect();
        // no EXPUNGE during a FETCH by sequence numbers: the slots asked are where they were
        let unnamed = slots.iter().filter(|&&i| self.m.uids[i] == 0).count();
        let uid_cmd = !prefix.is_empty();
        if r.status() == "OK" {
            if uid_cmd {
                self.settle(&cmd, &left_out);
            } else if let Some(u) = left_out.first() {
                self.fail(format!("{cmd}: OK without an answer for UID {u}"));
            }
            if unnamed > 0 {
                self.fail(format!("{cmd}: OK with {unnamed} messages left unnamed"));
            }
            return r;
        }
        self.count("fetch EXPUNGEISSUED");
        if uid_cmd || !r.done.text().contains("[EXPUNGEISSUED]") {
            self.fail(format!("{cmd}: {}", r.done.text().trim_end()));
        }
        if left_out.is_empty() && unnamed == 0 {
            self.fail(format!(
                "{cmd}: {} although every message asked for was answered",
                r.done.text().trim_end()
            ));
        }
        self.settle(&cmd, &left_out);
        r
    }

    /// `uids`, which a command left out as expunged, must be announced gone: by that
    /// command or, where it could not send EXPUNGE (RFC 3501 §7.4.1), by the next NOOP.
    fn settle(&mut self, what: &str, uids: &[u32]) {
        if uids.iter().any(|u| self.m.seq_of(*u).is_some()) {
            self.must("NOOP");
        }
        if let Some(u) = uids.iter().find(|u| self.m.seq_of(**u).is_some()) {
            self.fail(format!(
                "{}: left UID {u} out as expunged, yet no EXPUNGE came for it",
                short(what)
            ));
        }
    }

    fn select(&mut self, mbox: usize) {
        self.m.reset(mbox);
        let (_, ef, _) = self.must(&format!("SELECT {}", MAILBOXES[mbox]));
        self.fill();
        if ef.recent_count.unwrap_or(0) > 0 {
            // UID SEARCH may carry EXPUNGEs after its result (RFC 3501 §7.4.1)
            let known: HashSet<u32> = self.m.known().into_iter().collect();
            let (_, ef, _) = self.must("UID SEARCH RECENT");
            let sh = Arc::clone(&self.sh);
            for u in ef.search.unwrap_or_default() {
                if !known.contains(&u) {
                    self.fail(format!("SEARCH RECENT gave UID {u}, not in the mailbox"));
                }
                if self.m.seq_of(u).is_none() {
                    continue; // expunged meanwhile
                }
                if let Err(e) = self.m.claim_recent(&sh.common(), u) {
                    self.fail(e);
                }
            }
            // its answer may announce new messages (RFC 3501 §7.4.1), owed a UID and FLAGS
            // before the next command looks at the model
            self.fill();
        }
    }

    fn pick(&mut self, max: usize) -> Vec<u32> {
        let known = self.m.known();
        let k = self.rng.gen_range(1..=max);
        let mut v: Vec<u32> = known.choose_multiple(&mut self.rng, k).copied().collect();
        v.sort_unstable();
        v
    }

    /// `uids` as a UID set or, half the time, as sequence numbers; the command prefix.
    fn target(&mut self, uids: &[u32]) -> (&'static str, String) {
        if self.rng.gen_bool(0.6) {
            ("UID ", set_of(uids))
        } else {
            let seqs: Vec<u32> = uids.iter().filter_map(|&u| self.m.seq_of(u)).collect();
            ("", set_of(&seqs))
        }
    }

    fn op(&mut self) {
        let n = self.m.known().len();
        let few = n < 6;
        let many = n > 30;
        let table: [(u32, Op); 11] = [
            (if few { 8 } else { 3 }, Session::append),
            (4, Session::store_own),
            (1, Session::store_shared),
            (
                if few {
                    0
                } else if many {
                    5
                } else {
                    2
                },
                Session::expunge,
            ),
            (2, Session::copy),
            (if many { 3 } else { 1 }, Session::move_),
            (3, Session::fetch),
            (2, Session::search),
            (1, Session::idle),
            (1, Session::noop),
            (
                if self.rng.gen_bool(0.3) { 1 } else { 0 },
                Session::reselect,
            ),
        ];
        let total: u32 = table.iter().map(|t| t.0).sum();
        let mut x = self.rng.gen_range(0..total);
        for (w, f) in table {
            if x < w {
                if n == 0 {
                    // nothing to name: only an APPEND makes sense
                    self.append();
                } else {
                    f(self);
                }
                self.fill();
                return;
            }
            x -= w;
        }
    }

    fn append(&mut self) {
        self.count("append");
        let target = if self.rng.gen_bool(0.7) {
            self.m.mbox
        } else {
            1 - self.m.mbox
        };
        self.appended += 1;
        let subject = format!("s{}-{}", self.id, self.appended);
        let size = self.rng.gen_range(0..2500);
        let msg = message(&subject, size, self.rng.gen_bool(0.3));
        let mine = self.rng.gen_bool(0.5);
        let mut flags = Vec::new();
        if mine {
            flags.push(self.keyword.clone());
        }
        if self.rng.gen_bool(0.3) {
            flags.push("\\Seen".into());
        }
        let (day, secs) = (self.rng.gen_range(10..=28), self.rng.gen_range(0..86_400));
        let (zone, zone_secs) = *[("+0000", 0), ("+0130", 5400), ("-0500", -18_000)]
            .choose(&mut self.rng)
            .unwrap();
        let date = format!(
            "{day}-Mar-2021 {:02}:{:02}:{:02} {zone}",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        );
        // 2021-03-01T00:00:00Z
        let ts = 1_614_556_800 + (day - 1) * 86_400 + secs - zone_secs;
        let cmd = format!(
            "APPEND {} ({}) \"{date}\" {{{}+}}\r\n{msg}",
            MAILBOXES[target],
            flags.join(" "),
            msg.len()
        );
        let (_, ef, mark) = self.must(&cmd);
        let Some(uid) = ef.appenduid else {
            self.fail("APPEND OK without APPENDUID (UIDPLUS is announced)");
        };
        let facts = Facts {
            size: Some(msg.len() as u32),
            internaldate: Some(ts),
            body: Some((msg.len(), hash_bytes(msg.as_bytes()))),
            ..Facts::default()
        };
        let key = (target, uid);
        if let Err(e) = self.sh.facts.lock().unwrap().record(key, &facts) {
            self.fail(format!(
                "APPENDed UID {uid} as told differs from what was sent: {e}"
            ));
        }
        self.sh
            .keywords
            .lock()
            .unwrap()
            .insert((key, self.id), mine);
        self.sh.added.lock().unwrap().push((key, mark));
    }

    /// +FLAGS / -FLAGS of this session's own keyword: nobody else touches it, so every
    /// FLAGS answer for it must show this change, and the checkpoint must find the last one.
    fn store_own(&mut self) {
        let uids = self.pick(3);
        let add = self.rng.gen_bool(0.5);
        let (prefix, set) = self.target(&uids);
        let sign = if add { '+' } else { '-' };
        let cmd = format!("{prefix}STORE {set} {sign}FLAGS ({})", self.keyword);
        let (r, ef, _) = self.cmd(&cmd);
        self.count("store");
        let mbox = self.m.mbox;
        let mut kw = self.sh.keywords.lock().unwrap();
        for &u in &uids {
            if r.status() == "OK" {
                kw.insert(((mbox, u), self.id), add);
            } else {
                kw.remove(&((mbox, u), self.id));
            }
        }
        drop(kw);
        if r.status() != "OK" {
            self.count("store NO");
            return;
        }
        let lower = self.keyword.to_ascii_lowercase();
        for (u, flags, _) in &ef.flags {
            if uids.contains(u) && flags.contains(&lower) != add {
                self.fail(format!(
                    "{cmd}: FLAGS for UID {u} answered {flags:?} (not atomic: another change lost this one)"
                ));
            }
        }
    }

    fn store_shared(&mut self) {
        self.count("store shared");
        let uids = self.pick(3);
        let (prefix, set) = self.target(&uids);
        let sign = if self.rng.gen_bool(0.5) { '+' } else { '-' };
        let flag = ["\\Flagged", "\\Seen", "\\Answered"]
            .choose(&mut self.rng)
            .unwrap();
        self.cmd(&format!("{prefix}STORE {set} {sign}FLAGS ({flag})"));
    }

    fn expunge(&mut self) {
        self.count("expunge");
        let uids = self.pick(2);
        let set = set_of(&uids);
        self.cmd(&format!("UID STORE {set} +FLAGS (\\Deleted)"));
        let cmd = if self.rng.gen_bool(0.7) {
            format!("UID EXPUNGE {set}")
        } else {
            "EXPUNGE".into()
        };
        let (r, _, _) = self.cmd(&cmd);
        if r.status() != "OK" {
            self.count("expunge NO");
            return;
        }
        let known = self.m.known();
        if let Some(u) = uids.iter().find(|u| known.contains(u)) {
            self.fail(format!("{cmd} OK but UID {u} (\\Deleted) is still there"));
        }
    }

    /// Checks a COPY/MOVE of `asked` from the selected mailbox to `dest` and links the
    /// COPYUID pairs. A message another session expunged meanwhile is not copied: RFC 4315
    /// §3 has COPYUID name only the messages copied (none when nothing was: NO
    /// [EXPUNGEISSUED] for COPY, OK for UID COPY); each asked UID left out must be
    /// announced expunged.
    fn copied(
        &mut self,
        cmd: &str,
        r: &Reply,
        asked: &[u32],
        dest: usize,
        ef: &Effects,
        mark: u64,
    ) {
        let empty = (Vec::new(), Vec::new());
        let (src, dst) = ef.copyuid.as_ref().unwrap_or(&empty);
        if r.status() != "OK" {
            self.count("copy NO");
            if !r.done.text().contains("[EXPUNGEISSUED]") || ef.copyuid.is_some() {
                self.fail(format!("{cmd}: {}", r.done.text().trim_end()));
            }
        }
        // OK without COPYUID is a COPY/MOVE that found nothing left to copy: `settle`
        // below fails it unless each UID asked for is announced expunged
        if src.len() != dst.len() || src.iter().any(|u| !asked.contains(u)) {
            self.fail(format!("{cmd}: COPYUID {src:?} -> {dst:?} for {asked:?}"));
        }
        let left_out: Vec<u32> = asked.iter().copied().filter(|u| !src.contains(u)).collect();
        self.settle(cmd, &left_out);
        let from = self.m.mbox;
        for (&s, &d) in src.iter().zip(dst) {
            let r = self.sh.facts.lock().unwrap().link((from, s), (dest, d));
            if let Err(e) = r {
                self.fail(format!("{cmd}: {e}"));
            }
            let mut kw = self.sh.keywords.lock().unwrap();
            if let Some(&k) = kw.get(&((from, s), self.id)) {
                kw.insert(((dest, d), self.id), k);
            }
            drop(kw);
            self.sh.added.lock().unwrap().push(((dest, d), mark));
        }
    }

    fn copy(&mut self) {
        self.count("copy");
        let uids = self.pick(3);
        let dest = if self.rng.gen_bool(0.7) {
            1 - self.m.mbox
        } else {
            self.m.mbox
        };
        let (prefix, set) = self.target(&uids);
        let cmd = format!("{prefix}COPY {set} {}", MAILBOXES[dest]);
        let (r, ef, mark) = self.cmd(&cmd);
        self.copied(&cmd, &r, &uids, dest, &ef, mark);
    }

    fn move_(&mut self) {
        self.count("move");
        let uids = self.pick(3);
        let dest = 1 - self.m.mbox;
        let (prefix, set) = self.target(&uids);
        let cmd = format!("{prefix}MOVE {set} {}", MAILBOXES[dest]);
        let (r, ef, mark) = self.cmd(&cmd);
        self.copied(&cmd, &r, &uids, dest, &ef, mark);
        // RFC 6851 §3.3: MOVE sends the EXPUNGEs of what it moved
        let known = self.m.known();
        let moved = &ef.copyuid.as_ref().map(|c| c.0.clone()).unwrap_or_default();
        if let Some(u) = moved.iter().find(|u| known.contains(u)) {
            self.fail(format!("{cmd}: UID {u} moved but no EXPUNGE for it"));
        }
    }

    fn fetch(&mut self) {
        self.count("fetch");
        let mut items = vec!["UID"];
        for (p, item) in [
            (0.7, "FLAGS"),
            (0.4, "ENVELOPE"),
            (0.3, "BODYSTRUCTURE"),
            (0.4, "RFC822.SIZE"),
            (0.4, "INTERNALDATE"),
            (0.15, "BODY.PEEK[]"),
        ] {
            if self.rng.gen_bool(p) {
                items.push(item);
            }
        }
        if self.sh.condstore.load(Ordering::SeqCst) && self.rng.gen_bool(0.5) {
            items.push("MODSEQ");
        }
        let set = match self.rng.gen_range(0..4) {
            0 => "1:*".to_string(),
            1 => {
                let n = self.m.uids.len() as u32;
                let a = self.rng.gen_range(1..=n);
                format!("{a}:{}", self.rng.gen_range(a..=n))
            }
            _ => {
                let uids = self.pick(4);
                let (prefix, set) = self.target(&uids);
                format!("{prefix}{set}")
            }
        };
        let (prefix, set) = match set.strip_prefix("UID ") {
            Some(s) => ("UID ", s.to_string()),
            None => ("", set),
        };
        self.fetch_checked(prefix, &set, &items.join(" "));
    }

    fn search(&mut self) {
        self.count("search");
        let before = self.m.clone();
        let kw = self.keyword.clone();
        let lower = kw.to_ascii_lowercase();
        match self.rng.gen_range(0..4) {
            0 => {
                let (_, ef, _) = self.must(&format!("UID SEARCH KEYWORD {kw}"));
                let hits: BTreeSet<u32> = ef.search.unwrap_or_default().into_iter().collect();
                let expect = self.sh.keywords.lock().unwrap().clone();
                let mut missing = Vec::new();
                for u in before.known() {
                    match expect.get(&((before.mbox, u), self.id)) {
                        Some(false) if hits.contains(&u) => self.fail(format!(
                            "SEARCH KEYWORD {kw} finds UID {u} whose last STORE removed it"
                        )),
                        Some(true) if !hits.contains(&u) => missing.push(u),
                        _ => {}
                    }
                }
                if !missing.is_empty() {
                    // either expunged meanwhile or wrong: its FLAGS tell
                    let (_, ef, _) = self.cmd(&format!("UID FETCH {} (FLAGS)", set_of(&missing)));
                    // (unsolicited FETCH FLAGS of other messages may come too)
                    let wrong = ef
                        .flags
                        .iter()
                        .find(|(u, f, _)| missing.contains(u) && f.contains(&lower));
                    if let Some((u, f, _)) = wrong {
                        self.fail(format!(
                            "SEARCH KEYWORD {kw} misses UID {u} whose FLAGS are {f:?}"
                        ));
                    }
                }
            }
            1 => {
                let (_, ef, _) = self.must("SEARCH ALL");
                let hits = ef.search.unwrap_or_default();
                if hits.windows(2).any(|w| w[0] >= w[1])
                    || hits
                        .iter()
                        .any(|&s| s == 0 || s as usize > before.uids.len())
                {
                    self.fail(format!(
                        "SEARCH ALL gave {hits:?} with {} messages announced",
                        before.uids.len()
                    ));
                }
            }
            r => {
                let key = if r == 2 { "RECENT" } else { "UNSEEN" };
                let (_, ef, _) = self.must(&format!("UID SEARCH {key}"));
                let known = before.known();
                for u in ef.search.unwrap_or_default() {
                    if !known.contains(&u) {
                        self.fail(format!("UID SEARCH {key} gave UID {u}, never announced"));
                    }
                    if key == "RECENT" && !before.recent.contains(&u) {
                        self.fail(format!(
                            "UID SEARCH RECENT gave UID {u}, never \\Recent in FETCH"
                        ));
                    }
                }
            }
        }
    }

    fn noop(&mut self) {
        self.count("noop");
        self.must("NOOP");
    }

    fn reselect(&mut self) {
        self.count("select");
        let mbox = self.rng.gen_range(0..MAILBOXES.len());
        self.select(mbox);
    }

    /// What this session is owed while idling since `mark`: UIDs it knew that others
    /// have seen expunged but it has not, and UIDs added by commands sent after `mark`
    /// when no EXISTS came.
    fn idle_owed(&self, start: &HashSet<u32>, mark: u64, grew: bool) -> (Vec<u32>, Vec<u32>) {
        let removed = self.sh.removed.lock().unwrap();
        let known: HashSet<u32> = self.m.known().into_iter().collect();
        let rem = start
            .iter()
            .copied()
            .filter(|u| known.contains(u) && removed.contains(&(self.m.mbox, *u)))
            .collect();
        let add = if grew {
            Vec::new()
        } else {
            let added = self.sh.added.lock().unwrap();
            added
                .iter()
                .filter(|&&((mb, u), mk)| {
                    mb == self.m.mbox && mk > mark && !removed.contains(&(mb, u))
                })
                .map(|&((_, u), _)| u)
                .collect()
        };
        (rem, add)
    }

    /// RFC 2177: while idling, changes by others must arrive without a command.
    fn idle(&mut self) {
        self.count("idle");
        let tag = self.c.tag();
        let mark0 = self.sh.mark.fetch_add(1, Ordering::SeqCst);
        self.c.send(format!("{tag} IDLE\r\n"));
        let mut ef = Effects::default();
        let mut seen = Vec::new();
        loop {
            let r = self.c.read();
            if r.is_continuation() {
                break;
            }
            if r.tag().is_some() {
                self.fail(format!("IDLE refused: {}", r.text()));
            }
            self.apply("IDLE", &r, &mut ef);
            seen.push(r);
        }
        let mark = self.sh.mark.fetch_add(1, Ordering::SeqCst);
        let start: HashSet<u32> = self.m.known().into_iter().collect();
        let t0 = Instant::now();
        let until = t0 + Duration::from_millis(self.rng.gen_range(30..300));
        let mut during = Effects::default();
        let mut owed_adds = Vec::new();
        loop {
            let now = Instant::now();
            let wait = if now < until {
                until - now
            } else {
                let (rem, add) = self.idle_owed(&start, mark, during.grew);
                if rem.is_empty() && add.is_empty() {
                    break;
                }
                if now > t0 + IDLE_PATIENCE {
                    if !rem.is_empty() {
                        self.note_reply(mark0, "IDLE", &seen, "(still idling)");
                        self.fail(format!(
                            "IDLE: no EXPUNGE within {IDLE_PATIENCE:?} for UIDs {rem:?}, \
                             expunged by others after IDLE began"
                        ));
                    }
                    owed_adds = add;
                    break;
                }
                Duration::from_millis(50)
            };
            if let Some(r) = self.c.read_within(wait) {
                if r.tag().is_some() || r.is_continuation() {
                    self.fail(format!("during IDLE: {}", r.text()));
                }
                self.apply("IDLE", &r, &mut during);
                seen.push(r);
            }
        }
        self.c.send("DONE\r\n");
        let r = self.c.until(&tag);
        for u in &r.untagged {
            self.apply("IDLE", u, &mut ef);
        }
        seen.extend(r.untagged.iter().cloned());
        self.note_reply(mark0, "IDLE", &seen, &r.done.text());
        if r.status() != "OK" {
            self.fail(format!("IDLE: {}", r.done.text()));
        }
        self.fill();
        let known = self.m.known();
        if let Some(u) = owed_adds.iter().find(|u| known.contains(u)) {
            self.fail(format!(
                "IDLE: no EXISTS within {IDLE_PATIENCE:?} for UID {u}, added by a command sent \
                 after IDLE began and still there after DONE"
            ));
        }
    }

    /// All sessions stop; each checks its model against the server and the others.
    /// False when the run is over.
    fn checkpoint(&mut self) -> bool {
        self.count("checkpoint");
        let sh = Arc::clone(&self.sh);
        let gate = |s: &Session| match sh.gate.wait() {
            Ok(leader) => leader,
            Err(e) => s.fail(e),
        };
        if gate(self) && Instant::now() >= sh.deadline {
            sh.stop.store(true, Ordering::SeqCst);
        }
        // everyone is quiet: a NOOP must bring each model to the same state
        self.must("NOOP");
        self.fill();
        let model = self.m.clone();
        let (_, ef, _) = self.must("UID SEARCH ALL");
        let all = ef.search.unwrap_or_default();
        if all != model.known() {
            self.fail(format!(
                "checkpoint: UID SEARCH ALL {all:?} but the session was told {:?}",
                model.known()
            ));
        }
        let mut flags = BTreeMap::new();
        if !all.is_empty() {
            let (_, ef, _) = self.must("UID FETCH 1:* (UID FLAGS)");
            for (u, f, recent) in ef.flags {
                if model.flags.get(&u) != Some(&f) || model.recent.contains(&u) != recent {
                    self.fail(format!(
                        "checkpoint: UID {u} has FLAGS {f:?} (recent {recent}) but the session \
                         was told {:?} (recent {})",
                        model.flags.get(&u),
                        model.recent.contains(&u)
                    ));
                }
                flags.insert(u, f);
            }
        }
        if flags.keys().copied().collect::<Vec<_>>() != all {
            self.fail(format!(
                "checkpoint: FETCH 1:* gave {:?}, SEARCH ALL {all:?}",
                flags.keys()
            ));
        }
        let (r, _, _) = self.must(&format!("STATUS {} (MESSAGES)", MAILBOXES[model.mbox]));
        let status = r.lines("* STATUS").join("");
        if !status.contains(&format!("(MESSAGES {})", all.len())) {
            self.fail(format!(
                "checkpoint: {status} but {} messages in the session",
                all.len()
            ));
        }
        let mine = Snap {
            mbox: model.mbox,
            flags,
        };
        sh.snaps.lock().unwrap()[self.id] = Some(mine.clone());
        gate(self);
        let snaps = sh.snaps.lock().unwrap().clone();
        for (other, s) in snaps.iter().enumerate() {
            if let Some(s) = s.as_ref().filter(|s| s.mbox == mine.mbox && **s != mine) {
                self.fail(format!(
                    "checkpoint: session {other} sees {:?}, this one {:?}",
                    s.flags, mine.flags
                ));
            }
        }
        let lower = self.keyword.to_ascii_lowercase();
        let expect = sh.keywords.lock().unwrap().clone();
        for (((mb, u), who), want) in expect {
            let Some(snap) = snaps.iter().flatten().find(|s| s.mbox == mb) else {
                continue;
            };
            if who != self.id {
                continue;
            }
            if let Some(f) = snap.flags.get(&u) {
                if f.contains(&lower) != want {
                    self.fail(format!(
                        "checkpoint: UID {u} in {} has {f:?}, but this session's last STORE \
                         left {} {}",
                        MAILBOXES[mb],
                        self.keyword,
                        if want { "set" } else { "unset" }
                    ));
                }
            }
        }
        let recent = sh.recent.lock().unwrap().clone();
        if let Some(u) = mine
            .flags
            .keys()
            .find(|&&u| !recent.contains_key(&(mine.mbox, u)))
        {
            self.fail(format!(
                "checkpoint: UID {u} was \\Recent to no session (RFC 3501 §2.3.2)"
            ));
        }
        gate(self);
        !sh.stop.load(Ordering::SeqCst)
    }
}
