//! postfix's socketmap table protocol (socketmap_table(5)): the client sends a netstring
//! `<length>:<name> <key>,` (length in decimal, D. J. Bernstein's netstrings), the server
//! answers one netstring: `OK <value>`, `NOTFOUND ` (with the space), `TEMP <reason>`,
//! `TIMEOUT <reason>` or `PERM <reason>`. One connection carries any number of requests.

/// Longest request payload accepted (`name key`); postfix's keys are addresses, which
/// SMTP bounds at 256 octets (RFC 5321 §4.5.3.1.3). A longer one ends the connection.
pub const MAX_REQUEST: usize = 4096;

/// Longest answer payload (postfix's `socketmap_max_reply_size` defaults to 100000).
pub const MAX_ANSWER: usize = 100_000;

/// A malformed request: the connection is closed (netstrings cannot resynchronise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// The length is not decimal digits followed by `:`.
    BadLength,
    /// The length is over the limit.
    TooLong,
    /// The payload is not followed by `,`.
    NoComma,
    /// The payload has no space between name and key.
    NoKey,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FrameError::BadLength => "bad netstring length",
            FrameError::TooLong => "request too long",
            FrameError::NoComma => "netstring without its comma",
            FrameError::NoKey => "request without a key",
        })
    }
}

/// One request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request<'a> {
    /// The map name (what follows the last `:` of `socketmap:...:name` in postfix).
    pub name: &'a [u8],
    /// The key (an address, a domain, `@domain`).
    pub key: &'a [u8],
}

/// Parses the first request in `buf`: `Ok(None)` while it is incomplete, else the request
/// and the bytes it took.
pub fn parse(buf: &[u8]) -> Result<Option<(Request<'_>, usize)>, FrameError> {
    let digits = buf.iter().take_while(|b| b.is_ascii_digit()).count();
    // more digits than MAX_REQUEST has can only be too long
    let max_digits = MAX_REQUEST.to_string().len();
    if digits > max_digits || (digits > 1 && buf[0] == b'0') {
        return Err(if digits > max_digits {
            FrameError::TooLong
        } else {
            FrameError::BadLength
        });
    }
    if digits == buf.len() {
        return Ok(None);
    }
    if digits == 0 || buf[digits] != b':' {
        return Err(FrameError::BadLength);
    }
    let len: usize = std::str::from_utf8(&buf[..digits])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(FrameError::BadLength)?;
    if len > MAX_REQUEST {
        return Err(FrameError::TooLong);
    }
    let start = digits + 1;
    let end = start + len;
    if buf.len() <= end {
        return Ok(None);
    }
    if buf[end] != b',' {
        return Err(FrameError::NoComma);
    }
    let payload = &buf[start..end];
    let space = memchr::memchr(b' ', payload).ok_or(FrameError::NoKey)?;
    Ok(Some((
        Request {
            name: &payload[..space],
            key: &payload[space + 1..],
        },
        end + 1,
    )))
}

/// An answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Found, with its value.
    Ok(String),
    /// Not found.
    NotFound,
    /// A temporary failure (postfix defers: SMTP `451 4.3.0`).
    Temp(String),
    /// A permanent failure (a configuration error).
    Perm(String),
}

impl Answer {
    /// The answer as a netstring. A value over [`MAX_ANSWER`] becomes a `PERM`.
    pub fn encode(&self) -> Vec<u8> {
        let payload = match self {
            Answer::Ok(v) if v.len() + 3 > MAX_ANSWER => "PERM answer too long".to_owned(),
            Answer::Ok(v) => format!("OK {v}"),
            Answer::NotFound => "NOTFOUND ".to_owned(),
            Answer::Temp(r) => format!("TEMP {r}"),
            Answer::Perm(r) => format!("PERM {r}"),
        };
        netstring(payload.as_bytes())
    }
}

/// `payload` as a netstring.
pub fn netstring(payload: &[u8]) -> Vec<u8> {
    let mut out = format!("{}:", payload.len()).into_bytes();
    out.extend_from_slice(payload);
    out.push(b',');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn requests_as_postfix_sends_them() {
        let buf = b"25:mailbox alice@example.org,23:alias x@example.org";
        let (r, n) = parse(buf).unwrap().unwrap();
        assert_eq!(
            (r.name, r.key),
            (&b"mailbox"[..], &b"alice@example.org"[..])
        );
        assert_eq!(n, 29);
        // the second is still incomplete, at every cut
        for cut in n..buf.len() {
            assert_eq!(parse(&buf[n..cut]), Ok(None), "{cut}");
        }
        let frame = netstring(b"alias x@example.org y");
        let (r, _) = parse(&frame).unwrap().unwrap();
        assert_eq!(r.key, b"x@example.org y");
    }

    #[test]
    fn malformed_requests() {
        assert_eq!(parse(b"x:"), Err(FrameError::BadLength));
        assert_eq!(parse(b"5x"), Err(FrameError::BadLength));
        assert_eq!(parse(b"05:a b c,"), Err(FrameError::BadLength));
        assert_eq!(parse(b"99999999"), Err(FrameError::TooLong));
        assert_eq!(parse(b"5000:"), Err(FrameError::TooLong));
        assert_eq!(parse(b"3:a b;"), Err(FrameError::NoComma));
        assert_eq!(parse(b"3:abc,"), Err(FrameError::NoKey));
        assert_eq!(parse(b""), Ok(None));
    }

    #[test]
    fn answers() {
        assert_eq!(Answer::Ok("alice".into()).encode(), b"8:OK alice,");
        assert_eq!(Answer::NotFound.encode(), b"9:NOTFOUND ,");
        assert_eq!(Answer::Temp("down".into()).encode(), b"9:TEMP down,");
        assert_eq!(Answer::Perm("bad".into()).encode(), b"8:PERM bad,");
        assert!(Answer::Ok("x".repeat(MAX_ANSWER))
            .encode()
            .ends_with(b"PERM answer too long,"));
    }

    proptest! {
        #[test]
        fn any_bytes_parse_without_panic(buf in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(Some((_, n))) = parse(&buf) {
                prop_assert!(n <= buf.len());
            }
        }

        #[test]
        fn encoded_requests_round_trip(name in "[a-z]{1,10}", key in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut payload = name.as_bytes().to_vec();
            payload.push(b' ');
            payload.extend_from_slice(&key);
            let frame = netstring(&payload);
            let (r, n) = parse(&frame).unwrap().unwrap();
            prop_assert_eq!(n, frame.len());
            prop_assert_eq!(r.name, name.as_bytes());
            prop_assert_eq!(r.key, &key[..]);
        }
    }
}
