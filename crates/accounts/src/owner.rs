//! The owner a directory gives a user's files: Dovecot's userdb `uid` and `gid` (the
//! passwd-file's third and fourth columns, `userdb_uid=`/`userdb_gid=` extra fields, SQL
//! `uid`/`gid` columns, LDAP fields mapped to `uid`/`gid`), as numbers or system names.
//!
//! How maildex honours it (issue 20 #4; docs/SECURITY.md "Per-user owners"): the daemon
//! serves every user from one multi-threaded process running as one user (the `[daemon]
//! user`), so a user's files are created as that user. A per-user owner is therefore
//! honoured where it *is* the process's identity, and refused where it is not
//! ([`Owner::refusal`]): at start for the users file, at the user's first use for SQL and
//! LDAP (`NO [UNAVAILABLE]`, LMTP `451 4.3.0`), never with files the user's owner cannot read
//! later. We did not make the daemon write as each user: a per-thread `setfsuid`/`setfsgid`
//! needs CAP_SETUID/CAP_SETGID kept for the life of the process (a flaw in the IMAP or LMTP
//! code could then become any user, root included), and every write on every thread (the
//! blocking pool, group commit, sync) would have to switch and switch back; `fchown` after
//! each creation needs CAP_CHOWN and, to read those files back, CAP_DAC_OVERRIDE, i.e.
//! root. Both break "root only to bind". Admin commands run from a root shell are one
//! process for one identity: they switch to the users' owner (see `maildex` `common.rs`).

use std::ffi::CString;

/// A user's file owner from the directory; either id may be unset (then the process's own
/// applies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Owner {
    /// The owner's user id.
    pub uid: Option<u32>,
    /// The owner's group id.
    pub gid: Option<u32>,
}

impl Owner {
    /// The owner of the fields `uid` and `gid` (numbers or system names); `Ok(None)` when
    /// neither is set, `Err` (what is wrong) for a name the system does not know.
    pub fn parse(uid: Option<&str>, gid: Option<&str>) -> Result<Option<Owner>, String> {
        let uid = uid
            .filter(|v| !v.is_empty())
            .map(|v| {
                system_user(v)
                    .map(|(u, _)| u)
                    .ok_or(format!("uid {v:?}: no such user"))
            })
            .transpose()?;
        let gid = gid
            .filter(|v| !v.is_empty())
            .map(|v| system_group(v).ok_or(format!("gid {v:?}: no such group")))
            .transpose()?;
        Ok((uid.is_some() || gid.is_some()).then_some(Owner { uid, gid }))
    }

    /// This owner with `default`'s ids where it sets none.
    pub fn or(self, default: (u32, u32)) -> (u32, u32) {
        (self.uid.unwrap_or(default.0), self.gid.unwrap_or(default.1))
    }

    /// Why a process running as `(uid, gid)` cannot create `user`'s files as this owner;
    /// `None` when it creates them so.
    pub fn refusal(&self, user: &str, (uid, gid): (u32, u32)) -> Option<String> {
        let (want_uid, want_gid) = self.or((uid, gid));
        if (want_uid, want_gid) == (uid, gid) {
            return None;
        }
        Some(format!(
            "the user directory gives user {user} uid {want_uid} gid {want_gid}, but maildex \
             runs as uid {uid} gid {gid} and creates every user's files as itself; per-user \
             uids other than the daemon's are not supported (one process serves all users): \
             set [daemon] user and group to {want_uid}:{want_gid}, or give every user the \
             daemon's uid and gid"
        ))
    }
}

impl crate::Accounts {
    /// Refuses, naming the first such user, a users file in which a user's owner (uid/gid
    /// fields) is not this process's identity: `maildex serve` calls it after switching
    /// to `[daemon] user`, so such a config does not start. A directory that is not in
    /// memory (SQL, LDAP) is checked at each user's first use instead.
    pub fn refuse_foreign_owners(&self) -> Result<(), crate::AccountsError> {
        let dir = self.dir();
        if !dir.db.in_memory() {
            return Ok(());
        }
        let me = process_identity();
        for name in dir.db.iterate()? {
            if let Some(why) = dir
                .db
                .user(&name)?
                .and_then(|u| u.owner)
                .and_then(|o| o.refusal(&name, me))
            {
                return Err(crate::AccountsError::Owner(why));
            }
        }
        Ok(())
    }
}

/// The effective uid and gid of this process: the owner of every file it creates.
pub fn process_identity() -> (u32, u32) {
    // SAFETY: geteuid/getegid cannot fail and have no side effects.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// The uid and primary gid of a system user, by name or number (a number with no name
/// is its own primary group).
pub fn system_user(name: &str) -> Option<(u32, u32)> {
    if let Ok(c) = CString::new(name) {
        let mut buf = vec![0 as libc::c_char; 16 * 1024];
        // SAFETY: passwd is plain old data; getpwnam_r writes it and the strings into
        // `buf`, which outlives every use, and reports through `found`.
        unsafe {
            let mut pw: libc::passwd = std::mem::zeroed();
            let mut found: *mut libc::passwd = std::ptr::null_mut();
            let rc = libc::getpwnam_r(c.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut found);
            if rc == 0 && !found.is_null() {
                return Some((pw.pw_uid, pw.pw_gid));
            }
        }
    }
    let uid = name.parse::<u32>().ok()?;
    // SAFETY: as above, with getpwuid_r.
    unsafe {
        let mut buf = vec![0 as libc::c_char; 16 * 1024];
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut found);
        if rc == 0 && !found.is_null() {
            return Some((uid, pw.pw_gid));
        }
    }
    Some((uid, uid))
}

/// The gid of a system group, by name or number.
pub fn system_group(name: &str) -> Option<u32> {
    if let Ok(c) = CString::new(name) {
        let mut buf = vec![0 as libc::c_char; 64 * 1024];
        // SAFETY: as in system_user, with getgrnam_r and a group record.
        unsafe {
            let mut gr: libc::group = std::mem::zeroed();
            let mut found: *mut libc::group = std::ptr::null_mut();
            let rc = libc::getgrnam_r(c.as_ptr(), &mut gr, buf.as_mut_ptr(), buf.len(), &mut found);
            if rc == 0 && !found.is_null() {
                return Some(gr.gr_gid);
            }
        }
    }
    name.parse::<u32>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_parse_and_unknown_names_are_errors() {
        assert_eq!(Owner::parse(None, Some("")).unwrap(), None);
        assert_eq!(
            Owner::parse(Some("root"), Some("0")).unwrap(),
            Some(Owner {
                uid: Some(0),
                gid: Some(0)
            })
        );
        assert_eq!(
            Owner::parse(Some("6000"), None).unwrap(),
            Some(Owner {
                uid: Some(6000),
                gid: None
            })
        );
        assert!(Owner::parse(Some("no-such-user-maildex"), None)
            .unwrap_err()
            .contains("no such user"));
        assert!(Owner::parse(None, Some("no-such-group-maildex"))
            .unwrap_err()
            .contains("no such group"));
    }

    #[test]
    fn only_an_owner_other_than_the_process_is_refused() {
        let me = (5000, 5000);
        let same = Owner {
            uid: Some(5000),
            gid: None,
        };
        assert_eq!(same.refusal("alice", me), None);
        let other = Owner {
            uid: Some(6000),
            gid: Some(5000),
        };
        let why = other.refusal("alice", me).unwrap();
        assert!(
            why.contains("uid 6000 gid 5000") && why.contains("runs as uid 5000 gid 5000"),
            "{why}"
        );
        let group = Owner {
            uid: None,
            gid: Some(6000),
        };
        assert!(group.refusal("alice", me).is_some());
    }
}
