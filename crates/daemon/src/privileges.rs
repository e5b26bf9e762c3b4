//! Giving up root after the listeners are bound: `[daemon] user` and `group`.
//!
//! Ports below 1024, a unix socket owned by postfix and a private key readable by root only
//! need root; nothing after that does. Started as root with a user configured, the daemon
//! binds everything, then sets its supplementary groups to the one group, its group and its
//! user ids (real, effective and saved, so root cannot be taken back), and only then touches
//! mail. glibc applies set*id calls to every thread of the process, so the runtime's
//! threads started before the switch run as the user too.

use maildex_config::DaemonConfig;

/// Why the daemon could not switch to its configured user.
#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    /// The user is not in the system's user database.
    #[error("[daemon] user {0:?} does not exist")]
    NoUser(String),
    /// The group is not in the system's group database.
    #[error("[daemon] group {0:?} does not exist")]
    NoGroup(String),
    /// A user is configured, the process is not root and is someone else.
    #[error("[daemon] user is {user:?} but maildex runs as uid {uid}, not as root or that user")]
    NotRoot {
        /// The configured user.
        user: String,
        /// Who we are.
        uid: u32,
    },
    /// A set*id call failed.
    #[error("cannot switch to user {user:?}: {call}: {error}")]
    Switch {
        /// The configured user.
        user: String,
        /// The call that failed.
        call: &'static str,
        /// Its error (in the message; not a `source()`).
        error: std::io::Error,
    },
    /// Root could be taken back after the switch (a kernel or libc that ignored it).
    #[error("still able to become root after switching to {0:?}; refusing to run")]
    StillRoot(String),
}

/// A user to switch to: ids resolved from the names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// User id.
    pub uid: u32,
    /// Group id: the configured group, or the user's primary group.
    pub gid: u32,
}

/// Applies `[daemon]`: switches to the configured user and group and returns them, or,
/// with no user configured, keeps the current one (warning when that is root: every mail
/// file would then be written by root, and a flaw in the server would own the machine).
pub fn apply(config: &DaemonConfig) -> Result<Option<Identity>, PrivilegeError> {
    let Some(user) = config.user.as_deref() else {
        // SAFETY: geteuid cannot fail and has no side effects.
        if unsafe { libc::geteuid() } == 0 {
            tracing::warn!(
                "running as root: set [daemon] user (and group) to drop root after binding"
            );
        }
        return Ok(None);
    };
    let id = resolve(user, config.group.as_deref())?;
    switch_to(user, id)?;
    tracing::info!(
        user,
        uid = id.uid,
        gid = id.gid,
        "switched user after binding"
    );
    Ok(Some(id))
}

/// Whether the process runs with root's effective uid.
pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail and has no side effects.
    unsafe { libc::geteuid() == 0 }
}

/// Looks up `user` (and `group`, else the user's primary group). Names or numeric ids.
pub fn resolve(user: &str, group: Option<&str>) -> Result<Identity, PrivilegeError> {
    let (uid, primary) = lookup_user(user)?;
    let gid = match group {
        Some(g) => lookup_group(g)?,
        None => primary,
    };
    Ok(Identity { uid, gid })
}

/// Switches the whole process to `id` (`user` is its name, for messages). Started as that
/// user already, nothing is done; started as anyone else but root, an error.
pub fn switch_to(user: &str, id: Identity) -> Result<(), PrivilegeError> {
    // SAFETY: getuid/geteuid cannot fail and have no side effects.
    let (ruid, euid) = unsafe { (libc::getuid(), libc::geteuid()) };
    if ruid == id.uid && euid == id.uid {
        return Ok(());
    }
    if euid != 0 {
        return Err(PrivilegeError::NotRoot {
            user: user.to_owned(),
            uid: euid,
        });
    }
    let fail = |call| {
        let error = std::io::Error::last_os_error();
        PrivilegeError::Switch {
            user: user.to_owned(),
            call,
            error,
        }
    };
    let groups = [id.gid as libc::gid_t];
    // SAFETY: plain system calls on integers and a one-element array that outlives them;
    // the group must change while we are still root, the user last.
    unsafe {
        if libc::setgroups(1, groups.as_ptr()) != 0 {
            return Err(fail("setgroups"));
        }
        if libc::setresgid(id.gid, id.gid, id.gid) != 0 {
            return Err(fail("setresgid"));
        }
        if libc::setresuid(id.uid, id.uid, id.uid) != 0 {
            return Err(fail("setresuid"));
        }
        if id.uid != 0 && libc::setuid(0) == 0 {
            return Err(PrivilegeError::StillRoot(user.to_owned()));
        }
    }
    Ok(())
}

fn lookup_user(name: &str) -> Result<(u32, u32), PrivilegeError> {
    maildex_accounts::owner::system_user(name)
        .ok_or_else(|| PrivilegeError::NoUser(name.to_owned()))
}

fn lookup_group(name: &str) -> Result<u32, PrivilegeError> {
    maildex_accounts::owner::system_group(name)
        .ok_or_else(|| PrivilegeError::NoGroup(name.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_resolve_and_unknown_names_are_errors() {
        assert_eq!(resolve("root", None).unwrap(), Identity { uid: 0, gid: 0 });
        assert_eq!(
            resolve("0", Some("0")).unwrap(),
            Identity { uid: 0, gid: 0 }
        );
        assert!(matches!(
            resolve("no-such-user-maildex", None),
            Err(PrivilegeError::NoUser(_))
        ));
        assert!(matches!(
            resolve("root", Some("no-such-group-maildex")),
            Err(PrivilegeError::NoGroup(_))
        ));
        assert!(matches!(
            resolve("bad\0name", None),
            Err(PrivilegeError::NoUser(_))
        ));
    }

    #[test]
    fn running_as_the_user_already_is_no_switch() {
        // SAFETY: no side effects.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        switch_to("me", Identity { uid, gid }).unwrap();
    }
}
