//! `maildex serve`: binds the IMAP and LMTP listeners of the config, switches to `[daemon]
//! user` if set, then serves until SIGTERM/SIGINT (SIGHUP reloads certificates and users).
//! No user's mail is touched at start-up: a user's Maildir and index are created, opened
//! and synced at the user's first login or delivery (issue 20 #3).
//! `--dev` first creates the embedded default: a data folder with a config, a self-signed
//! certificate, a demo user with a printed password and a few messages, loopback ports.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use maildex_store::DeliverOptions;

use crate::common::{load_config, open_store_upgrading};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Configuration file (TOML).
    #[arg(long, short = 'c', default_value = maildex_config::DEFAULT_CONFIG_PATH, env = "MAILDEX_CONFIG")]
    pub config: PathBuf,
    /// Run on the embedded default: a data folder with a config, a demo user with a printed
    /// password and a few messages, loopback ports.
    #[arg(long)]
    pub dev: bool,
    /// Data folder for --dev.
    #[arg(long, default_value = "maildex-dev", requires = "dev")]
    pub data: PathBuf,
}

const DEMO_USER: &str = "demo@example.org";
/// The demo messages `--dev` delivers, kept as files (crates/maildex/dev/) so that the
/// shipped binary does not link the corpus generator: plain text, RFC 2047 and
/// quoted-printable, a reply, multipart/alternative, an attachment, a forwarded message.
const DEMO_MESSAGES: [&[u8]; 6] = [
    include_bytes!("../dev/01-welcome.eml"),
    include_bytes!("../dev/02-accents.eml"),
    include_bytes!("../dev/03-reply.eml"),
    include_bytes!("../dev/04-newsletter.eml"),
    include_bytes!("../dev/05-attachment.eml"),
    include_bytes!("../dev/06-forwarded.eml"),
];

fn dev_config_text(data: &Path) -> String {
    let d = data.display();
    format!(
        "# Written by `maildex serve --dev`: the embedded default, all under this folder.\n\
         [imap]\nlisten = [\"127.0.0.1:1143\"]\nlisten_tls = [\"127.0.0.1:1993\"]\n\n\
         [lmtp]\nlisten = [\"127.0.0.1:1024\"]\n\n\
         [tls]\ncert = \"{d}/cert.pem\"\nkey = \"{d}/key.pem\"\n\n\
         [storage]\nmail_location = \"{d}/mail/%d/%n/Maildir\"\nindex_root = \"{d}/index/%d/%n\"\n\n\
         [auth]\nusers_file = \"{d}/users\"\n"
    )
}

/// Creates the dev data folder (once) and returns its config file.
fn prepare_dev(data: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(data).with_context(|| format!("creating {}", data.display()))?;
    let data = data.canonicalize()?;
    let config_path = data.join("maildex.toml");
    let (cert, key) = (data.join("cert.pem"), data.join("key.pem"));
    if !cert.exists() || !key.exists() {
        maildex_imap::tls::write_self_signed(&["localhost", "127.0.0.1"], &cert, &key)?;
        println!("self-signed certificate for localhost: {}", cert.display());
    }
    if !config_path.exists() {
        std::fs::write(&config_path, dev_config_text(&data))?;
    }
    let config = load_config(&config_path)?;
    let users_file = crate::common::users_file(&config)?;
    if !users_file.exists() {
        let pw = crate::cmd_user::generate_password();
        let hash = maildex_auth::hash_password(pw.as_bytes())?;
        maildex_auth::add_user(users_file, DEMO_USER, &hash)?;
        println!("demo user: {DEMO_USER}  password: {pw}");
        let store = open_store_upgrading(&config, DEMO_USER)?;
        for msg in DEMO_MESSAGES {
            store.deliver("INBOX", &mut &msg[..], &DeliverOptions::default())?;
        }
        println!(
            "delivered {} demo messages to {DEMO_USER}'s INBOX (indexed at delivery)",
            DEMO_MESSAGES.len()
        );
    }
    Ok(config_path)
}

/// What a start-up warning says about a weak scheme.
pub(crate) fn weak_text(scheme: &str) -> &'static str {
    if matches!(scheme, "PLAIN" | "CLEAR" | "CLEARTEXT") {
        "password stored in clear"
    } else {
        "password hashed with a fast scheme (rehash with `maildex user passwd`)"
    }
}

/// The users and aliases files are read again, as the daemon's user, when they change and
/// on SIGHUP: one that user cannot read would keep the users of the start for good, so say
/// so now, with the fix (issue 15 #4).
fn warn_unreadable_after_switch(config: &maildex_config::Config) {
    let files = config
        .auth
        .users_file
        .iter()
        .chain(config.lmtp.aliases_file.iter());
    for path in files {
        if let Err(e) = std::fs::File::open(path) {
            tracing::warn!(
                file = %path.display(),
                error = %maildex_maildir::explain_denied(path, e),
                "maildex cannot read this file after the switch to [daemon] user, so changes \
                 and SIGHUP will not reload it: give it the daemon's group and mode 0640 \
                 (chgrp GROUP FILE; chmod 0640 FILE)"
            );
        }
    }
}

/// Warns of the users whose passwords are stored in clear or with a fast hash.
fn warn_weak_schemes(accounts: &maildex_accounts::Accounts) {
    let weak = accounts.weak_schemes();
    for (user, scheme) in weak.iter().take(WEAK_WARNINGS) {
        tracing::warn!(user = %user, scheme = %scheme, "{}", weak_text(scheme));
    }
    if weak.len() > WEAK_WARNINGS {
        tracing::warn!(
            more = weak.len() - WEAK_WARNINGS,
            "more users with weak password schemes (`maildex user list` shows them all)"
        );
    }
}

/// Weak password schemes named one by one at start; the rest are counted (a site file
/// of 100,000 such users must not take the start with 100,000 log lines).
const WEAK_WARNINGS: usize = 10;

pub fn run(a: &ServeArgs) -> Result<ExitCode> {
    let config_path = if a.dev {
        prepare_dev(&a.data)?
    } else {
        a.config.clone()
    };
    let config = load_config(&config_path)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("maildex")
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        // Binding may need root (ports below 1024, the LMTP socket's owner, a root-only
        // key); nothing after it does, so the switch to [daemon] user comes before the
        // first mail or index file is opened.
        let bound = maildex_daemon::Daemon::bind(
            config.clone(),
            maildex_imap::context::Settings::default(),
        )
        .await?;
        warn_weak_schemes(bound.accounts());
        maildex_daemon::privileges::apply(&config.daemon)?;
        // issue 20 #4: a users file whose uid/gid fields name another owner than the one
        // we now run as would get files that owner cannot use (maildex_accounts::owner)
        bound
            .accounts()
            .refuse_foreign_owners()
            .context("refusing to start")?;
        warn_unreadable_after_switch(&config);
        println!("config: {}", config_path.display());
        if a.dev {
            println!(
                "try:    maildex index dump --config {} --user {DEMO_USER} --mailbox INBOX",
                config_path.display()
            );
        }
        maildex_daemon::serve_forever(bound).await?;
        anyhow::Ok(())
    })?;
    // Dropping the runtime waits for its blocking tasks (a full-text batch the indexer
    // had begun); what they committed unsynced is made durable last, so a clean stop
    // leaves no index to inspect at the next start.
    drop(runtime);
    maildex_index::sync_unsynced().context("syncing the indexes as the daemon stops")?;
    Ok(ExitCode::SUCCESS)
}
