//! The shipped example config must always parse, and say what it claims.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use maildex_config::{Config, Listen, DEFAULT_INDEX_MAP_SIZE};

fn example_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/maildex.example.toml")
}

#[test]
fn example_config_parses() {
    let c = Config::load(&example_path()).unwrap();
    let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
    assert_eq!(c.imap.listen, [addr("127.0.0.1:143")]);
    assert_eq!(c.imap.listen_tls, [addr("127.0.0.1:993")]);
    assert!(c.imap.plaintext_auth_on_loopback);
    assert_eq!(
        c.imap,
        maildex_config::ImapConfig::with_listeners(
            c.imap.listen.clone(),
            c.imap.listen_tls.clone()
        ),
        "the example shows the [imap] defaults"
    );
    assert_eq!(c.lmtp.listen, [Listen::Tcp(addr("127.0.0.1:24"))]);
    assert_eq!(c.lmtp.socket_mode, 0o660);
    assert_eq!(c.lmtp.socket_owner, None);
    let tls = c.tls.as_ref().unwrap();
    assert_eq!(tls.cert, Path::new("/etc/maildex/cert.pem"));
    assert_eq!(tls.key, Path::new("/etc/maildex/key.pem"));
    assert_eq!(c.storage.index_map_size, DEFAULT_INDEX_MAP_SIZE);
    assert!(c.storage.fsync);
    assert_eq!(
        c.auth.users_file.as_deref(),
        Some(Path::new("/etc/maildex/users"))
    );
    assert_eq!(c.log.level, "info");
    assert_eq!(c.log.format, maildex_config::LogFormat::Text);
    assert_eq!(c.storage.quota, None);
    let d = maildex_config::LmtpConfig::with_listeners(c.lmtp.listen.clone());
    assert_eq!(
        c.lmtp, d,
        "the example shows the [lmtp] defaults (aliases_file and hostname commented out)"
    );
    let mut shown = c.mailboxes.clone();
    let mut defaults = maildex_config::default_mailboxes();
    shown.sort_by(|a, b| a.name.cmp(&b.name));
    defaults.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(
        shown, defaults,
        "the example shows the [mailboxes] defaults"
    );
    let p = c.storage.paths_for("Alice@Example.org").unwrap();
    assert_eq!(p.maildir, Path::new("/var/mail/example.org/alice/Maildir"));
    assert_eq!(p.index_dir, Path::new("/var/lib/maildex/example.org/alice"));
}

#[test]
fn example_config_mentions_every_key() {
    // Each key the parser accepts appears (set or commented out) in the example.
    let text = std::fs::read_to_string(example_path()).unwrap();
    for key in [
        "[imap]",
        "listen =",
        "listen_tls =",
        "plaintext_auth_on_loopback =",
        "max_connections_per_ip =",
        "login_timeout =",
        "autologout =",
        "proxy_listen =",
        "proxy_listen_tls =",
        "proxy_trusted_networks =",
        "[lmtp]",
        "socket_mode =",
        "socket_owner =",
        "socket_group =",
        "hostname =",
        "aliases_file =",
        "recipient_delimiter =",
        "save_to_detail_mailbox =",
        "max_message_size =",
        "max_recipients =",
        "max_line_length =",
        "max_connections =",
        "command_timeout =",
        "data_timeout =",
        "shutdown_timeout =",
        "quota =",
        "[tls]",
        "cert =",
        "key =",
        "[storage]",
        "mail_location =",
        "index_root =",
        "index_map_size =",
        "fsync =",
        "[auth]",
        "users_file =",
        "cache_size =",
        "cache_ttl =",
        "cache_negative_ttl =",
        "[auth.sql]",
        "password_query =",
        "user_query =",
        "iterate_query =",
        "alias_query =",
        "query_timeout =",
        "[log]",
        "level =",
        "format =",
        "[daemon]",
        "user =",
        "group =",
        "[mailboxes.",
        "special_use =",
        "auto ",
        "autoexpunge =",
    ] {
        assert!(text.contains(key), "example config lacks {key}");
    }
}

#[test]
fn commented_out_lines_of_the_example_are_valid_too() {
    // Uncommenting the optional lines must still give a valid config.
    let text = std::fs::read_to_string(example_path()).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let t = line.trim_start();
        let uncommented = t.strip_prefix("# ").filter(|rest| {
            [
                "listen = [\"unix:",
                "socket_owner =",
                "socket_group =",
                "proxy_listen =",
                "proxy_listen_tls =",
                "proxy_trusted_networks =",
                "autoexpunge =",
            ]
            .iter()
            .any(|k| rest.starts_with(k))
        });
        match uncommented {
            // The unix listen line replaces the TCP one.
            Some(rest) if rest.starts_with("listen") => {
                out = out.replace("listen = [\"127.0.0.1:24\"]\n", "");
                out.push_str(rest);
            }
            Some(rest) => out.push_str(rest),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    let c = Config::from_toml_str(&out, &example_path()).unwrap();
    assert_eq!(
        c.lmtp.listen,
        [Listen::Unix(PathBuf::from(
            "/var/spool/postfix/private/maildex-lmtp"
        ))]
    );
    assert_eq!(c.lmtp.socket_owner.as_deref(), Some("maildex"));
    assert_eq!(c.lmtp.socket_group.as_deref(), Some("postfix"));
    let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
    assert_eq!(c.imap.proxy_listen, [addr("127.0.0.1:10143")]);
    assert_eq!(c.imap.proxy_listen_tls, [addr("127.0.0.1:10993")]);
    assert_eq!(c.lmtp.proxy_listen, [addr("127.0.0.1:10024")]);
    let trusted = maildex_config::default_proxy_trusted_networks();
    assert_eq!(c.imap.proxy_trusted_networks, trusted);
    assert_eq!(c.lmtp.proxy_trusted_networks, trusted);
    assert!(trusted[0].contains("127.0.0.1".parse().unwrap()));
}

#[test]
fn proxy_keys_are_checked() {
    let base = std::fs::read_to_string(example_path()).unwrap();
    for (key, bad) in [
        ("proxy_trusted_networks", "[\"10.0.0.0/33\"]"),
        ("proxy_trusted_networks", "[\"proxy.example.org\"]"),
        ("proxy_listen", "[\"127.0.0.1:143\"]"), // the plain listener's address
    ] {
        let text = base.replace("[imap]\n", &format!("[imap]\n{key} = {bad}\n"));
        assert!(
            Config::from_toml_str(&text, &example_path()).is_err(),
            "{key} = {bad} accepted"
        );
    }
}
