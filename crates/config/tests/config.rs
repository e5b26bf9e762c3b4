//! Loading and validation of the config file.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use maildex_config::{dev, Config, ConfigError, Listen, DEFAULT_INDEX_MAP_SIZE};

const ORIGIN: &str = "/etc/maildex/maildex.toml";

const MINIMAL: &str = "\
[storage]
mail_location = \"/var/mail/%d/%n/Maildir\"
[auth]
users_file = \"/etc/maildex/users\"
";

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml_str(text, Path::new(ORIGIN))
}

fn with(extra: &str) -> Result<Config, ConfigError> {
    parse(&format!("{MINIMAL}{extra}"))
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// Asserts a TOML-stage error and returns (line, column, key, message).
fn toml_err(r: Result<Config, ConfigError>) -> (usize, usize, Option<String>, String) {
    match r {
        Err(ConfigError::Toml {
            path,
            line,
            column,
            key,
            message,
        }) => {
            assert_eq!(path, Path::new(ORIGIN));
            (line.unwrap(), column.unwrap(), key, message)
        }
        other => panic!("expected a TOML error, got {other:?}"),
    }
}

#[test]
fn missing_sections_get_defaults() {
    let c = parse(MINIMAL).unwrap();
    assert_eq!(c.imap.listen, [addr("127.0.0.1:143")]);
    assert!(
        c.imap.listen_tls.is_empty(),
        "no [tls] means no implicit TLS listener"
    );
    assert!(c.imap.plaintext_auth_on_loopback);
    assert_eq!(c.lmtp.listen, [Listen::Tcp(addr("127.0.0.1:24"))]);
    assert_eq!(c.lmtp.socket_mode, 0o660);
    assert!(c.tls.is_none());
    assert_eq!(c.storage.index_root, None);
    assert_eq!(c.storage.index_map_size, DEFAULT_INDEX_MAP_SIZE);
    assert!(c.storage.fsync);
    assert_eq!(c.log.level, "info");
    // With [tls], listen_tls defaults to 993 on loopback.
    let c = with("[tls]\ncert = \"c.pem\"\nkey = \"k.pem\"\n").unwrap();
    assert_eq!(c.imap.listen_tls, [addr("127.0.0.1:993")]);
}

#[test]
fn empty_lists_disable_listeners() {
    let c = with("[imap]\nlisten = []\n[lmtp]\nlisten = []\n").unwrap();
    assert!(c.imap.listen.is_empty());
    assert!(c.lmtp.listen.is_empty());
}

#[test]
fn required_keys() {
    for (text, key) in [
        ("[auth]\nusers_file = \"u\"\n", "storage.mail_location"),
        (
            "[storage]\nfsync = true\n[auth]\nusers_file = \"u\"\n",
            "storage.mail_location",
        ),
        ("[storage]\nmail_location = \"/m/%u\"\n", "auth.users_file"),
        (
            "[storage]\nmail_location = \"/m/%u\"\n[auth]\n",
            "auth.users_file",
        ),
    ] {
        match parse(text) {
            Err(ConfigError::Missing { key: k, path }) => {
                assert_eq!(k, key);
                assert_eq!(path, Path::new(ORIGIN));
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
    match with("[tls]\ncert = \"c.pem\"\n") {
        Err(ConfigError::Missing { key, .. }) => assert_eq!(key, "tls.key"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unknown_keys_are_named_with_position() {
    let (line, col, key, msg) = toml_err(with("[imap]\nlisten = []\nlistne_tls = []\n"));
    assert_eq!((line, col), (7, 1));
    assert_eq!(key.as_deref(), Some("imap.listne_tls"));
    assert!(msg.contains("unknown field `listne_tls`"), "{msg}");

    let (line, _, key, _) = toml_err(with("[imapd]\nlisten = []\n"));
    assert_eq!(line, 5);
    assert_eq!(key.as_deref(), Some("imapd"));

    let (_, _, key, _) = toml_err(parse(
        &MINIMAL.replace("[auth]", "[auth]\nuser_file = \"x\""),
    ));
    assert_eq!(key.as_deref(), Some("auth.user_file"));

    // The Display form carries it all.
    let e = with("[storage2]\n").unwrap_err().to_string();
    assert!(e.starts_with("/etc/maildex/maildex.toml:5:"), "{e}");
    assert!(e.contains("`storage2`"), "{e}");
}

#[test]
fn bad_addresses_are_reported_where_they_are() {
    let (line, col, key, msg) = toml_err(with(
        "[imap]\nlisten = [\"127.0.0.1:143\", \"localhost:143\"]\n",
    ));
    // toml reports errors inside an array at the array itself.
    assert_eq!((line, col), (6, 10));
    assert_eq!(key.as_deref(), Some("imap.listen"));
    assert!(msg.contains("localhost:143"), "{msg}");

    for bad in [
        "\"127.0.0.1\"",
        "\"1.2.3.4:99999\"",
        "\"::1:143\"",
        "143",
        "\"\"",
    ] {
        let (_, _, key, _) = toml_err(with(&format!("[imap]\nlisten_tls = [{bad}]\n")));
        assert_eq!(key.as_deref(), Some("imap.listen_tls"), "{bad}");
    }
    // Multi-line array.
    let (line, _, key, _) = toml_err(with(
        "[lmtp]\nlisten = [\n  \"127.0.0.1:24\",\n  \"unix:\",\n]\n",
    ));
    assert_eq!(line, 6);
    assert_eq!(key.as_deref(), Some("lmtp.listen"));
}

#[test]
fn addresses_and_sockets_parse() {
    let c = with(
        "[imap]\nlisten = [\"[::1]:143\", \"0.0.0.0:1143\"]\n\
         [lmtp]\nlisten = [\"unix:/run/maildex/lmtp\", \"unix:lmtp.sock\", \"[::]:24\"]\n",
    )
    .unwrap();
    assert_eq!(c.imap.listen, [addr("[::1]:143"), addr("0.0.0.0:1143")]);
    assert_eq!(
        c.lmtp.listen,
        [
            Listen::Unix(PathBuf::from("/run/maildex/lmtp")),
            // Relative to the config file's directory.
            Listen::Unix(PathBuf::from("/etc/maildex/lmtp.sock")),
            Listen::Tcp(addr("[::]:24")),
        ]
    );
}

#[test]
fn relative_paths_resolve_against_the_config_dir() {
    let text = "[tls]\ncert = \"tls/cert.pem\"\nkey = \"/abs/key.pem\"\n\
                [storage]\nmail_location = \"mail/%u\"\nindex_root = \"idx/%d/%n\"\n\
                [auth]\nusers_file = \"users\"\n";
    let c = Config::from_toml_str(text, Path::new("/srv/mx/conf/maildex.toml")).unwrap();
    let tls = c.tls.unwrap();
    assert_eq!(tls.cert, Path::new("/srv/mx/conf/tls/cert.pem"));
    assert_eq!(tls.key, Path::new("/abs/key.pem"));
    assert_eq!(
        c.auth.users_file.as_deref(),
        Some(Path::new("/srv/mx/conf/users"))
    );
    let p = c.storage.paths_for("bob@example.org").unwrap();
    assert_eq!(p.maildir, Path::new("/srv/mx/conf/mail/bob@example.org"));
    assert_eq!(p.index_dir, Path::new("/srv/mx/conf/idx/example.org/bob"));
}

#[test]
fn index_dir_defaults_into_the_maildir() {
    let p = parse(MINIMAL)
        .unwrap()
        .storage
        .paths_for("bob@example.org")
        .unwrap();
    assert_eq!(p.maildir, Path::new("/var/mail/example.org/bob/Maildir"));
    assert_eq!(
        p.index_dir,
        Path::new("/var/mail/example.org/bob/Maildir/maildex-index")
    );
}

#[test]
fn listen_tls_needs_tls() {
    match with("[imap]\nlisten_tls = [\"127.0.0.1:993\"]\n") {
        Err(ConfigError::Invalid { key, .. }) => assert_eq!(key, "imap.listen_tls"),
        other => panic!("{other:?}"),
    }
    // Explicitly empty is fine without [tls].
    assert!(with("[imap]\nlisten_tls = []\n").is_ok());
}

#[test]
fn duplicate_listeners_are_refused() {
    match with("[imap]\nlisten = [\"127.0.0.1:24\"]\n") {
        Err(ConfigError::Invalid { key, message, .. }) => {
            assert_eq!(key, "lmtp.listen");
            assert!(message.contains("imap.listen"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // Port 0 means "any free port" and may repeat.
    assert!(with(
        "[imap]\nlisten = [\"127.0.0.1:0\", \"127.0.0.1:0\"]\n[lmtp]\nlisten = [\"127.0.0.1:0\"]\n"
    )
    .is_ok());
}

#[test]
fn socket_modes() {
    for (v, want) in [
        ("\"0660\"", 0o660),
        ("\"600\"", 0o600),
        ("0o640", 0o640),
        ("\"0o777\"", 0o777),
    ] {
        assert_eq!(
            with(&format!("[lmtp]\nsocket_mode = {v}\n"))
                .unwrap()
                .lmtp
                .socket_mode,
            want,
            "{v}"
        );
    }
    for v in [
        "660",
        "\"0888\"",
        "\"01777\"",
        "\"rw-rw----\"",
        "\"\"",
        "-1",
    ] {
        let (_, _, key, _) = toml_err(with(&format!("[lmtp]\nsocket_mode = {v}\n")));
        assert_eq!(key.as_deref(), Some("lmtp.socket_mode"), "{v}");
    }
    let (_, _, key, _) = toml_err(with("[lmtp]\nsocket_group = \"\"\n"));
    assert_eq!(key.as_deref(), Some("lmtp.socket_group"));
}

#[test]
fn index_map_sizes() {
    let size =
        |v: &str| parse(&MINIMAL.replace("[auth]", &format!("index_map_size = {v}\n[auth]")));
    assert_eq!(size("\"1GiB\"").unwrap().storage.index_map_size, 1 << 30);
    assert_eq!(size("\"256 M\"").unwrap().storage.index_map_size, 256 << 20);
    assert_eq!(size("2097152").unwrap().storage.index_map_size, 2 << 20);
    // Rounded up to whole MiB (a multiple of every page size).
    assert_eq!(size("\"1500k\"").unwrap().storage.index_map_size, 2 << 20);
    for bad in ["\"512k\"", "\"2TiB\"", "0"] {
        match size(bad) {
            Err(ConfigError::Invalid { key, .. }) => assert_eq!(key, "storage.index_map_size"),
            other => panic!("{bad}: {other:?}"),
        }
    }
    for bad in ["\"lots\"", "-5", "\"1.5G\"", "true"] {
        let (_, _, key, _) = toml_err(size(bad));
        assert_eq!(key.as_deref(), Some("storage.index_map_size"), "{bad}");
    }
}

#[test]
fn bad_templates_name_their_key() {
    for (tpl, key) in [
        ("mail_location = \"/var/mail/%x\"", "storage.mail_location"),
        (
            "mail_location = \"maildir:~/Maildir\"",
            "storage.mail_location",
        ),
        (
            "mail_location = \"/var/mail/shared\"",
            "storage.mail_location",
        ),
        (
            "mail_location = \"/m/%n\"\nindex_root = \"/i/%d\"",
            "storage.index_root",
        ),
    ] {
        let text = format!("[storage]\n{tpl}\n[auth]\nusers_file = \"u\"\n");
        // Syntax is checked while parsing (with a position), the rest afterwards.
        match parse(&text) {
            Err(ConfigError::Toml { key: k, line, .. }) => {
                assert_eq!(k.as_deref(), Some(key), "{tpl}");
                assert!(line.is_some());
            }
            Err(ConfigError::Invalid { key: k, .. }) => assert_eq!(k, key, "{tpl}"),
            other => panic!("{tpl}: {other:?}"),
        }
    }
}

#[test]
fn log_levels_are_checked() {
    assert_eq!(
        with("[log]\nlevel = \"debug,maildex_imap=trace\"\n")
            .unwrap()
            .log
            .level,
        "debug,maildex_imap=trace"
    );
    let (_, _, key, msg) = toml_err(with("[log]\nlevel = \"loud\"\n"));
    assert_eq!(key.as_deref(), Some("log.level"));
    assert!(msg.contains("loud"), "{msg}");
}

#[test]
fn log_format_is_text_or_json() {
    use maildex_config::LogFormat;
    assert_eq!(with("").unwrap().log.format, LogFormat::Text);
    let json = with("[log]\nformat = \"json\"\n").unwrap();
    assert_eq!(json.log.format, LogFormat::Json);
    let (_, _, key, msg) = toml_err(with("[log]\nformat = \"xml\"\n"));
    assert_eq!(key.as_deref(), Some("log.format"));
    assert!(msg.contains("xml"), "{msg}");
}

#[test]
fn syntax_errors_have_positions() {
    let (line, _, _, _) = toml_err(parse("[storage]\nmail_location = \"/m/%n\"\nfsync = yes\n"));
    assert_eq!(line, 3);
    let (line, _, key, _) = toml_err(with("[storage]\n"));
    assert_eq!(line, 5, "duplicate table");
    assert_eq!(key.as_deref(), Some("storage"));
}

#[test]
fn load_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("maildex.toml");
    match Config::load(&path) {
        Err(ConfigError::Read { path: p, .. }) => assert_eq!(p, path),
        other => panic!("{other:?}"),
    }
    std::fs::write(&path, format!("{MINIMAL}[imap]\nbogus = 1\n")).unwrap();
    let e = Config::load(&path).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}:6:1: `imap.bogus`", path.display())),
        "{e}"
    );
    // A relative users_file is relative to the file's directory.
    std::fs::write(
        &path,
        "[storage]\nmail_location = \"m/%n\"\n[auth]\nusers_file = \"users\"\n",
    )
    .unwrap();
    let c = Config::load(&path).unwrap();
    assert_eq!(c.auth.users_file, Some(dir.path().join("users")));
}

#[test]
fn dev_config_lives_under_the_data_dir() {
    let c = dev(Path::new("/tmp/md dev/100%"));
    assert_eq!(c.imap.listen, [addr("127.0.0.1:1143")]);
    assert_eq!(c.imap.listen_tls, [addr("127.0.0.1:1993")]);
    assert_eq!(c.lmtp.listen, [Listen::Tcp(addr("127.0.0.1:1024"))]);
    let tls = c.tls.as_ref().unwrap();
    assert_eq!(tls.cert, Path::new("/tmp/md dev/100%/tls/cert.pem"));
    assert_eq!(tls.key, Path::new("/tmp/md dev/100%/tls/key.pem"));
    assert_eq!(
        c.auth.users_file.as_deref(),
        Some(Path::new("/tmp/md dev/100%/users"))
    );
    let p = c.storage.paths_for("demo@example.org").unwrap();
    // The '%' in the data dir stays literal.
    assert_eq!(
        p.maildir,
        Path::new("/tmp/md dev/100%/mail/example.org/demo/Maildir")
    );
    assert_eq!(
        p.index_dir,
        Path::new("/tmp/md dev/100%/index/example.org/demo")
    );
    assert!(c.storage.fsync);
    // A relative data dir is made absolute.
    let c = dev(Path::new("data"));
    assert!(c.auth.users_file.as_ref().unwrap().is_absolute());
    assert!(c
        .storage
        .paths_for("a")
        .unwrap()
        .maildir
        .starts_with(std::env::current_dir().unwrap()));
}

#[test]
fn paths_for_refuses_escaping_names() {
    let c = parse(MINIMAL).unwrap();
    for user in [
        "../../etc",
        "a/b",
        "x@../../etc",
        ".",
        "..x",
        ".profile",
        "a\0b",
        "a\tb",
        "@x",
        "a@b@c",
    ] {
        assert!(
            matches!(
                c.storage.paths_for(user),
                Err(ConfigError::BadUserName { .. })
            ),
            "{user:?}"
        );
    }
    // Every accepted name stays under the template's fixed prefix.
    for user in [
        "alice",
        "Alice@Example.org",
        "a.b+c@d-e.f",
        "x@y",
        "%u",
        "a..",
        "weird name@x",
    ] {
        match c.storage.paths_for(user) {
            Ok(p) => assert!(
                p.maildir.starts_with("/var/mail/"),
                "{user:?} -> {}",
                p.maildir.display()
            ),
            Err(ConfigError::BadUserName { .. }) => assert!(user.contains("..")),
            Err(e) => panic!("{user:?}: {e}"),
        }
    }
}

#[test]
fn lmtp_keys_and_defaults() {
    let c = parse(MINIMAL).unwrap();
    assert_eq!(c.lmtp.recipient_delimiter, "+");
    assert!(!c.lmtp.save_to_detail_mailbox);
    assert_eq!(c.lmtp.max_message_size, 50 << 20);
    assert_eq!(c.lmtp.max_recipients, 100);
    assert_eq!(c.lmtp.command_timeout.as_secs(), 300);
    assert_eq!(c.storage.quota, None);
    let c = with(
        "[lmtp]\naliases_file = \"aliases\"\nrecipient_delimiter = \"+-\"\n\
         save_to_detail_mailbox = true\nmax_message_size = \"1MiB\"\nmax_recipients = 3\n\
         max_line_length = 2000\nmax_connections = 7\ncommand_timeout = \"2m\"\n\
         data_timeout = 45\nshutdown_timeout = \"0\"\nhostname = \"mx.test\"\n",
    )
    .unwrap();
    assert_eq!(
        c.lmtp.aliases_file.as_deref(),
        Some(Path::new("/etc/maildex/aliases"))
    );
    assert_eq!(c.lmtp.recipient_delimiter, "+-");
    assert!(c.lmtp.save_to_detail_mailbox);
    assert_eq!(c.lmtp.max_message_size, 1 << 20);
    assert_eq!(c.lmtp.max_recipients, 3);
    assert_eq!(c.lmtp.max_line_length, 2000);
    assert_eq!(c.lmtp.max_connections, 7);
    assert_eq!(c.lmtp.command_timeout.as_secs(), 120);
    assert_eq!(c.lmtp.data_timeout.as_secs(), 45);
    assert_eq!(c.lmtp.shutdown_timeout.as_secs(), 0);
    assert_eq!(c.lmtp.hostname.as_deref(), Some("mx.test"));
    let c = parse(&MINIMAL.replace("[auth]", "quota = \"100M\"\n[auth]")).unwrap();
    assert_eq!(c.storage.quota, Some(100 << 20));
    let c = parse(&MINIMAL.replace("[auth]", "quota = 0\n[auth]")).unwrap();
    assert_eq!(c.storage.quota, None, "0 means no quota");
    assert_eq!(c.storage.quota_warning, None);
    let c = parse(&MINIMAL.replace("[auth]", "quota_warning = 90\n[auth]")).unwrap();
    assert_eq!(c.storage.quota_warning, Some(90));
    for bad in ["0", "100", "250"] {
        let e = parse(&MINIMAL.replace("[auth]", &format!("quota_warning = {bad}\n[auth]")))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("storage.quota_warning") && e.contains("1 to 99"),
            "{bad}: {e}"
        );
    }
    // the daemon's unsynced index commits: 5 s by default, 0 syncs each, 5 min at most
    assert_eq!(c.storage.index_sync_delay.as_secs(), 5);
    let c = parse(&MINIMAL.replace("[auth]", "index_sync_delay = \"2s\"\n[auth]")).unwrap();
    assert_eq!(c.storage.index_sync_delay.as_secs(), 2);
    let c = parse(&MINIMAL.replace("[auth]", "index_sync_delay = 0\n[auth]")).unwrap();
    assert!(c.storage.index_sync_delay.is_zero());
    let e = parse(&MINIMAL.replace("[auth]", "index_sync_delay = \"10m\"\n[auth]"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("storage.index_sync_delay") && e.contains("300 s"),
        "{e}"
    );
}

#[test]
fn lmtp_values_are_checked() {
    for (extra, key) in [
        ("[lmtp]\nmax_line_length = 100\n", "lmtp.max_line_length"),
        ("[lmtp]\nmax_recipients = 0\n", "lmtp.max_recipients"),
        ("[lmtp]\nmax_connections = 0\n", "lmtp.max_connections"),
        ("[lmtp]\ncommand_timeout = 0\n", "lmtp.command_timeout"),
        (
            "[lmtp]\nrecipient_delimiter = \"@\"\n",
            "lmtp.recipient_delimiter",
        ),
        ("[lmtp]\nhostname = \"a b\"\n", "lmtp.hostname"),
    ] {
        match with(extra) {
            Err(ConfigError::Invalid { key: k, .. }) => assert_eq!(k, key, "{extra}"),
            other => panic!("{extra}: {other:?}"),
        }
    }
    let (_, _, key, _) = toml_err(with("[lmtp]\ndata_timeout = \"soon\"\n"));
    assert_eq!(key.as_deref(), Some("lmtp.data_timeout"));
}

#[test]
fn imap_limits_and_defaults() {
    let c = parse(MINIMAL).unwrap();
    assert_eq!(c.imap.max_connections, 10_000);
    assert_eq!(c.imap.max_connections_per_ip, 100);
    assert_eq!(c.imap.login_timeout.as_secs(), 60);
    assert_eq!(c.imap.autologout.as_secs(), 30 * 60);
    assert_eq!(c.imap.max_line_length, 64 << 10);
    assert_eq!(c.imap.max_message_size, 64 << 20);
    assert_eq!(dev(Path::new("/tmp/x")).imap.autologout.as_secs(), 30 * 60);
    let c = with(
        "[imap]\nmax_connections = 50\nmax_connections_per_ip = 5\nlogin_timeout = \"15s\"\n\
         autologout = \"2h\"\nmax_line_length = 8192\nmax_message_size = \"1GiB\"\n",
    )
    .unwrap();
    assert_eq!(c.imap.max_connections, 50);
    assert_eq!(c.imap.max_connections_per_ip, 5);
    assert_eq!(c.imap.login_timeout.as_secs(), 15);
    assert_eq!(c.imap.autologout.as_secs(), 7200);
    assert_eq!(c.imap.max_line_length, 8192);
    assert_eq!(c.imap.max_message_size, 1 << 30);
    // exactly the RFC's 30 minutes, as seconds
    let c = with("[imap]\nautologout = 1800\n").unwrap();
    assert_eq!(c.imap.autologout.as_secs(), 1800);
}

#[test]
fn imap_limits_are_checked() {
    for (extra, key, says) in [
        ("max_connections = 0", "imap.max_connections", "at least 1"),
        (
            "max_connections_per_ip = 0",
            "imap.max_connections_per_ip",
            "at least 1",
        ),
        (
            "login_timeout = 0",
            "imap.login_timeout",
            "at least 1 second",
        ),
        ("autologout = 0", "imap.autologout", "30 minutes"),
        ("autologout = \"29m\"", "imap.autologout", "RFC 9051 §5.4"),
        ("autologout = 1799", "imap.autologout", "1799 s"),
        ("max_line_length = 8191", "imap.max_line_length", "8192"),
        (
            "max_line_length = \"17MiB\"",
            "imap.max_line_length",
            "16MiB",
        ),
        ("max_message_size = 0", "imap.max_message_size", "no limit"),
        (
            "max_message_size = \"4GiB\"",
            "imap.max_message_size",
            "4294967295",
        ),
    ] {
        let r = with(&format!("[imap]\n{extra}\n"));
        match &r {
            Err(ConfigError::Invalid {
                key: k, message, ..
            }) => {
                assert_eq!(k, key, "{extra}");
                assert!(message.contains(says), "{extra}: {message}");
            }
            other => panic!("{extra}: {other:?}"),
        }
        // the message a user sees names the key
        let shown = r.unwrap_err().to_string();
        assert!(shown.contains(&format!("`{key}`")), "{shown}");
    }
    for extra in [
        "login_timeout = \"soon\"",
        "autologout = -5",
        "max_connections = -1",
        "max_line_length = \"64 lines\"",
    ] {
        let (_, _, key, _) = toml_err(with(&format!("[imap]\n{extra}\n")));
        let name = extra.split(' ').next().unwrap();
        assert_eq!(key, Some(format!("imap.{name}")), "{extra}");
    }
}

#[test]
fn daemon_user_and_group() {
    let c = parse(MINIMAL).unwrap();
    assert_eq!(c.daemon, maildex_config::DaemonConfig::default());
    let c = with("[daemon]\nuser = \"vmail\"\n").unwrap();
    assert_eq!(c.daemon.user.as_deref(), Some("vmail"));
    assert_eq!(c.daemon.group, None);
    let c = with("[daemon]\nuser = \"vmail\"\ngroup = \"mail\"\n").unwrap();
    assert_eq!(c.daemon.group.as_deref(), Some("mail"));
    match with("[daemon]\ngroup = \"mail\"\n") {
        Err(ConfigError::Invalid { key, message, .. }) => {
            assert_eq!(key, "daemon.group");
            assert!(message.contains("daemon.user"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let (_, _, key, _) = toml_err(with("[daemon]\nuser = \"\"\n"));
    assert_eq!(key.as_deref(), Some("daemon.user"));
    let (_, _, key, _) = toml_err(with("[daemon]\nuid = 5\n"));
    assert!(key.is_some(), "an unknown key in [daemon] is refused");
}

#[test]
fn users_in_sql_instead_of_a_users_file() {
    let sql = "[storage]\nmail_location = \"/m/%u\"\n[auth]\ncache_size = 50\ncache_ttl = \"2m\"\n\
               [auth.sql]\ndriver = \"pgsql\"\nconnect = \"host=db dbname=mail\"\n\
               password_query = \"SELECT password FROM u WHERE n = '%u'\"\n\
               user_query = \"SELECT n AS user FROM u WHERE n = '%u'\"\n";
    let c = parse(sql).unwrap();
    assert_eq!(c.auth.users_file, None);
    let s = c.auth.sql.as_ref().unwrap();
    assert_eq!(s.driver, maildex_config::SqlDriver::Pgsql);
    assert_eq!(
        s.max_connections,
        maildex_config::DEFAULT_SQL_MAX_CONNECTIONS
    );
    assert_eq!(s.query_timeout, maildex_config::DEFAULT_SQL_QUERY_TIMEOUT);
    assert_eq!(s.iterate_query, None);
    assert_eq!(c.auth.cache_size, 50);
    assert_eq!(c.auth.cache_ttl, std::time::Duration::from_secs(120));
    assert_eq!(
        c.auth.cache_negative_ttl,
        maildex_config::DEFAULT_AUTH_CACHE_NEGATIVE_TTL
    );
    // the passwd-file keeps the default cache
    let c = parse(MINIMAL).unwrap();
    assert_eq!(c.auth.cache_size, maildex_config::DEFAULT_AUTH_CACHE_SIZE);

    let both = sql.replace("[auth]\n", "[auth]\nusers_file = \"u\"\n");
    assert!(
        matches!(parse(&both), Err(ConfigError::Invalid { key, .. }) if key == "auth.users_file")
    );
    for (bad, key) in [
        ("driver = \"pgsql\"", "driver = \"oracle\""),
        ("[auth.sql]\n", "[auth.sql]\nquery_timeout = 0\n"),
        ("[auth.sql]\n", "[auth.sql]\nmax_connections = 0\n"),
        ("user_query", "userquery"),
    ] {
        assert!(parse(&sql.replace(bad, key)).is_err(), "{key}");
    }
}

#[test]
fn users_in_ldap_as_dovecot_ldap_conf() {
    let ldap = "[storage]\nmail_location = \"/m/%u\"\n[auth]\n[auth.ldap]\n\
                uris = \"ldap://127.0.0.1:389 ldapi://%2Frun%2Fslapd%2Fldapi\"\n\
                dn = \"cn=svc,dc=example,dc=org\"\ndnpass = \"secret\"\n\
                base = \"ou=people,dc=example,dc=org\"\n";
    let c = parse(ldap).unwrap();
    assert_eq!(c.auth.users_file, None);
    let l = c.auth.ldap.as_ref().unwrap();
    assert_eq!(l.uris.len(), 2);
    assert_eq!(l.scope, maildex_config::LdapScope::Subtree);
    // Dovecot's defaults
    assert_eq!(l.user_filter, "(&(objectClass=posixAccount)(uid=%u))");
    assert_eq!(l.pass_filter, l.user_filter);
    assert_eq!(l.iterate_filter, "(objectClass=posixAccount)");
    assert_eq!(l.pass_attrs, "uid=user,userPassword=password");
    assert_eq!(l.iterate_attrs, "uid=user");
    assert!(!l.auth_bind);
    let c = parse(&format!(
        "{ldap}scope = \"onelevel\"\nauth_bind = true\n\
         auth_bind_userdn = \"uid=%n,ou=people,dc=example,dc=org\"\nquery_timeout = \"2s\"\n"
    ))
    .unwrap();
    let l = c.auth.ldap.as_ref().unwrap();
    assert_eq!(l.scope, maildex_config::LdapScope::Onelevel);
    assert!(l.auth_bind);
    assert_eq!(l.query_timeout, std::time::Duration::from_secs(2));

    for other in [
        "[auth]\nusers_file = \"u\"\n",
        "[auth]\n[auth.sql]\ndriver = \"pgsql\"\nconnect = \"x\"\npassword_query = \"x\"\n\
         user_query = \"x\"\n",
    ] {
        let two = ldap.replace("[auth]\n", other);
        assert!(
            matches!(parse(&two), Err(ConfigError::Invalid { key, .. }) if key == "auth.users_file"),
            "{other}"
        );
    }
    for (from, to) in [
        ("ldap://127.0.0.1:389", "ldaps://127.0.0.1"),
        ("ldap://127.0.0.1:389", "http://x"),
        ("dnpass = \"secret\"\n", ""),
        (
            "[auth.ldap]\n",
            "[auth.ldap]\nauth_bind_userdn = \"uid=%n\"\n",
        ),
        ("[auth.ldap]\n", "[auth.ldap]\nscope = \"sub\"\n"),
        ("[auth.ldap]\n", "[auth.ldap]\nmax_connections = 0\n"),
        ("[auth.ldap]\n", "[auth.ldap]\nhosts = \"x\"\n"),
    ] {
        assert!(parse(&ldap.replace(from, to)).is_err(), "{to}");
    }
}
