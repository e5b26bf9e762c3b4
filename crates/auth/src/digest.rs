//! Dovecot's digest schemes (doc "Password schemes"): SHA, SHA256, SHA512 and their
//! salted forms SSHA, SSHA256, SSHA512, PLAIN-MD5, LDAP-MD5 and SMD5. The data is the
//! digest (salted: the digest of `password || salt`, then the salt) in base64 or hex;
//! as Dovecot does, either encoding is accepted when its length fits, and a `.HEX` /
//! `.B64` suffix on the scheme forces one.

use base64::Engine;
use md5::Md5;
use sha1::Sha1;
use sha2::{Sha256, Sha512};

use crate::AuthError;

/// The hash function of a digest scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algo {
    Md5,
    Sha1,
    Sha256,
    Sha512,
}

impl Algo {
    fn len(self) -> usize {
        match self {
            Algo::Md5 => 16,
            Algo::Sha1 => 20,
            Algo::Sha256 => 32,
            Algo::Sha512 => 64,
        }
    }

    fn digest(self, password: &[u8], salt: &[u8]) -> Vec<u8> {
        fn run<D: sha2::Digest>(password: &[u8], salt: &[u8]) -> Vec<u8> {
            let mut d = D::new();
            d.update(password);
            d.update(salt);
            d.finalize().to_vec()
        }
        match self {
            Algo::Md5 => run::<Md5>(password, salt),
            Algo::Sha1 => run::<Sha1>(password, salt),
            Algo::Sha256 => run::<Sha256>(password, salt),
            Algo::Sha512 => run::<Sha512>(password, salt),
        }
    }
}

/// (hash, salted, hex by default) of a digest scheme name without its suffix.
fn scheme(base: &str) -> Option<(Algo, bool, bool)> {
    Some(match base {
        "SHA" | "SHA1" => (Algo::Sha1, false, false),
        "SHA256" => (Algo::Sha256, false, false),
        "SHA512" => (Algo::Sha512, false, false),
        "SSHA" => (Algo::Sha1, true, false),
        "SSHA256" => (Algo::Sha256, true, false),
        "SSHA512" => (Algo::Sha512, true, false),
        "PLAIN-MD5" => (Algo::Md5, false, true),
        "LDAP-MD5" => (Algo::Md5, false, false),
        "SMD5" => (Algo::Md5, true, false),
        _ => return None,
    })
}

/// True if `scheme` (as written, with any `.HEX` / `.B64` suffix) is a digest scheme.
pub(crate) fn is_digest(scheme: &str) -> bool {
    split(scheme).is_some_and(|(base, _)| self::scheme(base).is_some())
}

/// `SCHEME[.ENCODING]` -> (SCHEME, forced hex?); None for an unknown suffix.
fn split(scheme: &str) -> Option<(&str, Option<bool>)> {
    match scheme.split_once('.') {
        None => Some((scheme, None)),
        Some((base, "HEX")) => Some((base, Some(true))),
        Some((base, "B64" | "BASE64")) => Some((base, Some(false))),
        Some(_) => None,
    }
}

/// Checks `password` against the digest scheme's `data`; None if `scheme` is not one.
pub(crate) fn verify(scheme: &str, data: &str, password: &[u8]) -> Option<Result<bool, AuthError>> {
    let (base, forced) = split(scheme)?;
    let (algo, salted, hex_default) = self::scheme(base)?;
    let malformed = |reason: &str| AuthError::MalformedHash {
        scheme: scheme.to_owned(),
        reason: reason.to_owned(),
    };
    let hex_fits = data.len() % 2 == 0
        && data.bytes().all(|b| b.is_ascii_hexdigit())
        && (salted || data.len() == algo.len() * 2);
    let as_hex = forced.unwrap_or(hex_default || hex_fits) && hex_fits;
    let raw = if as_hex {
        decode_hex(data)
    } else if forced == Some(true) {
        return Some(Err(malformed("not hex")));
    } else {
        match base64::engine::general_purpose::STANDARD.decode(data) {
            Ok(raw) => raw,
            Err(_) => return Some(Err(malformed("neither base64 nor hex"))),
        }
    };
    let fits = if salted {
        raw.len() > algo.len()
    } else {
        raw.len() == algo.len()
    };
    if !fits {
        return Some(Err(malformed("wrong length for the digest")));
    }
    let (expected, salt) = raw.split_at(algo.len());
    Some(Ok(crate::hash::ct_eq(
        &algo.digest(password, salt),
        expected,
    )))
}

fn decode_hex(data: &str) -> Vec<u8> {
    data.as_bytes()
        .chunks(2)
        .map(|p| {
            let n = |b: u8| (b as char).to_digit(16).unwrap_or(0) as u8;
            n(p[0]) << 4 | n(p[1])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    /// What slapd's `slappasswd` (OpenLDAP 2.5) writes by default, and with `-h {SHA}`:
    /// `slappasswd -s alice-secret`. LDAP directories hold userPassword in these forms.
    #[test]
    fn slappasswd_output_verifies() {
        for (field, ok) in [
            ("{SSHA}4V+s58rqDo0SlsSYg8z8+qvvZe0ii5zy", true),
            ("{SHA}KusvaLb24DJ0ziPMVrqjntyCRkM=", true),
            ("{ssha}4V+s58rqDo0SlsSYg8z8+qvvZe0ii5zy", true),
            ("{SSHA}4V+s58rqDo0SlsSYg8z8+qvvZe0ii5zz", false),
        ] {
            let h = crate::PasswordHash::parse(field);
            assert_eq!(crate::verify(&h, b"alice-secret").unwrap(), ok, "{field}");
            assert!(!crate::verify(&h, b"alice-secreT").unwrap(), "{field}");
        }
    }
}
