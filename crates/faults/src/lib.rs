//! Fault points of the store's write paths, for crash-safety tests of the real binary.
//!
//! Each step of a write that a crash or an I/O error can interrupt (writing a message into
//! `tmp/`, its fsync, the link into `new/`/`cur/`, a directory fsync, the dovecot-uidlist
//! append, the index commit, a STORE rename, an EXPUNGE unlink, a COPY link, a MOVE rename)
//! calls [`hit`] with its [`Point`] just before doing its work. Normally that does nothing.
//!
//! **Why this is compiled into release builds.** A test can kill a process at a random
//! moment, but it cannot make the real daemon stop *exactly* between, say, the rename into
//! `new/` and the uidlist append, or make exactly that fsync fail with ENOSPC. SQLite keeps
//! its fault-injection hooks (`sqlite3_test_control`, the I/O error and malloc failure
//! hooks) in the shipped library for the same reason: the code that runs in production is
//! the code whose crash behaviour is tested. `tests/it/system/crash_points.rs` starts
//! `maildex serve` with a plan and checks what a restart finds.
//!
//! **Inert without the variable.** The plan comes from `MAILDEX_FAULT`, read once (the
//! first time any point is hit); when it is unset every [`hit`] is one read of an
//! initialised `OnceLock` (an acquire load) and a branch. A malformed value is reported on
//! stderr once and ignored: it never changes behaviour.
//!
//! Syntax: `MAILDEX_FAULT=<point>:<nth>:<action>`, e.g. `uidlist_append:3:kill`: the third
//! time this process reaches `uidlist_append`, it acts. Actions: `kill` (SIGKILL to itself:
//! nothing after the point runs, no destructor, no flush), `enospc` and `eio` (the step
//! returns that `io::Error` instead of doing its work). Counting is per point, over the
//! whole process (every thread, every user). An optional fourth part, `after=<point>`,
//! starts the count at the first hit of that other point: `index_commit:1:eio:after=tmp_write`
//! fails the first index commit of the first delivery (which writes its message into
//! `tmp/` before it commits), whatever commits a user's first-use sync made before it; the
//! number of those depends on how recently the Maildir changed, so a test cannot count
//! them in advance. When a fault fires, one line
//! `maildex-fault: fired <point>:<nth>:<action>` goes to stderr first, so a test can tell
//! whether the plan was reached.

use std::fmt;
use std::io;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

/// The environment variable that holds the plan.
pub const ENV: &str = "MAILDEX_FAULT";

/// A step of a write path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Point {
    /// Writing a message's bytes out to its file in `tmp/` (the last flush).
    TmpWrite,
    /// fsync of the file in `tmp/`.
    TmpFsync,
    /// The link (or no-replace rename) of a delivered file into `new/` or `cur/`.
    Link,
    /// fsync of a `new/` or `cur/` directory after files were added or removed there.
    DirFsync,
    /// Appending records to dovecot-uidlist.
    UidlistAppend,
    /// Committing an index write transaction.
    IndexCommit,
    /// The rename that gives a message new flags (STORE).
    FlagRename,
    /// Unlinking a message file (EXPUNGE).
    Unlink,
    /// The link of a copy into the destination mailbox (COPY).
    CopyLink,
    /// The rename of a moved file into the destination mailbox (MOVE).
    MoveRename,
}

impl Point {
    /// Every point, in write-path order.
    pub const ALL: [Point; 10] = [
        Point::TmpWrite,
        Point::TmpFsync,
        Point::Link,
        Point::DirFsync,
        Point::UidlistAppend,
        Point::IndexCommit,
        Point::FlagRename,
        Point::Unlink,
        Point::CopyLink,
        Point::MoveRename,
    ];

    /// The name used in `MAILDEX_FAULT`.
    pub fn name(self) -> &'static str {
        match self {
            Point::TmpWrite => "tmp_write",
            Point::TmpFsync => "tmp_fsync",
            Point::Link => "link",
            Point::DirFsync => "dir_fsync",
            Point::UidlistAppend => "uidlist_append",
            Point::IndexCommit => "index_commit",
            Point::FlagRename => "flag_rename",
            Point::Unlink => "unlink",
            Point::CopyLink => "copy_link",
            Point::MoveRename => "move_rename",
        }
    }

    fn index(self) -> usize {
        Point::ALL.iter().position(|p| *p == self).unwrap_or(0)
    }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Point {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Point, PlanError> {
        Point::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| PlanError::UnknownPoint(s.to_string()))
    }
}

/// What a fault does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// SIGKILL to this process.
    Kill,
    /// The step fails with ENOSPC.
    Enospc,
    /// The step fails with EIO.
    Eio,
}

impl Action {
    /// The name used in `MAILDEX_FAULT`.
    pub fn name(self) -> &'static str {
        match self {
            Action::Kill => "kill",
            Action::Enospc => "enospc",
            Action::Eio => "eio",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Action {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Action, PlanError> {
        match s {
            "kill" => Ok(Action::Kill),
            "enospc" => Ok(Action::Enospc),
            "eio" => Ok(Action::Eio),
            other => Err(PlanError::UnknownAction(other.to_string())),
        }
    }
}

/// A `MAILDEX_FAULT` value that does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    /// Not `<point>:<nth>:<action>[:after=<point>]`.
    #[error("expected <point>:<nth>:<action>[:after=<point>], got {0:?}")]
    Shape(String),
    /// No such point.
    #[error("unknown fault point {0:?}")]
    UnknownPoint(String),
    /// No such action.
    #[error("unknown fault action {0:?} (kill, enospc, eio)")]
    UnknownAction(String),
    /// `nth` is not a number from 1 on.
    #[error("fault count must be a number from 1 on, got {0:?}")]
    Count(String),
}

/// One planned fault and the per-point hit counters.
#[derive(Debug)]
pub struct Plan {
    /// Where.
    pub point: Point,
    /// At which hit of `point` (1-based).
    pub nth: u64,
    /// What happens.
    pub action: Action,
    /// Hits of `point` count only once this point has been hit.
    pub after: Option<Point>,
    started: AtomicBool,
    hits: [AtomicU64; Point::ALL.len()],
}

impl Plan {
    /// A plan acting at hit `nth` (from 1) of `point`.
    pub fn new(point: Point, nth: u64, action: Action) -> Plan {
        Plan {
            point,
            nth,
            action,
            after: None,
            started: AtomicBool::new(true),
            hits: Default::default(),
        }
    }

    /// [`Plan::new`] whose count of `point` starts at the first hit of `after`.
    pub fn after(point: Point, nth: u64, action: Action, after: Point) -> Plan {
        Plan {
            after: Some(after),
            started: AtomicBool::new(false),
            ..Plan::new(point, nth, action)
        }
    }

    /// Parses `<point>:<nth>:<action>[:after=<point>]`.
    pub fn parse(s: &str) -> Result<Plan, PlanError> {
        let parts: Vec<&str> = s.trim().split(':').collect();
        let (point, nth, action, after) = match parts[..] {
            [point, nth, action] => (point, nth, action, None),
            [point, nth, action, after] => match after.strip_prefix("after=") {
                Some(a) => (point, nth, action, Some(a.parse::<Point>()?)),
                None => return Err(PlanError::Shape(s.to_string())),
            },
            _ => return Err(PlanError::Shape(s.to_string())),
        };
        let nth = nth
            .parse::<u64>()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| PlanError::Count(nth.to_string()))?;
        let (point, action) = (point.parse()?, action.parse()?);
        Ok(match after {
            Some(a) => Plan::after(point, nth, action, a),
            None => Plan::new(point, nth, action),
        })
    }

    /// Counts a hit of `point`; the action when this is the planned one.
    pub fn count(&self, point: Point) -> Option<Action> {
        if Some(point) == self.after {
            self.started.store(true, Ordering::SeqCst);
        }
        if point == self.point && !self.started.load(Ordering::SeqCst) {
            return None;
        }
        let n = self.hits[point.index()].fetch_add(1, Ordering::Relaxed) + 1;
        (point == self.point && n == self.nth).then_some(self.action)
    }

    /// Hits of `point` so far.
    pub fn hits(&self, point: Point) -> u64 {
        self.hits[point.index()].load(Ordering::Relaxed)
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.point, self.nth, self.action)?;
        match self.after {
            Some(a) => write!(f, ":after={a}"),
            None => Ok(()),
        }
    }
}

static PLAN: OnceLock<Option<Plan>> = OnceLock::new();

fn plan() -> Option<&'static Plan> {
    PLAN.get_or_init(|| {
        let value = std::env::var(ENV).ok()?;
        match Plan::parse(&value) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("maildex-fault: {ENV} ignored: {e}");
                None
            }
        }
    })
    .as_ref()
}

/// Called by a write step just before it does its work: `Ok(())` unless the plan says
/// this hit fails (then the step returns the error without doing anything) or kills the
/// process (then this does not return).
#[inline]
pub fn hit(point: Point) -> io::Result<()> {
    match plan() {
        None => Ok(()),
        Some(p) => act(p, point),
    }
}

#[cold]
fn act(plan: &Plan, point: Point) -> io::Result<()> {
    let Some(action) = plan.count(point) else {
        return Ok(());
    };
    eprintln!("maildex-fault: fired {plan}");
    match action {
        Action::Kill => {
            // SAFETY: kill(2) on our own pid with a constant signal; no memory is involved.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
            // SIGKILL cannot be caught; this is not reached
            std::process::abort()
        }
        Action::Enospc => Err(io::Error::from_raw_os_error(libc::ENOSPC)),
        Action::Eio => Err(io::Error::from_raw_os_error(libc::EIO)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_point_and_action() {
        for p in Point::ALL {
            for a in [Action::Kill, Action::Enospc, Action::Eio] {
                let s = format!("{p}:7:{a}");
                let plan = Plan::parse(&s).unwrap();
                assert_eq!((plan.point, plan.nth, plan.action), (p, 7, a));
                assert_eq!(plan.to_string(), s);
            }
        }
        assert_eq!(
            Plan::parse(" uidlist_append:3:kill\n").unwrap().point,
            Point::UidlistAppend
        );
        let plan = Plan::parse("index_commit:1:eio:after=tmp_write").unwrap();
        assert_eq!(plan.after, Some(Point::TmpWrite));
        assert_eq!(plan.to_string(), "index_commit:1:eio:after=tmp_write");
    }

    #[test]
    fn a_plan_with_after_counts_from_the_first_hit_of_that_point() {
        let plan = Plan::parse("index_commit:2:eio:after=tmp_write").unwrap();
        // hits before the first tmp_write do not count
        for _ in 0..5 {
            assert_eq!(plan.count(Point::IndexCommit), None);
        }
        assert_eq!(plan.count(Point::TmpWrite), None);
        assert_eq!(plan.count(Point::IndexCommit), None);
        assert_eq!(plan.count(Point::IndexCommit), Some(Action::Eio));
        assert_eq!(plan.count(Point::IndexCommit), None);
    }

    #[test]
    fn rejects_malformed_plans() {
        assert!(matches!(Plan::parse(""), Err(PlanError::Shape(_))));
        assert!(matches!(Plan::parse("link:1"), Err(PlanError::Shape(_))));
        assert!(matches!(
            Plan::parse("link:1:kill:x"),
            Err(PlanError::Shape(_))
        ));
        assert!(matches!(
            Plan::parse("link:1:kill:after=nowhere"),
            Err(PlanError::UnknownPoint(_))
        ));
        assert_eq!(
            Plan::parse("linky:1:kill").unwrap_err(),
            PlanError::UnknownPoint("linky".into())
        );
        assert_eq!(
            Plan::parse("link:1:boom").unwrap_err(),
            PlanError::UnknownAction("boom".into())
        );
        assert_eq!(
            Plan::parse("link:0:eio").unwrap_err(),
            PlanError::Count("0".into())
        );
        assert_eq!(
            Plan::parse("link:-1:eio").unwrap_err(),
            PlanError::Count("-1".into())
        );
        assert_eq!(
            Plan::parse("Link:1:eio").unwrap_err(),
            PlanError::UnknownPoint("Link".into())
        );
    }

    #[test]
    fn fires_once_at_the_nth_hit_of_its_point_only() {
        let plan = Plan::parse("dir_fsync:3:eio").unwrap();
        // other points never fire and do not advance this point's count
        for _ in 0..5 {
            assert_eq!(plan.count(Point::Link), None);
        }
        assert_eq!(plan.count(Point::DirFsync), None);
        assert_eq!(plan.count(Point::DirFsync), None);
        assert_eq!(plan.count(Point::DirFsync), Some(Action::Eio));
        assert_eq!(plan.count(Point::DirFsync), None);
        assert_eq!(plan.hits(Point::DirFsync), 4);
        assert_eq!(plan.hits(Point::Link), 5);
        assert_eq!(plan.hits(Point::Unlink), 0);
    }

    #[test]
    fn counting_is_shared_by_threads() {
        let plan = std::sync::Arc::new(Plan::parse("index_commit:500:enospc").unwrap());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let plan = std::sync::Arc::clone(&plan);
                std::thread::spawn(move || {
                    (0..250)
                        .filter(|_| plan.count(Point::IndexCommit).is_some())
                        .count()
                })
            })
            .collect();
        let fired: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(fired, 1, "exactly one of 1000 hits is the 500th");
        assert_eq!(plan.hits(Point::IndexCommit), 1000);
    }

    #[test]
    fn without_the_variable_nothing_happens() {
        // the test runner does not set MAILDEX_FAULT; every point passes
        if std::env::var_os(ENV).is_none() {
            for p in Point::ALL {
                for _ in 0..3 {
                    hit(p).unwrap();
                }
            }
            assert!(plan().is_none());
        }
    }
}
