//! A minimal LMTP client (RFC 2033): one session, transactions of one message to one or
//! more recipients, one reply per accepted recipient after the final dot.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{bail, Context, Result};

/// One LMTP session.
pub struct Lmtp {
    w: TcpStream,
    r: BufReader<TcpStream>,
    wire: Vec<u8>,
}

/// Converts a message with LF (or CRLF) line ends to the DATA wire form: CRLF line ends,
/// a dot doubled at the start of a line (RFC 5321 §4.5.2), ending `CRLF.CRLF`.
pub fn dot_stuff(msg: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(msg.len() + msg.len() / 20 + 8);
    for line in msg.split_inclusive(|&b| b == b'\n') {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        if body.first() == Some(&b'.') {
            out.push(b'.');
        }
        out.extend_from_slice(body);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b".\r\n");
}

impl Lmtp {
    /// Connects, reads the greeting and sends LHLO.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<Lmtp> {
        let s = TcpStream::connect_timeout(&addr, timeout)
            .with_context(|| format!("connecting to LMTP at {addr}"))?;
        s.set_read_timeout(Some(timeout))?;
        s.set_nodelay(true)?;
        let mut c = Lmtp {
            r: BufReader::new(s.try_clone()?),
            w: s,
            wire: Vec::new(),
        };
        c.expect("greeting", '2')?;
        c.w.write_all(b"LHLO bench.example.org\r\n")?;
        c.expect("LHLO", '2')?;
        Ok(c)
    }

    /// Reads one (possibly multi-line) reply; fails unless its code starts with `class`.
    fn expect(&mut self, what: &str, class: char) -> Result<String> {
        loop {
            let mut line = String::new();
            if self.r.read_line(&mut line)? == 0 {
                bail!("LMTP server closed the connection after {what}");
            }
            // RFC 5321 §4.2: "250-" continues, "250 " ends.
            if line.as_bytes().get(3) == Some(&b'-') {
                continue;
            }
            if !line.starts_with(class) {
                bail!("LMTP {what}: {}", line.trim_end());
            }
            return Ok(line);
        }
    }

    /// Delivers `msg` (LF line ends) from `from` to `rcpts`; every recipient must get 2xx.
    pub fn deliver(&mut self, from: &str, rcpts: &[String], msg: &[u8]) -> Result<()> {
        let mut wire = std::mem::take(&mut self.wire);
        dot_stuff(msg, &mut wire);
        let sent = self.deliver_wire(from, rcpts, &wire);
        self.wire = wire;
        sent
    }

    /// [`Lmtp::deliver`] of a message already in its DATA wire form ([`dot_stuff`]), as an
    /// MTA keeps it in its queue file.
    pub fn deliver_wire(&mut self, from: &str, rcpts: &[String], wire: &[u8]) -> Result<()> {
        let mut head = format!("MAIL FROM:<{from}>\r\n");
        for r in rcpts {
            head.push_str(&format!("RCPT TO:<{r}>\r\n"));
        }
        head.push_str("DATA\r\n");
        // Pipelined (RFC 2920, which LMTP servers announce): replies come in order.
        self.w.write_all(head.as_bytes())?;
        self.expect("MAIL FROM", '2')?;
        for r in rcpts {
            self.expect(&format!("RCPT TO:<{r}>"), '2')?;
        }
        self.expect("DATA", '3')?;
        self.w.write_all(wire)?;
        for r in rcpts {
            self.expect(&format!("end of data for {r}"), '2')?;
        }
        Ok(())
    }

    /// Sends QUIT (the reply is not awaited beyond a short read).
    pub fn quit(mut self) {
        let _ = self.w.write_all(b"QUIT\r\n");
        let _ = self.expect("QUIT", '2');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_stuffing_and_line_ends() {
        let mut out = Vec::new();
        dot_stuff(b"a\n.b\r\n..\nlast", &mut out);
        assert_eq!(out, b"a\r\n..b\r\n...\r\nlast\r\n.\r\n");
        dot_stuff(b"", &mut out);
        assert_eq!(out, b".\r\n");
    }
}
