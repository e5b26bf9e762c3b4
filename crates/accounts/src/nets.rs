//! `allow_nets` (a Dovecot passdb extra field): the networks a user may log in from.

use std::net::IpAddr;

use maildex_net::Cidr;

/// One entry of `allow_nets`: an address with a prefix length, or `local`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Net {
    /// `ADDR/BITS` (a bare address is a host: /32 or /128).
    Prefix(Cidr),
    /// `local`: a connection without a remote address (Dovecot: a UNIX socket). No IMAP
    /// connection of ours is one, so it admits nothing here.
    Local,
}

/// The parsed `allow_nets=` value of a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AllowNets(Vec<Net>);

impl AllowNets {
    /// Parses Dovecot's comma- (or space-) separated list, e.g. `10.0.0.0/8,::1,local`.
    pub(crate) fn parse(value: &str) -> Result<AllowNets, String> {
        let mut nets = Vec::new();
        for item in value.split([',', ' ']).filter(|s| !s.is_empty()) {
            if item == "local" {
                nets.push(Net::Local);
                continue;
            }
            let net = Cidr::parse(item).map_err(|e| format!("allow_nets: {e}"))?;
            nets.push(Net::Prefix(net));
        }
        if nets.is_empty() {
            return Err("allow_nets: empty list".into());
        }
        Ok(AllowNets(nets))
    }

    /// True if a client at `peer` may log in (an IPv4-mapped IPv6 address counts as
    /// the IPv4 address).
    pub(crate) fn allows(&self, peer: IpAddr) -> bool {
        let peer = peer.to_canonical();
        self.0.iter().any(|net| match *net {
            Net::Local => false,
            Net::Prefix(net) => net.contains(peer),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_hosts_and_local() {
        let nets = AllowNets::parse("10.0.0.0/8,192.0.2.7 2001:db8::/32,local").unwrap();
        for (ip, ok) in [
            ("10.1.2.3", true),
            ("11.0.0.1", false),
            ("192.0.2.7", true),
            ("192.0.2.8", false),
            ("::ffff:10.9.9.9", true),
            ("2001:db8:1::5", true),
            ("2001:db9::5", false),
            ("127.0.0.1", false),
        ] {
            assert_eq!(nets.allows(ip.parse().unwrap()), ok, "{ip}");
        }
        assert!(AllowNets::parse("0.0.0.0/0")
            .unwrap()
            .allows("8.8.8.8".parse().unwrap()));
        for bad in ["", "10.0.0.0/33", "::/129", "example.org", "10.0.0.0/x"] {
            assert!(AllowNets::parse(bad).is_err(), "{bad:?}");
        }
    }
}
