//! `maildex-corpus --out DIR --users N --messages N --seed S [--scale F] [--no-folders]`:
//! writes a deterministic Maildir corpus (layout in the maildex-corpus crate docs) and
//! prints its statistics.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use maildex_corpus::{generate, Spec};

const USAGE: &str = "usage: maildex-corpus --out DIR [--users N] [--messages N] [--seed S] [--scale F] [--no-folders]

Writes DIR/example.org/userNNNN/Maildir for each user (mail_location = maildir:DIR/%d/%n/Maildir).
  --users N      number of users (default 10)
  --messages N   messages per user (default 1000)
  --seed S       random seed; the same arguments give a byte-identical corpus (default 1)
  --scale F      size multiplier, 1.0 = realistic sizes (default 1.0)
  --no-folders   put all mail in INBOX instead of Sent, Archive, Lists.* ...";

fn parse(args: &[String]) -> Result<(Spec, PathBuf), String> {
    let mut spec = Spec::default();
    let mut out = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match arg.as_str() {
            "--out" => out = Some(PathBuf::from(value("--out")?)),
            "--users" => {
                spec.users = value("--users")?
                    .parse()
                    .map_err(|e| format!("--users: {e}"))?
            }
            "--messages" => {
                spec.messages_per_user = value("--messages")?
                    .parse()
                    .map_err(|e| format!("--messages: {e}"))?
            }
            "--seed" => {
                spec.seed = value("--seed")?
                    .parse()
                    .map_err(|e| format!("--seed: {e}"))?
            }
            "--scale" => {
                spec.size_scale = value("--scale")?
                    .parse()
                    .map_err(|e| format!("--scale: {e}"))?
            }
            "--no-folders" => spec.folders = false,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let out = out.ok_or_else(|| "--out is required".to_owned())?;
    Ok((spec, out))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (spec, out) = match parse(&args) {
        Ok(v) => v,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("maildex-corpus: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let start = Instant::now();
    match generate(&spec, &out) {
        Ok(stats) => {
            print!("{stats}");
            println!(
                "seed:      {}\nscale:     {}\nelapsed:   {:.2?}",
                spec.seed,
                spec.size_scale,
                start.elapsed()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("maildex-corpus: {e}");
            ExitCode::FAILURE
        }
    }
}
