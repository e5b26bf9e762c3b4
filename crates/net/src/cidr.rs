//! A network as `ADDR/BITS` (CIDR, RFC 4632 §3.1): `allow_nets` of a user and
//! `proxy_trusted_networks` of a listener.

use std::net::IpAddr;

/// An address with a prefix length; a bare address is a host (/32 or /128).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    bits: u8,
}

impl Cidr {
    /// Parses `10.0.0.0/8`, `2001:db8::/32` or a bare address. The error names `item`.
    pub fn parse(item: &str) -> Result<Cidr, String> {
        let (addr, bits) = match item.split_once('/') {
            Some((a, b)) => (a, Some(b)),
            None => (item, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("{item:?} is not an address or network"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            None => max,
            Some(b) => b
                .parse::<u8>()
                .ok()
                .filter(|&b| b <= max)
                .ok_or_else(|| format!("bad prefix length in {item:?}"))?,
        };
        Ok(Cidr { addr, bits })
    }

    /// True if `ip` is in the network (an IPv4-mapped IPv6 address counts as the IPv4
    /// address, on either side).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (ip.to_canonical(), self.addr.to_canonical()) {
            (IpAddr::V4(p), IpAddr::V4(n)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.bits)).unwrap_or(0);
                u32::from(p) & mask == u32::from(n) & mask
            }
            (IpAddr::V6(p), IpAddr::V6(n)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.bits))
                    .unwrap_or(0);
                u128::from(p) & mask == u128::from(n) & mask
            }
            _ => false,
        }
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.bits)
    }
}
