//! Unix socket listeners (LMTP, the postfix SASL and socketmap sockets): a stale socket
//! file from a crash replaced, a live one or a file that is not a socket refused, and the
//! mode, owner and group set so that postfix's user (or its chroot) can connect.

use std::ffi::CString;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::Path;

/// Why a unix socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum UnixBindError {
    /// A step failed; `reason` says which.
    #[error("{reason}: {error}")]
    Io {
        /// What was being done.
        reason: &'static str,
        /// What the OS said.
        error: std::io::Error,
    },
    /// An owner or group that names no user or group.
    #[error("socket {what} {name:?}: no such {what}")]
    UnknownId {
        /// "user" or "group".
        what: &'static str,
        /// The name.
        name: String,
    },
}

fn io(reason: &'static str) -> impl FnOnce(std::io::Error) -> UnixBindError {
    move |error| UnixBindError::Io { reason, error }
}

/// Binds a non-blocking listener at `path` with permission bits `mode` and, when given,
/// `owner` and `group` (names or numeric ids).
pub fn bind(
    path: &Path,
    mode: u32,
    owner: Option<&str>,
    group: Option<&str>,
) -> Result<UnixListener, UnixBindError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            // a live server answers; a stale file (crash, kill -9) does not
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(io("another process is listening on it")(
                    std::io::ErrorKind::AddrInUse.into(),
                ));
            }
            std::fs::remove_file(path).map_err(io("remove stale socket"))?;
        }
        Ok(_) => {
            return Err(io("refusing to replace a file that is not a socket")(
                std::io::ErrorKind::AlreadyExists.into(),
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("stat")(e)),
    }
    let s = UnixListener::bind(path).map_err(io("bind"))?;
    s.set_nonblocking(true).map_err(io("set non-blocking"))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io("chmod"))?;
    let uid = owner.map(|n| resolve_id(n, "user")).transpose()?;
    let gid = group.map(|n| resolve_id(n, "group")).transpose()?;
    if uid.is_some() || gid.is_some() {
        std::os::unix::fs::chown(path, uid, gid).map_err(io("chown"))?;
    }
    Ok(s)
}

/// A numeric id, or a user/group name looked up through NSS.
fn resolve_id(name: &str, what: &'static str) -> Result<u32, UnixBindError> {
    if let Ok(n) = name.parse::<u32>() {
        return Ok(n);
    }
    let unknown = || UnixBindError::UnknownId {
        what,
        name: name.to_owned(),
    };
    let c = CString::new(name).map_err(|_| unknown())?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    if what == "user" {
        // SAFETY: all-zero is a valid passwd (pointers null, ids 0); getpwnam_r only
        // writes into `pwd` and `buf` (whose length we pass) and sets `result` to
        // null or to `pwd`.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = unsafe {
            libc::getpwnam_r(
                c.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr(),
                buf.len(),
                &mut result,
            )
        };
        if rc == 0 && !result.is_null() {
            return Ok(pwd.pw_uid);
        }
    } else {
        // SAFETY: as above, for getgrnam_r and a group record.
        let mut grp: libc::group = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::group = std::ptr::null_mut();
        let rc = unsafe {
            libc::getgrnam_r(
                c.as_ptr(),
                &mut grp,
                buf.as_mut_ptr(),
                buf.len(),
                &mut result,
            )
        };
        if rc == 0 && !result.is_null() {
            return Ok(grp.gr_gid);
        }
    }
    Err(unknown())
}
