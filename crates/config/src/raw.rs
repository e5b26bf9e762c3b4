//! The file as written: serde structs with `deny_unknown_fields`. Values whose
//! syntax can be checked alone (addresses, sizes, modes, templates, log levels)
//! are parsed here, so their errors carry the TOML line and column.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::de::{self, Deserializer};
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    pub imap: Option<RawImap>,
    pub lmtp: Option<RawLmtp>,
    pub tls: Option<RawTls>,
    pub storage: Option<RawStorage>,
    pub auth: Option<crate::auth::RawAuth>,
    pub log: Option<RawLog>,
    pub daemon: Option<RawDaemon>,
    pub postfix: Option<crate::postfix::RawPostfix>,
    pub mailboxes: Option<std::collections::BTreeMap<String, crate::mailboxes::RawMailbox>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawImap {
    pub listen: Option<Vec<TcpAddr>>,
    pub listen_tls: Option<Vec<TcpAddr>>,
    pub plaintext_auth_on_loopback: Option<bool>,
    pub max_connections: Option<u32>,
    pub max_connections_per_ip: Option<u32>,
    pub login_timeout: Option<Seconds>,
    pub autologout: Option<Seconds>,
    pub max_line_length: Option<ByteSize>,
    pub max_message_size: Option<ByteSize>,
    pub write_timeout: Option<Seconds>,
    pub proxy_listen: Option<Vec<TcpAddr>>,
    pub proxy_listen_tls: Option<Vec<TcpAddr>>,
    pub proxy_trusted_networks: Option<Vec<Network>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLmtp {
    pub listen: Option<Vec<RawListen>>,
    pub proxy_listen: Option<Vec<TcpAddr>>,
    pub proxy_trusted_networks: Option<Vec<Network>>,
    pub socket_mode: Option<Mode>,
    pub socket_owner: Option<NonEmpty>,
    pub socket_group: Option<NonEmpty>,
    pub hostname: Option<NonEmpty>,
    pub aliases_file: Option<PathBuf>,
    pub recipient_delimiter: Option<String>,
    pub save_to_detail_mailbox: Option<bool>,
    pub add_received_header: Option<bool>,
    pub max_message_size: Option<ByteSize>,
    pub max_recipients: Option<u32>,
    pub max_line_length: Option<u32>,
    pub max_connections: Option<u32>,
    pub command_timeout: Option<Seconds>,
    pub data_timeout: Option<Seconds>,
    pub shutdown_timeout: Option<Seconds>,
    pub write_timeout: Option<Seconds>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTls {
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStorage {
    pub mail_location: Option<RawTemplate>,
    pub index_root: Option<RawTemplate>,
    pub index_map_size: Option<ByteSize>,
    pub fsync: Option<bool>,
    pub quota: Option<ByteSize>,
    pub quota_warning: Option<u8>,
    pub full_text: Option<bool>,
    pub index_sync_delay: Option<Seconds>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLog {
    pub level: Option<LogLevel>,
    pub format: Option<crate::LogFormat>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDaemon {
    pub user: Option<NonEmpty>,
    pub group: Option<NonEmpty>,
}

/// Parses a string value with `parse`, reporting its error through serde (so the
/// TOML deserializer attaches the value's position).
fn from_str_with<'de, D, T>(
    d: D,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    let s = String::deserialize(d)?;
    parse(&s).map_err(de::Error::custom)
}

/// `IP:port`; IPv6 in brackets. Host names are refused: a listener binds an address.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TcpAddr(pub SocketAddr);

pub(crate) fn parse_tcp(s: &str) -> Result<SocketAddr, String> {
    s.parse::<SocketAddr>().map_err(|_| {
        format!("invalid address {s:?}: expected IP:port, e.g. \"127.0.0.1:143\" or \"[::1]:143\"")
    })
}

impl<'de> Deserialize<'de> for TcpAddr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_str_with(d, parse_tcp).map(TcpAddr)
    }
}

/// A network, `ADDR/BITS` or a bare address (`proxy_trusted_networks`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Network(pub maildex_net::Cidr);

impl<'de> Deserialize<'de> for Network {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_str_with(d, maildex_net::Cidr::parse).map(Network)
    }
}

/// `IP:port` or `unix:/path/to/socket` (path still unresolved).
#[derive(Debug, Clone)]
pub(crate) enum RawListen {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl<'de> Deserialize<'de> for RawListen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_str_with(d, |s| match s.strip_prefix("unix:") {
            Some("") => Err("empty socket path after \"unix:\"".to_owned()),
            Some(p) => Ok(RawListen::Unix(PathBuf::from(p))),
            None => parse_tcp(s)
                .map(RawListen::Tcp)
                .map_err(|e| format!("{e}, or \"unix:/path/to/socket\"")),
        })
    }
}

/// File mode: a string of octal digits ("0660") or a TOML integer (0o660).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mode(pub u32);

impl<'de> Deserialize<'de> for Mode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Int(i64),
            Str(String),
        }
        let hint = "expected an octal mode such as \"0660\" or 0o660";
        let mode = match Either::deserialize(d)? {
            Either::Int(n) => u32::try_from(n)
                .ok()
                .filter(|&n| n <= 0o777)
                .ok_or_else(|| {
                    de::Error::custom(format!(
                        "mode {n} out of range ({hint}; a decimal 660 is not octal)"
                    ))
                })?,
            Either::Str(s) => {
                let digits = s.strip_prefix("0o").unwrap_or(&s);
                if digits.is_empty()
                    || digits.len() > 4
                    || !digits.bytes().all(|b| (b'0'..=b'7').contains(&b))
                {
                    return Err(de::Error::custom(format!("invalid mode {s:?}: {hint}")));
                }
                u32::from_str_radix(digits, 8)
                    .ok()
                    .filter(|&n| n <= 0o777)
                    .ok_or_else(|| {
                        de::Error::custom(format!(
                            "invalid mode {s:?}: permission bits only ({hint})"
                        ))
                    })?
            }
        };
        Ok(Mode(mode))
    }
}

/// A non-empty string (user or group name, or a numeric id as text).
#[derive(Debug, Clone)]
pub(crate) struct NonEmpty(pub String);

impl<'de> Deserialize<'de> for NonEmpty {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_str_with(d, |s| {
            if s.trim().is_empty() {
                Err("must not be empty (leave the key out instead)".to_owned())
            } else {
                Ok(NonEmpty(s.to_owned()))
            }
        })
    }
}

/// A byte count: an integer, or a string with a unit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ByteSize(pub u64);

/// Parses `"64MiB"`, `"1 GiB"`, `"512k"`, `"1048576"`. Units are powers of 1024 in
/// every spelling (B, k/K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB, any case), as in
/// Dovecot's size settings.
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad =
        || format!("invalid size {s:?}: expected a number of bytes or e.g. \"64MiB\", \"1GiB\"");
    let n: u64 = num.parse().map_err(|_| bad())?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(bad()),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("size {s:?} is too large"))
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Int(i64),
            Str(String),
        }
        match Either::deserialize(d)? {
            Either::Int(n) => u64::try_from(n)
                .map(ByteSize)
                .map_err(|_| de::Error::custom("size must not be negative")),
            Either::Str(s) => parse_size(&s).map(ByteSize).map_err(de::Error::custom),
        }
    }
}

/// A duration: an integer number of seconds, or a string with a unit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seconds(pub u64);

/// Parses `"300"`, `"300s"`, `"5m"`, `"5 min"`, `"1h"` into seconds.
pub(crate) fn parse_duration(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || {
        format!("invalid duration {s:?}: expected seconds or e.g. \"30s\", \"5m\", \"1h\", \"30d\"")
    };
    let n: u64 = num.parse().map_err(|_| bad())?;
    let mul = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "s" | "sec" | "secs" | "second" | "seconds" => 1,
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86400,
        _ => return Err(bad()),
    };
    n.checked_mul(mul)
        .ok_or_else(|| format!("duration {s:?} is too large"))
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Int(i64),
            Str(String),
        }
        match Either::deserialize(d)? {
            Either::Int(n) => u64::try_from(n)
                .map(Seconds)
                .map_err(|_| de::Error::custom("duration must not be negative")),
            Either::Str(s) => parse_duration(&s).map(Seconds).map_err(de::Error::custom),
        }
    }
}

/// A path template, syntax-checked but not yet resolved against the config dir.
#[derive(Debug, Clone)]
pub(crate) struct RawTemplate(pub String);

impl<'de> Deserialize<'de> for RawTemplate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_str_with(d, |s| {
            crate::paths::check_template_syntax(s).map(|()| RawTemplate(s.to_owned()))
        })
    }
}

/// A `tracing` filter: a level, or comma-separated `target=level` directives.
#[derive(Debug, Clone)]
pub(crate) struct LogLevel(pub String);

pub(crate) fn check_log_level(s: &str) -> Result<(), String> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    let ok_level = |l: &str| LEVELS.contains(&l.trim().to_ascii_lowercase().as_str());
    let ok_target = |t: &str| {
        let t = t.trim();
        !t.is_empty()
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '-'))
    };
    if s.trim().is_empty() {
        return Err("log level must not be empty".to_owned());
    }
    for directive in s.split(',') {
        let ok = match directive.split_once('=') {
            None => ok_level(directive),
            Some((target, level)) => ok_target(target) && ok_level(level),
        };
        if !ok {
            return Err(format!(
                "invalid log directive {directive:?}: expected one of off, error, warn, info, debug, trace, \
                 or target=level (e.g. \"info,maildex_imap=debug\")"
            ));
        }
    }
    Ok(())
}

impl<'de> Deserialize<'de> for LogLevel {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_str_with(d, |s| {
            check_log_level(s).map(|()| LogLevel(s.trim().to_owned()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("64 mib"), Ok(64 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("2TB"), Ok(2 << 40));
        assert_eq!(parse_size("512k"), Ok(512 << 10));
        for bad in ["", "MiB", "1.5GiB", "-1", "10 parsecs", "99999999999TiB"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("0"), Ok(0));
        assert_eq!(parse_duration("300"), Ok(300));
        assert_eq!(parse_duration("30s"), Ok(30));
        assert_eq!(parse_duration("5m"), Ok(300));
        assert_eq!(parse_duration("5 min"), Ok(300));
        assert_eq!(parse_duration("2H"), Ok(7200));
        assert_eq!(parse_duration("30d"), Ok(30 * 86400));
        for bad in ["", "m", "1.5m", "-1", "3 weeks", "99999999999999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn log_levels() {
        for ok in [
            "info",
            "DEBUG",
            "warn,maildex_imap=trace",
            "off",
            "a::b=error, c=info",
        ] {
            assert!(check_log_level(ok).is_ok(), "{ok}");
        }
        for bad in ["", "verbose", "x=", "=info", "info;debug", "a b=info"] {
            assert!(check_log_level(bad).is_err(), "{bad}");
        }
    }
}
