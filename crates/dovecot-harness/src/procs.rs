//! Process tree helpers over /proc (Linux): descendants of a pid, their memory figures, and
//! signals to a whole tree.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;

/// Memory of one process, from /proc/PID/status and /proc/PID/smaps_rollup (KiB).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcMem {
    /// Resident set size (VmRSS): counts shared library pages once per process.
    pub rss_kib: u64,
    /// Peak resident set size (VmHWM).
    pub hwm_kib: u64,
    /// Proportional set size (Pss from smaps_rollup): shared pages split between their
    /// users, so a sum over processes does not count a shared page twice. 0 if unreadable.
    pub pss_kib: u64,
}

/// Parent pid of every running process (pid -> ppid).
fn parents() -> BTreeMap<u32, u32> {
    let mut out = BTreeMap::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Some(ppid) = stat_field(pid, 1) {
            out.insert(pid, ppid);
        }
    }
    out
}

/// Field `n` (0-based, counted after the command name) of /proc/PID/stat:
/// 0 state, 1 ppid, 2 pgrp. proc(5): the command name is in parentheses and may contain
/// spaces, so fields are counted after the last ')'.
fn stat_field(pid: u32, n: usize) -> Option<u32> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(n)?.parse().ok()
}

/// `root` and all its descendants that are alive now, root first.
pub fn tree(root: u32) -> Vec<u32> {
    let parents = parents();
    let mut out = vec![root];
    let mut seen = BTreeSet::from([root]);
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        for (&pid, &ppid) in &parents {
            if ppid == p && seen.insert(pid) {
                out.push(pid);
            }
        }
        i += 1;
    }
    if !parents.contains_key(&root) {
        out.remove(0);
    }
    out
}

/// Memory figures of one process; None once it has exited.
pub fn mem(pid: u32) -> Option<ProcMem> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let pss = fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Pss:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0);
    Some(ProcMem {
        rss_kib: field("VmRSS:"),
        hwm_kib: field("VmHWM:"),
        pss_kib: pss,
    })
}

/// Sum of the memory figures of `root` and its descendants, and how many processes that is.
pub fn tree_mem(root: u32) -> (ProcMem, usize) {
    let mut total = ProcMem::default();
    let mut n = 0;
    for pid in tree(root) {
        if let Some(m) = mem(pid) {
            total.rss_kib += m.rss_kib;
            total.hwm_kib += m.hwm_kib;
            total.pss_kib += m.pss_kib;
            n += 1;
        }
    }
    (total, n)
}

/// CPU time (user + system, ms) used so far by `root` and its live descendants, including
/// the children they have reaped (cutime/cstime), so processes that came and went count.
pub fn tree_cpu_ms(root: u32) -> f64 {
    // SAFETY: sysconf takes a plain integer and has no side effects.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let ticks: u64 = tree(root)
        .into_iter()
        .map(|pid| {
            // utime, stime, cutime, cstime: fields 14-17 of proc(5), 11-14 after the name
            (11..=14)
                .map(|n| u64::from(stat_field(pid, n).unwrap_or(0)))
                .sum::<u64>()
        })
        .sum();
    ticks as f64 * 1000.0 / tick
}

/// Sends `sig` to every pid in `pids` (errors such as "already gone" are ignored).
pub(crate) fn signal_all(pids: &[u32], sig: libc::c_int) {
    for &pid in pids {
        if let Ok(p) = libc::pid_t::try_from(pid) {
            // SAFETY: kill(2) takes plain integers; a stale pid only yields ESRCH.
            unsafe {
                libc::kill(p, sig);
            }
        }
    }
}

/// Sends `sig` to process group `pgid`.
pub(crate) fn signal_group(pgid: u32, sig: libc::c_int) {
    if let Ok(p) = libc::pid_t::try_from(pgid) {
        if p > 1 {
            // SAFETY: kill(2) with a negative pid signals the group; no memory involved.
            unsafe {
                libc::kill(-p, sig);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_found_with_its_child() {
        let me = std::process::id();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let t = tree(me);
        assert_eq!(t[0], me);
        assert!(t.contains(&child.id()), "{t:?} lacks {}", child.id());
        let m = mem(me).expect("own /proc entry");
        assert!(m.rss_kib > 0 && m.hwm_kib >= m.rss_kib, "{m:?}");
        let (sum, n) = tree_mem(me);
        assert!(n >= 2 && sum.rss_kib >= m.rss_kib);
        let _ = child.kill();
        let _ = child.wait();
        assert!(tree(u32::MAX - 1).is_empty());
    }
}
