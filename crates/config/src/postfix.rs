//! `[postfix]`: the sockets postfix asks about users: the Dovecot-protocol SASL socket
//! (`smtpd_sasl_type = dovecot`) and the socketmap recipient lookup
//! (`virtual_mailbox_maps` / `virtual_alias_maps = socketmap:...`).

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use crate::raw::{Mode, NonEmpty};
use crate::{Listen, DEFAULT_MAX_CONNECTIONS, DEFAULT_SOCKET_MODE};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPostfix {
    pub auth_socket: Option<String>,
    pub socketmap: Option<String>,
    pub socket_mode: Option<Mode>,
    pub socket_owner: Option<NonEmpty>,
    pub socket_group: Option<NonEmpty>,
    pub max_connections: Option<u32>,
}

/// `[postfix]`. Both sockets are off unless configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostfixConfig {
    /// The SASL authentication socket (`smtpd_sasl_path`): a unix socket path or a
    /// loopback `IP:port`.
    pub auth_socket: Option<Listen>,
    /// The socketmap server (`socketmap:unix:PATH:NAME` or `socketmap:inet:IP:PORT:NAME`).
    pub socketmap: Option<Listen>,
    /// Permission bits of both unix sockets (default `0660`, as `[lmtp]`'s).
    pub socket_mode: u32,
    /// Owner of both unix sockets (user name or uid), if it should be changed.
    pub socket_owner: Option<String>,
    /// Group of both unix sockets (group name or gid), if it should be changed.
    pub socket_group: Option<String>,
    /// Most connections served at once on each socket; more wait to be accepted.
    pub max_connections: usize,
}

impl Default for PostfixConfig {
    fn default() -> Self {
        PostfixConfig {
            auth_socket: None,
            socketmap: None,
            socket_mode: DEFAULT_SOCKET_MODE,
            socket_owner: None,
            socket_group: None,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// A socket of `[postfix]`: `unix:PATH`, a path (relative to the config file's folder),
/// or a loopback `IP:port`. The SASL socket trusts the client address postfix reports
/// (`rip=`) for the login penalties, so only local processes may reach it.
fn socket(
    value: Option<String>,
    key: &'static str,
    resolve: &dyn Fn(PathBuf) -> PathBuf,
) -> Result<Option<Listen>, (&'static str, String)> {
    let Some(v) = value else { return Ok(None) };
    let path = v.strip_prefix("unix:").unwrap_or(&v);
    if path.is_empty() {
        return Err((key, "empty socket path".into()));
    }
    if v.starts_with("unix:") || path.starts_with('/') || path.starts_with('.') {
        return Ok(Some(Listen::Unix(resolve(PathBuf::from(path)))));
    }
    match v.parse::<SocketAddr>() {
        Ok(a) if a.ip().is_loopback() => Ok(Some(Listen::Tcp(a))),
        Ok(a) => Err((
            key,
            format!("{a} is not a loopback address: use a unix socket or 127.0.0.1/::1"),
        )),
        Err(_) => Ok(Some(Listen::Unix(resolve(PathBuf::from(path))))),
    }
}

pub(crate) fn validate(
    raw: Option<RawPostfix>,
    resolve: &dyn Fn(PathBuf) -> PathBuf,
) -> Result<PostfixConfig, (&'static str, String)> {
    let raw = raw.unwrap_or_default();
    let mut c = PostfixConfig {
        auth_socket: socket(raw.auth_socket, "postfix.auth_socket", resolve)?,
        socketmap: socket(raw.socketmap, "postfix.socketmap", resolve)?,
        ..PostfixConfig::default()
    };
    if c.auth_socket.is_some() && c.auth_socket == c.socketmap {
        return Err((
            "postfix.socketmap",
            "is the same socket as postfix.auth_socket".into(),
        ));
    }
    c.socket_mode = raw.socket_mode.map_or(DEFAULT_SOCKET_MODE, |m| m.0);
    c.socket_owner = raw.socket_owner.map(|s| s.0);
    c.socket_group = raw.socket_group.map(|s| s.0);
    match raw.max_connections {
        Some(0) => return Err(("postfix.max_connections", "must be at least 1".into())),
        Some(n) => c.max_connections = n as usize,
        None => {}
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use crate::{Config, Listen};
    use std::path::{Path, PathBuf};

    fn load(postfix: &str) -> Result<Config, crate::ConfigError> {
        let text = format!(
            "[storage]\nmail_location = \"/srv/mail/%u\"\n[auth]\nusers_file = \"users\"\n[postfix]\n{postfix}\n"
        );
        Config::from_toml_str(&text, Path::new("/etc/maildex/maildex.toml"))
    }

    #[test]
    fn sockets_are_paths_or_loopback_addresses() {
        let c = load("auth_socket = \"auth\"\nsocketmap = \"127.0.0.1:7000\"").unwrap();
        assert_eq!(
            c.postfix.auth_socket,
            Some(Listen::Unix(PathBuf::from("/etc/maildex/auth")))
        );
        assert_eq!(
            c.postfix.socketmap,
            Some(Listen::Tcp("127.0.0.1:7000".parse().unwrap()))
        );
        let c = load("auth_socket = \"unix:/run/a\"\nsocket_group = \"postfix\"").unwrap();
        assert_eq!(c.postfix.auth_socket, Some(Listen::Unix("/run/a".into())));
        assert_eq!(c.postfix.socketmap, None);
        assert_eq!(c.postfix.socket_mode, 0o660);
        assert_eq!(c.postfix.socket_group.as_deref(), Some("postfix"));
        assert_eq!(load("").unwrap().postfix, super::PostfixConfig::default());
    }

    #[test]
    fn other_addresses_and_bad_values_are_refused() {
        let e = load("auth_socket = \"0.0.0.0:7000\"")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("postfix.auth_socket") && e.contains("loopback"),
            "{e}"
        );
        let e = load("socketmap = \"unix:\"").unwrap_err().to_string();
        assert!(e.contains("postfix.socketmap"), "{e}");
        let e = load("auth_socket = \"/run/x\"\nsocketmap = \"/run/x\"").unwrap_err();
        assert!(e.to_string().contains("same socket"), "{e}");
        assert!(load("max_connections = 0").is_err());
        assert!(load("listen = \"x\"").is_err(), "unknown keys are refused");
    }
}
