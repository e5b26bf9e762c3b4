//! Listeners: TCP and unix sockets, and the accept loop.

use std::ffi::CString;
use std::net::SocketAddr;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use maildex_config::{Cidr, Listen, LmtpConfig};
use maildex_net::proxy::client_behind;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::{LmtpError, Shared};

/// A bound listener, not yet registered with a runtime.
pub(crate) enum Bound {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener, PathBuf),
}

/// A listener registered with the runtime.
pub(crate) enum Listener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener, PathBuf),
}

fn err<'a>(l: &'a Listen, reason: &'static str) -> impl FnOnce(std::io::Error) -> LmtpError + 'a {
    move |error| LmtpError::Listen {
        listen: l.to_string(),
        reason,
        error,
    }
}

pub(crate) fn bind(l: &Listen, config: &LmtpConfig) -> Result<Bound, LmtpError> {
    match l {
        Listen::Tcp(addr) => {
            let all: Vec<SocketAddr> = config
                .listen
                .iter()
                .filter_map(|l| match l {
                    Listen::Tcp(a) => Some(*a),
                    Listen::Unix(_) => None,
                })
                .chain(config.proxy_listen.iter().copied())
                .collect();
            let s = maildex_net::bind_tcp(*addr, &all).map_err(err(l, "bind"))?;
            Ok(Bound::Tcp(s))
        }
        Listen::Unix(path) => bind_unix(l, path, config),
    }
}

fn bind_unix(l: &Listen, path: &Path, config: &LmtpConfig) -> Result<Bound, LmtpError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            // a live server answers; a stale file (crash, kill -9) does not
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(err(l, "another process is listening on it")(
                    std::io::ErrorKind::AddrInUse.into(),
                ));
            }
            std::fs::remove_file(path).map_err(err(l, "remove stale socket"))?;
        }
        Ok(_) => {
            return Err(err(l, "refusing to replace a file that is not a socket")(
                std::io::ErrorKind::AlreadyExists.into(),
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(l, "stat")(e)),
    }
    let s = std::os::unix::net::UnixListener::bind(path).map_err(err(l, "bind"))?;
    s.set_nonblocking(true)
        .map_err(err(l, "set non-blocking"))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(config.socket_mode))
        .map_err(err(l, "chmod"))?;
    let uid = config
        .socket_owner
        .as_deref()
        .map(|n| resolve_id(n, "user"))
        .transpose()?;
    let gid = config
        .socket_group
        .as_deref()
        .map(|n| resolve_id(n, "group"))
        .transpose()?;
    if uid.is_some() || gid.is_some() {
        std::os::unix::fs::chown(path, uid, gid).map_err(err(l, "chown"))?;
    }
    Ok(Bound::Unix(s, path.to_path_buf()))
}

/// A numeric id, or a user/group name looked up through NSS.
fn resolve_id(name: &str, what: &'static str) -> Result<u32, LmtpError> {
    if let Ok(n) = name.parse::<u32>() {
        return Ok(n);
    }
    let unknown = || LmtpError::UnknownId {
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

impl Bound {
    pub(crate) fn local(&self) -> Listen {
        match self {
            Bound::Tcp(s) => match s.local_addr() {
                Ok(a) => Listen::Tcp(a),
                Err(_) => Listen::Tcp(([0, 0, 0, 0], 0).into()),
            },
            Bound::Unix(_, p) => Listen::Unix(p.clone()),
        }
    }

    pub(crate) fn into_tokio(self) -> Result<Listener, LmtpError> {
        let l = self.local();
        Ok(match self {
            Bound::Tcp(s) => {
                Listener::Tcp(tokio::net::TcpListener::from_std(s).map_err(err(&l, "register"))?)
            }
            Bound::Unix(s, p) => Listener::Unix(
                tokio::net::UnixListener::from_std(s).map_err(err(&l, "register"))?,
                p,
            ),
        })
    }
}

/// Accepts until `shutdown`, one task per connection holding one of `slots`; then
/// waits for the connections to end and removes a unix socket file. With `proxy` (the
/// trusted networks of a listener behind a proxy) each connection must start with a PROXY
/// protocol header, whose client is then the session's (logs, `Received:`).
pub(crate) async fn accept_loop(
    listener: Listener,
    shared: Arc<Shared>,
    slots: Arc<Semaphore>,
    shutdown: CancellationToken,
    proxy: Option<Arc<[Cidr]>>,
) {
    let mut conns = JoinSet::new();
    loop {
        let permit = tokio::select! {
            _ = shutdown.cancelled() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            p = Arc::clone(&slots).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            a = accept(&listener) => a,
        };
        match accepted {
            Ok((mut stream, peer, tcp_peer)) => {
                let id = maildex_net::session_id();
                let span = tracing::info_span!(
                    "lmtp",
                    session = %id,
                    peer = tracing::field::Empty,
                    proxy = tracing::field::Empty
                );
                let field = if proxy.is_some() { "proxy" } else { "peer" };
                span.record(field, tracing::field::display(&peer));
                let shared = Arc::clone(&shared);
                let shutdown = shutdown.clone();
                let proxy = proxy.clone();
                conns.spawn(tracing::Instrument::instrument(
                    async move {
                        let peer_ip = match (proxy, tcp_peer) {
                            (Some(trusted), Some(tcp_peer)) => {
                                match client_behind(&mut stream, tcp_peer, &trusted).await {
                                    Some(client) => Some(client.ip()),
                                    None => return,
                                }
                            }
                            _ => tcp_peer.map(|a| a.ip()),
                        };
                        let client = crate::conn::Client { id, peer_ip };
                        crate::conn::serve(stream, client, shared, shutdown).await;
                        drop(permit);
                    },
                    span,
                ));
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning
                tracing::warn!(error = %e, "LMTP accept failed");
                drop(permit);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    if let Listener::Unix(_, path) = &listener {
        if let Err(e) = std::fs::remove_file(path) {
            tracing::warn!(path = %path.display(), error = %e, "could not remove LMTP socket");
        }
    }
    drop(listener);
    while conns.join_next().await.is_some() {}
}

/// A connected client, TCP or unix.
pub(crate) type Stream = Box<dyn crate::conn::AsyncStream>;

/// A client's stream, its address for the logs and its TCP address (none over a unix
/// socket).
async fn accept(listener: &Listener) -> std::io::Result<(Stream, String, Option<SocketAddr>)> {
    match listener {
        Listener::Tcp(l) => {
            let (s, peer) = l.accept().await?;
            let _ = s.set_nodelay(true);
            let peer = maildex_net::canonical_peer(peer);
            Ok((Box::new(s), peer.to_string(), Some(peer)))
        }
        Listener::Unix(l, path) => {
            let (s, _) = l.accept().await?;
            Ok((Box::new(s), format!("unix:{}", path.display()), None))
        }
    }
}
