//! Command line parsing (RFC 5321 §4.1.1, RFC 2033 §4.1, RFC 3030 §2).

use crate::address::{parse_path, Address};

/// One parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    /// `LHLO <client name>` (RFC 2033 §4.1).
    Lhlo(String),
    /// `HELO` / `EHLO`: refused in LMTP (RFC 2033 §4.1).
    HeloEhlo,
    /// `MAIL FROM:<path> [SIZE=n] [BODY=7BIT|8BITMIME]`.
    Mail {
        reverse_path: Option<Address>,
        size: Option<u64>,
        body_8bit: bool,
    },
    /// `RCPT TO:<path>`.
    Rcpt(Address),
    /// `DATA`.
    Data,
    /// `BDAT <size> [LAST]` (RFC 3030 §2).
    Bdat {
        size: u64,
        last: bool,
    },
    Rset,
    Noop,
    Quit,
    Vrfy,
    Help,
}

/// Why a command line was refused; each maps to one reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CommandError {
    /// Unknown verb: `500 5.5.2` (RFC 5321 §4.2.4).
    Unknown,
    /// Syntax error in the arguments: `501 5.5.4` with this text.
    Syntax(&'static str),
    /// Unknown or unsupported MAIL/RCPT parameter: `555 5.5.4`
    /// (RFC 5321 §4.1.1.11).
    UnknownParameter(String),
    /// `BDAT` without a readable size: the chunk length is unknown, so the
    /// stream cannot be followed any more (RFC 3030 §2).
    BdatSize,
}

/// Parses one command line, given without its line end.
pub(crate) fn parse(line: &[u8]) -> Result<Command, CommandError> {
    // Liberal: trailing blanks are ignored (Dovecot does the same).
    let line = trim_end(line);
    let (verb, args) = match line.iter().position(|&b| b == b' ') {
        Some(i) => (&line[..i], &line[i + 1..]),
        None => (line, &line[line.len()..]),
    };
    // RFC 5321 §2.4: verbs are case-insensitive.
    let verb = verb.to_ascii_uppercase();
    match verb.as_slice() {
        b"LHLO" => {
            let name = trim_start(args);
            if name.is_empty() {
                return Err(CommandError::Syntax("LHLO needs a host name"));
            }
            Ok(Command::Lhlo(String::from_utf8_lossy(name).into_owned()))
        }
        b"HELO" | b"EHLO" => Ok(Command::HeloEhlo),
        b"MAIL" => parse_mail(args),
        b"RCPT" => parse_rcpt(args),
        b"DATA" => no_args(args, Command::Data),
        b"BDAT" => parse_bdat(args),
        b"RSET" => no_args(args, Command::Rset),
        b"QUIT" => no_args(args, Command::Quit),
        // RFC 5321 §4.1.1.9: NOOP [ SP String ], the string is ignored.
        b"NOOP" => Ok(Command::Noop),
        b"VRFY" => Ok(Command::Vrfy),
        b"HELP" => Ok(Command::Help),
        _ => Err(CommandError::Unknown),
    }
}

fn trim_end(s: &[u8]) -> &[u8] {
    let end = s
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .map_or(0, |i| i + 1);
    &s[..end]
}

fn trim_start(s: &[u8]) -> &[u8] {
    let start = s
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(s.len());
    &s[start..]
}

fn no_args(args: &[u8], cmd: Command) -> Result<Command, CommandError> {
    if args.is_empty() {
        Ok(cmd)
    } else {
        Err(CommandError::Syntax("No parameters allowed"))
    }
}

/// Strips a case-insensitive keyword such as `FROM:`, then optional blanks
/// (liberal: RFC 5321 §4.1.1.2 has none, some clients send one).
fn keyword<'a>(args: &'a [u8], kw: &[u8]) -> Option<&'a [u8]> {
    if args.len() >= kw.len() && args[..kw.len()].eq_ignore_ascii_case(kw) {
        Some(trim_start(&args[kw.len()..]))
    } else {
        None
    }
}

/// Splits `SP`-separated `keyword[=value]` parameters (RFC 5321 §4.1.2
/// Mail-parameters), tolerating repeated blanks.
/// A parameter: upper-cased keyword and its value, if any.
type Param<'a> = (Vec<u8>, Option<&'a [u8]>);

fn params(rest: &[u8]) -> Result<Vec<Param<'_>>, CommandError> {
    if !rest.is_empty() && rest[0] != b' ' {
        return Err(CommandError::Syntax("Space expected after the address"));
    }
    Ok(rest
        .split(|&b| b == b' ')
        .filter(|p| !p.is_empty())
        .map(|p| match p.iter().position(|&b| b == b'=') {
            Some(i) => (p[..i].to_ascii_uppercase(), Some(&p[i + 1..])),
            None => (p.to_ascii_uppercase(), None),
        })
        .collect())
}

fn parse_mail(args: &[u8]) -> Result<Command, CommandError> {
    let Some(path) = keyword(args, b"FROM:") else {
        return Err(CommandError::Syntax("Syntax: MAIL FROM:<address>"));
    };
    let (reverse_path, rest) = parse_path(path, false).map_err(|e| CommandError::Syntax(e.0))?;
    let mut size = None;
    let mut body = None;
    for (name, value) in params(rest)? {
        match (name.as_slice(), value) {
            // RFC 1870 §3: SIZE=<decimal octets>, at most 20 digits.
            (b"SIZE", Some(v)) => {
                if size.is_some() {
                    return Err(CommandError::Syntax("Duplicate SIZE parameter"));
                }
                size = Some(parse_decimal(v).ok_or(CommandError::Syntax("Invalid SIZE value"))?);
            }
            // RFC 6152 §2: BODY=7BIT / BODY=8BITMIME.
            (b"BODY", Some(v)) => {
                if body.is_some() {
                    return Err(CommandError::Syntax("Duplicate BODY parameter"));
                }
                body = Some(if v.eq_ignore_ascii_case(b"8BITMIME") {
                    true
                } else if v.eq_ignore_ascii_case(b"7BIT") {
                    false
                } else {
                    return Err(CommandError::Syntax("Unsupported BODY type"));
                });
            }
            _ => {
                return Err(CommandError::UnknownParameter(
                    String::from_utf8_lossy(&name).into_owned(),
                ))
            }
        }
    }
    Ok(Command::Mail {
        reverse_path,
        size,
        body_8bit: body.unwrap_or(false),
    })
}

fn parse_rcpt(args: &[u8]) -> Result<Command, CommandError> {
    let Some(path) = keyword(args, b"TO:") else {
        return Err(CommandError::Syntax("Syntax: RCPT TO:<address>"));
    };
    let (addr, rest) = parse_path(path, true).map_err(|e| CommandError::Syntax(e.0))?;
    let Some(addr) = addr else {
        return Err(CommandError::Syntax("Null recipient not allowed"));
    };
    // No RCPT parameters are advertised (no DSN), RFC 5321 §4.1.1.11.
    if let Some((name, _)) = params(rest)?.into_iter().next() {
        return Err(CommandError::UnknownParameter(
            String::from_utf8_lossy(&name).into_owned(),
        ));
    }
    Ok(Command::Rcpt(addr))
}

/// RFC 3030 §2: `bdat-cmd = "BDAT" SP chunk-size [ SP end-marker ] CR LF`,
/// `chunk-size = 1*DIGIT`, `end-marker = "LAST"`.
fn parse_bdat(args: &[u8]) -> Result<Command, CommandError> {
    let mut parts = args.split(|&b| b == b' ').filter(|p| !p.is_empty());
    let size = parts
        .next()
        .and_then(parse_decimal)
        .ok_or(CommandError::BdatSize)?;
    let last = match parts.next() {
        None => false,
        Some(p) if p.eq_ignore_ascii_case(b"LAST") => true,
        Some(_) => return Err(CommandError::BdatSize),
    };
    if parts.next().is_some() {
        return Err(CommandError::BdatSize);
    }
    Ok(Command::Bdat { size, last })
}

/// 1*20DIGIT as u64 (RFC 1870 §3 caps SIZE at 20 digits); `None` on overflow.
fn parse_decimal(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 20 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mail_with_params_any_case() {
        let c = parse(b"mail from:<a@b.c> size=1234 Body=8bitmime  ").expect("mail");
        let Command::Mail {
            reverse_path,
            size,
            body_8bit,
        } = c
        else {
            panic!("not MAIL: {c:?}");
        };
        assert_eq!(
            reverse_path.map(|a| a.to_string()).as_deref(),
            Some("a@b.c")
        );
        assert_eq!(size, Some(1234));
        assert!(body_8bit);
        assert!(matches!(
            parse(b"MAIL FROM: <>"),
            Ok(Command::Mail {
                reverse_path: None,
                size: None,
                body_8bit: false
            })
        ));
    }

    #[test]
    fn mail_param_errors() {
        assert_eq!(
            parse(b"MAIL FROM:<a@b> RET=FULL"),
            Err(CommandError::UnknownParameter("RET".into()))
        );
        assert!(matches!(
            parse(b"MAIL FROM:<a@b> SIZE=x"),
            Err(CommandError::Syntax(_))
        ));
        assert!(matches!(
            parse(b"MAIL FROM:<a@b> SIZE=99999999999999999999999"),
            Err(CommandError::Syntax(_))
        ));
        assert!(matches!(
            parse(b"MAIL FROM:<a@b> SIZE=1 SIZE=2"),
            Err(CommandError::Syntax(_))
        ));
        assert!(matches!(
            parse(b"MAIL FROM:<a@b> BODY=BINARYMIME"),
            Err(CommandError::Syntax(_))
        ));
        assert!(matches!(
            parse(b"MAIL FROM:<a@b>SIZE=1"),
            Err(CommandError::Syntax(_))
        ));
        assert!(matches!(
            parse(b"MAIL TO:<a@b>"),
            Err(CommandError::Syntax(_))
        ));
    }

    #[test]
    fn rcpt() {
        assert!(matches!(parse(b"RCPT TO:<u@x>"), Ok(Command::Rcpt(_))));
        assert!(matches!(parse(b"RCPT TO:<>"), Err(CommandError::Syntax(_))));
        assert_eq!(
            parse(b"RCPT TO:<u@x> NOTIFY=NEVER"),
            Err(CommandError::UnknownParameter("NOTIFY".into()))
        );
    }

    #[test]
    fn bdat_forms() {
        assert_eq!(
            parse(b"BDAT 10"),
            Ok(Command::Bdat {
                size: 10,
                last: false
            })
        );
        assert_eq!(
            parse(b"bdat 0 last"),
            Ok(Command::Bdat {
                size: 0,
                last: true
            })
        );
        for bad in [
            &b"BDAT"[..],
            b"BDAT x",
            b"BDAT -1",
            b"BDAT 1 FIRST",
            b"BDAT 1 LAST x",
        ] {
            assert_eq!(parse(bad), Err(CommandError::BdatSize));
        }
    }

    #[test]
    fn simple_verbs() {
        assert_eq!(
            parse(b"LHLO  mx.example"),
            Ok(Command::Lhlo("mx.example".into()))
        );
        assert!(matches!(parse(b"LHLO"), Err(CommandError::Syntax(_))));
        assert_eq!(parse(b"EHLO x"), Ok(Command::HeloEhlo));
        assert_eq!(parse(b"NOOP whatever"), Ok(Command::Noop));
        assert!(matches!(parse(b"RSET now"), Err(CommandError::Syntax(_))));
        assert!(matches!(parse(b"DATA x"), Err(CommandError::Syntax(_))));
        assert_eq!(parse(b"quit"), Ok(Command::Quit));
        assert_eq!(parse(b"STARTTLS"), Err(CommandError::Unknown));
        assert_eq!(parse(b""), Err(CommandError::Unknown));
    }
}
