//! `maildex user add|passwd|list` on the Dovecot passwd-file.

use std::io::{BufRead, IsTerminal};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
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

pub fn add(a: &PasswordArgs) -> Result<ExitCode> {
    let config = load_config(&a.config.config)?;
    let (pw, generated) = password(a)?;
    let hash = maildex_auth::hash_password(pw.as_bytes())?;
    maildex_auth::add_user(&config.auth.users_file, &a.name, &hash)?;
    if generated {
        println!("{}: password {pw}", a.name);
    } else {
        println!("{}: added", a.name);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn passwd(a: &PasswordArgs) -> Result<ExitCode> {
    let config = load_config(&a.config.config)?;
    let (pw, generated) = password(a)?;
    let hash = maildex_auth::hash_password(pw.as_bytes())?;
    maildex_auth::set_password(&config.auth.users_file, &a.name, &hash)?;
    if generated {
        println!("{}: password {pw}", a.name);
    } else {
        println!("{}: password changed", a.name);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn list(a: &ConfigArg) -> Result<ExitCode> {
    let config = load_config(&a.config)?;
    let file = maildex_auth::UsersFile::load(&config.auth.users_file)?;
    for e in file.list() {
        println!("{}\t{}", e.name, e.password.scheme);
    }
    for (user, scheme) in file.weak_schemes() {
        let why = crate::cmd_serve::weak_text(&scheme);
        eprintln!("warning: {user} has a {scheme} password: {why}");
    }
    Ok(ExitCode::SUCCESS)
}
