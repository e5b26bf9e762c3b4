//! `maildex`: the daemon and its admin commands.

mod cmd_deliver;
mod cmd_index;
mod cmd_rebuild;
mod cmd_serve;
mod cmd_user;
mod common;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// maildex: a Maildir IMAP server whose mailbox listings are answered from an LMDB index.
#[derive(Parser, Debug)]
#[command(name = "maildex", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the server (`--dev`: on its embedded default, with a demo user).
    Serve(cmd_serve::ServeArgs),
    /// Deliver one message from stdin (postfix mailbox_command or pipe transport); exit
    /// codes follow sysexits (75 retry, 67 unknown user).
    Deliver(cmd_deliver::DeliverArgs),
    /// Inspect and maintain the per-user indexes. Started as root, these switch to the
    /// mail's owner first (`[daemon] user`, else the owner of the mail root).
    #[command(subcommand)]
    Index(IndexCommand),
    /// Manage the users file (Dovecot passwd-file format).
    #[command(subcommand)]
    User(UserCommand),
}

/// The config file option every admin command takes.
#[derive(Args, Debug, Clone)]
pub struct ConfigArg {
    /// Configuration file (TOML).
    #[arg(
        long,
        short = 'c',
        default_value = "/etc/maildex/maildex.toml",
        env = "MAILDEX_CONFIG"
    )]
    pub config: PathBuf,
}

/// Which users a maintenance command applies to.
#[derive(Args, Debug, Clone)]
#[group(required = true, multiple = false)]
pub struct UsersArg {
    /// One user (login name as in the users file).
    #[arg(long, short = 'u')]
    pub user: Option<String>,
    /// Every user of the users file.
    #[arg(long)]
    pub all: bool,
}

#[derive(Subcommand, Debug)]
enum IndexCommand {
    /// Print index records readably (mailbox header, records, cached fields, part tree).
    Dump(cmd_index::DumpArgs),
    /// Re-index every message from the files, keeping every UID. Use after an upgrade that
    /// changes the index format, after restoring mail from a backup, or when `index check`
    /// reports differences. Safe while the daemon runs.
    Rebuild(cmd_index::RebuildArgs),
    /// Report every difference between index and Maildir; exit status 1 if there is any.
    /// Reads only and creates nothing (unless --repair); a folder not indexed yet, and
    /// messages whose full text is not indexed yet, are listed, not differences.
    Check(cmd_index::CheckArgs),
    /// Rewrite the index compactly. Needs the user's index closed (no sessions).
    Compact(cmd_index::UsersCmdArgs),
}

#[derive(Subcommand, Debug)]
enum UserCommand {
    /// Add a user with an argon2id password (read from stdin with --password-stdin,
    /// otherwise generated and printed).
    Add(cmd_user::PasswordArgs),
    /// Set a user's password.
    Passwd(cmd_user::PasswordArgs),
    /// List users and their password schemes.
    List(ConfigArg),
}

fn main() -> ExitCode {
    maildex_index::keep_large_allocations_lazy();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(a) => cmd_serve::run(&a),
        Command::Deliver(a) => return cmd_deliver::run(&a),
        Command::Index(IndexCommand::Dump(a)) => cmd_index::dump(&a),
        Command::Index(IndexCommand::Rebuild(a)) => cmd_rebuild::rebuild(&a),
        Command::Index(IndexCommand::Check(a)) => cmd_index::check(&a),
        Command::Index(IndexCommand::Compact(a)) => cmd_index::compact(&a),
        Command::User(UserCommand::Add(a)) => cmd_user::add(&a),
        Command::User(UserCommand::Passwd(a)) => cmd_user::passwd(&a),
        Command::User(UserCommand::List(a)) => cmd_user::list(&a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("maildex: {}", common::error_text(&e));
            ExitCode::from(2)
        }
    }
}
