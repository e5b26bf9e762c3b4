//! `maildex user add|passwd|list` on the Dovecot passwd-file.

use std::io::{BufRead, IsTerminal};
use std::os::unix::fs::PermissionsExt;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use maildex_daemon::privileges;
use rand::Rng;

use crate::common::load_config;
use crate::ConfigArg;

#[derive(Args, Debug)]
pub struct PasswordArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Login name: a full address (alice@example.org) or a bare local part (alice), which
    /// matches that local part at any domain.
    pub name: String,
    /// Read the password from the first line of standard input.
    #[arg(long)]
    pub password_stdin: bool,
}

/// A random password of 20 characters from an unambiguous alphabet.
pub fn generate_password() -> String {
    const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut rng = rand::thread_rng();
    (0..20)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char)
        .collect()
}

fn password(a: &PasswordArgs) -> Result<(String, bool)> {
    if a.password_stdin {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .context("reading the password from stdin")?;
        let pw = line.trim_end_matches(['\r', '\n']).to_string();
        if pw.is_empty() {
            bail!("empty password on stdin");
        }
        return Ok((pw, false));
    }
    if !std::io::stdout().is_terminal() {
        eprintln!("note: generating a password (use --password-stdin to set one)");
    }
    Ok((generate_password(), true))
}

/// An edit keeps the users file's owner and mode (maildex-auth's `edit`); a file this
/// command creates is made readable by the daemon's group.
pub fn add(a: &PasswordArgs) -> Result<ExitCode> {
    let config = load_config(&a.config.config)?;
    let (pw, generated) = password(a)?;
    let hash = maildex_auth::hash_password(pw.as_bytes())?;
    let path = crate::common::users_file(&config)?;
    let new_file = std::fs::symlink_metadata(path).is_err();
    maildex_auth::add_user(path, &a.name, &hash)?;
    if new_file {
        share_with_daemon(&config)?;
    }
    if generated {
        println!("{}: password {pw}", a.name);
    } else {
        println!("{}: added", a.name);
    }
    Ok(ExitCode::SUCCESS)
}

/// A new users file is created 0600 by whoever runs `user add`. Run as root with a
/// `[daemon] user`, it becomes root's, group the daemon's group, mode 0640: the daemon
/// reads it after dropping root (reloads), as does `maildex deliver` under postfix's pipe
/// transport, and only root edits it. Otherwise it stays 0600, its creator's.
fn share_with_daemon(config: &maildex_config::Config) -> Result<()> {
    let Some(user) = &config.daemon.user else {
        return Ok(());
    };
    if !privileges::is_root() {
        return Ok(());
    }
    let id = privileges::resolve(user, config.daemon.group.as_deref())?;
    let path = crate::common::users_file(config)?;
    std::os::unix::fs::chown(path, None, Some(id.gid))
        .and_then(|()| std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o640)))
        .with_context(|| format!("giving group {} read access to {}", id.gid, path.display()))
}

pub fn passwd(a: &PasswordArgs) -> Result<ExitCode> {
    let config = load_config(&a.config.config)?;
    let (pw, generated) = password(a)?;
    let hash = maildex_auth::hash_password(pw.as_bytes())?;
    maildex_auth::set_password(crate::common::users_file(&config)?, &a.name, &hash)?;
    if generated {
        println!("{}: password {pw}", a.name);
    } else {
        println!("{}: password changed", a.name);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn list(a: &ConfigArg) -> Result<ExitCode> {
    let config = load_config(&a.config)?;
    let file = maildex_auth::UsersFile::load(crate::common::users_file(&config)?)?;
    for e in file.list() {
        println!("{}\t{}", e.name, e.password.scheme);
    }
    for (user, scheme) in file.weak_schemes() {
        let why = crate::cmd_serve::weak_text(&scheme);
        eprintln!("warning: {user} has a {scheme} password: {why}");
    }
    Ok(ExitCode::SUCCESS)
}
