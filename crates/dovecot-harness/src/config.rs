//! The private dovecot.conf and passwd-file the harness writes.

use std::fmt::Write as _;
use std::path::Path;

use crate::{MailOwner, Options};

/// Ports and paths a config is written for.
pub(crate) struct Layout<'a> {
    /// The scratch folder (base_dir, state_dir, log, users file, homes live under it).
    pub scratch: &'a Path,
    /// IMAP port on 127.0.0.1.
    pub imap_port: u16,
    /// LMTP port on 127.0.0.1.
    pub lmtp_port: u16,
}

/// Characters that cannot appear in a passwd-file field or a config value we write.
pub(crate) fn bad_field(s: &str) -> bool {
    s.is_empty() || s.contains([':', '\n', '\r', '\0', '"'])
}

/// The passwd-file (Dovecot's format: `user:{SCHEME}pass:uid:gid:gecos:home:shell:extra`)
/// for passdb and userdb alike. Passwords are stored `{PLAIN}`: a loopback test server.
pub(crate) fn users_file(opts: &Options, layout: &Layout<'_>) -> String {
    let (uid, gid) = opts.mail_owner.ids();
    let mut out = String::new();
    for u in &opts.users {
        let home = layout.scratch.join("home").join(&u.name);
        let _ = writeln!(
            out,
            "{}:{{PLAIN}}{}:{uid}:{gid}::{}::",
            u.name,
            u.password,
            home.display()
        );
    }
    out
}

/// dovecot.conf: everything Dovecot needs spelled out, nothing read from /etc/dovecot.
pub(crate) fn dovecot_conf(opts: &Options, layout: &Layout<'_>) -> String {
    let s = layout.scratch.display();
    let conns = opts.max_connections.max(10);
    // Room for every client connection plus the master's own helpers (auth, anvil, log,
    // config, stats, lmtp, indexer).
    let procs = conns + 64;
    let mut c = String::new();
    let _ = writeln!(
        c,
        "# Written by maildex-dovecot-harness: a private, loopback-only Dovecot."
    );
    let _ = writeln!(c, "protocols = imap lmtp");
    let _ = writeln!(c, "listen = 127.0.0.1");
    let _ = writeln!(c, "base_dir = {s}/run");
    let _ = writeln!(c, "state_dir = {s}/state");
    let _ = writeln!(c, "log_path = {s}/dovecot.log");
    let _ = writeln!(c, "ssl = no");
    let _ = writeln!(c, "disable_plaintext_auth = no");
    let _ = writeln!(c, "auth_mechanisms = plain");
    let _ = writeln!(c, "mail_location = {}", opts.mail_location);
    // Dovecot's default (`optimized`) unless asked otherwise; written out so the config says so
    let _ = writeln!(c, "mail_fsync = {}", opts.mail_fsync);
    let _ = writeln!(c, "default_process_limit = {procs}");
    let _ = writeln!(c, "default_client_limit = {}", procs * 2);
    if let MailOwner::Current { user } = &opts.mail_owner {
        // Running unprivileged: every service runs as the calling user.
        let _ = writeln!(c, "default_internal_user = {user}");
        let _ = writeln!(c, "default_login_user = {user}");
    }
    match &opts.auth {
        Some(auth) => {
            let _ = writeln!(c, "{auth}");
        }
        None => {
            let _ = writeln!(
                c,
                "passdb {{\n  driver = passwd-file\n  args = {s}/users\n}}"
            );
            let _ = writeln!(
                c,
                "userdb {{\n  driver = passwd-file\n  args = {s}/users\n}}"
            );
        }
    }
    let _ = writeln!(
        c,
        "service imap-login {{\n  inet_listener imap {{\n    port = {}\n  }}\n  inet_listener imaps {{\n    port = 0\n  }}\n  process_limit = {procs}\n}}",
        layout.imap_port
    );
    let _ = writeln!(c, "service imap {{\n  process_limit = {procs}\n}}");
    let _ = writeln!(
        c,
        "service lmtp {{\n  inet_listener lmtp {{\n    address = 127.0.0.1\n    port = {}\n  }}\n}}",
        layout.lmtp_port
    );
    // Dovecot's default of 10 connections per user and IP would refuse the idle benchmark.
    let _ = writeln!(
        c,
        "protocol imap {{\n  mail_max_userip_connections = {}\n}}",
        conns
    );
    if !opts.extra_config.is_empty() {
        let _ = writeln!(c, "{}", opts.extra_config);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::User;

    fn opts() -> Options {
        Options {
            mail_location: "maildir:/m/%d/%n/Maildir".into(),
            users: vec![User::new("a@example.org", "pw")],
            mail_owner: MailOwner::Ids { uid: 7, gid: 8 },
            ..Options::default()
        }
    }

    #[test]
    fn conf_names_ports_paths_and_limits() {
        let l = Layout {
            scratch: Path::new("/s"),
            imap_port: 1431,
            lmtp_port: 2424,
        };
        let mut o = opts();
        o.max_connections = 1000;
        let c = dovecot_conf(&o, &l);
        for want in [
            "protocols = imap lmtp\n",
            "base_dir = /s/run\n",
            "state_dir = /s/state\n",
            "log_path = /s/dovecot.log\n",
            "mail_location = maildir:/m/%d/%n/Maildir\n",
            "    port = 1431\n",
            "    port = 2424\n",
            "args = /s/users\n",
            "default_process_limit = 1064\n",
            "mail_max_userip_connections = 1000\n",
        ] {
            assert!(c.contains(want), "missing {want:?} in\n{c}");
        }
        assert!(!c.contains("default_internal_user"));
    }

    #[test]
    fn auth_blocks_replace_the_passwd_file() {
        let l = Layout {
            scratch: Path::new("/s"),
            imap_port: 1,
            lmtp_port: 2,
        };
        let mut o = opts();
        o.auth = Some("passdb {\n  driver = sql\n  args = /s/sql.conf\n}".into());
        let c = dovecot_conf(&o, &l);
        assert!(c.contains("driver = sql\n"), "{c}");
        assert!(!c.contains("passwd-file"), "{c}");
    }

    #[test]
    fn users_file_has_owner_and_home() {
        let l = Layout {
            scratch: Path::new("/s"),
            imap_port: 1,
            lmtp_port: 2,
        };
        assert_eq!(
            users_file(&opts(), &l),
            "a@example.org:{PLAIN}pw:7:8::/s/home/a@example.org::\n"
        );
    }

    #[test]
    fn bad_fields() {
        assert!(bad_field("a:b"));
        assert!(bad_field(""));
        assert!(bad_field("a\nb"));
        assert!(!bad_field("user0001@example.org"));
    }
}
