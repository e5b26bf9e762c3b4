//! Password schemes: parsing Dovecot's `{SCHEME}data` field, verifying and hashing.

use std::fmt;

use argon2::password_hash::{self, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use rand::RngCore;

use crate::AuthError;

/// Largest Argon2 memory cost (KiB) we agree to verify: 1 GiB. A typo such as
/// `m=655360000` in the users file would otherwise make every login try to allocate
/// hundreds of GiB and abort the daemon.
const MAX_ARGON2_M_COST_KIB: u32 = 1024 * 1024;

/// A password field from a passwd-file line: the scheme and the scheme's data.
///
/// Dovecot writes it as `{SCHEME}data`; a field without `{SCHEME}` uses Dovecot's
/// default scheme, CRYPT (see [`PasswordHash::parse`]). `Debug` hides `data`, which
/// is the password itself for PLAIN entries.
#[derive(Clone, PartialEq, Eq)]
pub struct PasswordHash {
    /// Upper-case scheme name without braces, e.g. `ARGON2ID`, `SHA512-CRYPT`, `CRYPT`.
    pub scheme: String,
    /// Everything after the closing brace (a PHC or crypt(3) string, or plain text).
    pub data: String,
}

impl fmt::Debug for PasswordHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PasswordHash")
            .field("scheme", &self.scheme)
            .field("data", &"<redacted>")
            .finish()
    }
}

impl fmt::Display for PasswordHash {
    /// The passwd-file form, `{SCHEME}data`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{}}}{}", self.scheme, self.data)
    }
}

impl PasswordHash {
    /// Parses the password field of a passwd-file line.
    ///
    /// Dovecot rules (doc "passwd-file", `passwd_file_add()` in db-passwd-file.c):
    /// - `{SCHEME}data`: the given scheme (names are case-insensitive);
    /// - `data[13]` / `data[NN]` (libpam-pwdfile style, not starting with `{` or `$`):
    ///   `[34]` means PLAIN-MD5, `[56]` DIGEST-MD5, anything else CRYPT;
    /// - anything else: the default scheme CRYPT, so a bare `$6$...`, `$2y$...` or
    ///   `$argon2id$...` string works.
    pub fn parse(field: &str) -> PasswordHash {
        if let Some(rest) = field.strip_prefix('{') {
            if let Some((scheme, data)) = rest.split_once('}') {
                return PasswordHash {
                    scheme: scheme.to_ascii_uppercase(),
                    data: data.to_owned(),
                };
            }
        }
        let b = field.as_bytes();
        let len = b.len();
        if len > 4
            && b[0] != b'{'
            && b[0] != b'$'
            && b[len - 1] == b']'
            && b[len - 4] == b'['
            && b[len - 3].is_ascii_digit()
            && b[len - 2].is_ascii_digit()
        {
            let scheme = match &field[len - 3..len - 1] {
                "34" => "PLAIN-MD5",
                "56" => "DIGEST-MD5",
                _ => "CRYPT",
            };
            return PasswordHash {
                scheme: scheme.to_owned(),
                data: field[..len - 4].to_owned(),
            };
        }
        PasswordHash {
            scheme: "CRYPT".to_owned(),
            data: field.to_owned(),
        }
    }

    /// True for schemes that store the password in clear or behind a fast, unsalted
    /// or cheaply salted digest (PLAIN, CLEAR, MD5, SHA*, SSHA*, DES/MD5 crypt, ...).
    /// The server warns about such entries at startup.
    pub fn is_weak(&self) -> bool {
        self.cost_rank() < 4
    }

    /// True for schemes that keep the password itself (PLAIN, CLEAR, CLEARTEXT).
    pub fn is_clear(&self) -> bool {
        matches!(self.scheme.as_str(), "PLAIN" | "CLEAR" | "CLEARTEXT")
    }

    /// True if [`verify`] can check this hash (the scheme is supported and, for
    /// CRYPT, the data is one of the supported crypt(3) formats). An empty password
    /// field is accepted: it never verifies.
    pub fn is_supported(&self) -> bool {
        self.data.is_empty() || self.kind().is_some()
    }

    /// How costly a check of this hash is, by scheme: 0 for clear text, 1 for a digest,
    /// 2 DES crypt, 3 MD5 crypt, 4 SHA-crypt, 5 bcrypt, 6 Argon2. Failed logins are made to
    /// cost what the most costly hash of the users file costs (see
    /// [`crate::UsersFile::timing_reference`]).
    pub fn cost_rank(&self) -> u8 {
        match self.kind() {
            Some(Kind::Clear) | None => 0,
            Some(Kind::Digest) => 1,
            Some(Kind::Crypt(CryptKind::Des)) => 2,
            Some(Kind::Crypt(CryptKind::Md5)) => 3,
            Some(Kind::Crypt(CryptKind::Sha512 | CryptKind::Sha256)) => 4,
            Some(Kind::Crypt(CryptKind::Bcrypt)) => 5,
            Some(Kind::Crypt(CryptKind::Argon2)) => 6,
        }
    }

    /// How this hash is checked; None for a scheme (or crypt data) we cannot check.
    fn kind(&self) -> Option<Kind> {
        let crypt = |want: CryptKind| {
            // the data must be the format the scheme names ({SHA512-CRYPT}$2y$... is not)
            (crypt_kind(&self.data) == Some(want)).then_some(Kind::Crypt(want))
        };
        match self.scheme.as_str() {
            "PLAIN" | "CLEAR" | "CLEARTEXT" => Some(Kind::Clear),
            "ARGON2ID" | "ARGON2I" => crypt(CryptKind::Argon2),
            "SHA512-CRYPT" => crypt(CryptKind::Sha512),
            "SHA256-CRYPT" => crypt(CryptKind::Sha256),
            "BLF-CRYPT" => crypt(CryptKind::Bcrypt),
            // Dovecot's MD5 is MD5-CRYPT
            "MD5-CRYPT" | "MD5" => crypt(CryptKind::Md5),
            "DES-CRYPT" => crypt(CryptKind::Des),
            "CRYPT" => crypt_kind(&self.data).map(Kind::Crypt),
            s if crate::digest::is_digest(s) => Some(Kind::Digest),
            _ => None,
        }
    }
}

/// The schemes whose data is one crypt(3) format.
const NAMED_CRYPT: &[&str] = &[
    "ARGON2ID",
    "ARGON2I",
    "SHA512-CRYPT",
    "SHA256-CRYPT",
    "BLF-CRYPT",
    "MD5-CRYPT",
    "MD5",
    "DES-CRYPT",
];

/// How a supported hash is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Clear,
    Digest,
    Crypt(CryptKind),
}

/// The modular crypt formats we verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CryptKind {
    Sha512,
    Sha256,
    Bcrypt,
    Argon2,
    /// `$1$`: MD5-crypt (Poul-Henning Kamp's, as glibc and Dovecot's MD5-CRYPT).
    Md5,
    /// Traditional crypt(3): two salt characters and eleven of hash.
    Des,
}

fn crypt_kind(data: &str) -> Option<CryptKind> {
    if data.starts_with("$6$") {
        Some(CryptKind::Sha512)
    } else if data.starts_with("$5$") {
        Some(CryptKind::Sha256)
    } else if data.starts_with("$2y$") || data.starts_with("$2b$") || data.starts_with("$2a$") {
        Some(CryptKind::Bcrypt)
    } else if data.starts_with("$argon2id$") || data.starts_with("$argon2i$") {
        Some(CryptKind::Argon2)
    } else if data.starts_with("$1$") {
        Some(CryptKind::Md5)
    } else if data.len() == 13
        && data
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'/')
    {
        Some(CryptKind::Des)
    } else {
        None
    }
}

/// Checks `password` against `hash`.
///
/// Returns `Ok(true)` on a match, `Ok(false)` on a mismatch, and an error when the
/// scheme is unknown ([`AuthError::UnsupportedScheme`]) or the data is malformed.
/// An empty `data` never matches (Dovecot refuses an empty password field unless the
/// entry says `nopassword`, which we do not support).
///
/// Supported: ARGON2ID and ARGON2I (PHC strings, either variant under either name,
/// as libsodium's verifier in Dovecot accepts both), SHA512-CRYPT (`$6$`),
/// SHA256-CRYPT (`$5$`), BLF-CRYPT (`$2y$`, `$2b$`, `$2a$`), MD5-CRYPT and MD5 (`$1$`),
/// DES-CRYPT, CRYPT when the data is one of those formats, the digests SHA, SHA256,
/// SHA512, SSHA, SSHA256, SSHA512, PLAIN-MD5, LDAP-MD5 and SMD5 (base64 or hex), and
/// PLAIN / CLEAR / CLEARTEXT (constant-time compare): Dovecot's common schemes.
///
/// The KDFs take tens of milliseconds by design: call this off the async reactor.
pub fn verify(hash: &PasswordHash, password: &[u8]) -> Result<bool, AuthError> {
    if hash.data.is_empty() {
        return Ok(false);
    }
    let scheme = hash.scheme.as_str();
    let kind = match hash.kind() {
        Some(Kind::Clear) => return Ok(ct_eq(hash.data.as_bytes(), password)),
        Some(Kind::Digest) => {
            return crate::digest::verify(scheme, &hash.data, password)
                .unwrap_or_else(|| Err(AuthError::UnsupportedScheme(scheme.to_owned())))
        }
        Some(Kind::Crypt(kind)) => kind,
        None if scheme == "CRYPT" || NAMED_CRYPT.contains(&scheme) => {
            return Err(malformed(
                scheme,
                "data is not in the crypt(3) format the scheme names",
            ))
        }
        None => return Err(AuthError::UnsupportedScheme(scheme.to_owned())),
    };
    match kind {
        CryptKind::Argon2 => verify_argon2(scheme, &hash.data, password),
        CryptKind::Sha512 | CryptKind::Sha256 => verify_sha_crypt(scheme, &hash.data, password),
        CryptKind::Bcrypt => match bcrypt::verify(password, &hash.data) {
            Ok(ok) => Ok(ok),
            Err(e) => Err(malformed(scheme, &e.to_string())),
        },
        // pwhash answers false for malformed data too
        CryptKind::Md5 => Ok(pwhash::md5_crypt::verify(password, &hash.data)),
        CryptKind::Des => Ok(pwhash::unix_crypt::verify(password, &hash.data)),
    }
}

fn malformed(scheme: &str, reason: &str) -> AuthError {
    AuthError::MalformedHash {
        scheme: scheme.to_owned(),
        reason: reason.to_owned(),
    }
}

fn verify_argon2(scheme: &str, data: &str, password: &[u8]) -> Result<bool, AuthError> {
    let phc =
        password_hash::PasswordHash::new(data).map_err(|e| malformed(scheme, &e.to_string()))?;
    if phc.salt.is_none() || phc.hash.is_none() {
        return Err(malformed(scheme, "missing salt or hash"));
    }
    let m_cost = phc
        .params
        .get_decimal("m")
        .ok_or_else(|| malformed(scheme, "missing m= parameter"))?;
    if m_cost > MAX_ARGON2_M_COST_KIB {
        return Err(malformed(scheme, "memory cost above 1 GiB"));
    }
    match Argon2::default().verify_password(password, &phc) {
        Ok(()) => Ok(true),
        Err(password_hash::Error::Password) => Ok(false),
        Err(e) => Err(malformed(scheme, &e.to_string())),
    }
}

/// SHA-crypt as specified by Ulrich Drepper (akkadia.org/drepper/SHA-crypt.txt):
/// `$5$` / `$6$`, optional `rounds=N$` (clamped to 1000..=999999999 as the spec
/// says), a salt of at most 16 bytes (longer salts are truncated), then the hash.
fn verify_sha_crypt(scheme: &str, data: &str, password: &[u8]) -> Result<bool, AuthError> {
    let mut parts = data.split('$');
    let (Some(""), Some(id), Some(mut salt)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(malformed(scheme, "expected $id$salt$hash"));
    };
    let mut rounds = sha_crypt::ROUNDS_DEFAULT;
    if let Some(n) = salt.strip_prefix("rounds=") {
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            return Err(malformed(scheme, "rounds= is not a number"));
        }
        // All digits: overflow is the only parse failure, and it means "too many".
        rounds = n.parse::<usize>().unwrap_or(sha_crypt::ROUNDS_MAX);
        rounds = rounds.clamp(sha_crypt::ROUNDS_MIN, sha_crypt::ROUNDS_MAX);
        salt = parts
            .next()
            .ok_or_else(|| malformed(scheme, "missing salt after rounds="))?;
    }
    let (Some(expected), None) = (parts.next(), parts.next()) else {
        return Err(malformed(scheme, "expected $id$salt$hash"));
    };
    let computed = if id == "6" {
        let params = sha_crypt::Sha512Params::new(rounds)
            .map_err(|e| malformed(scheme, &format!("{e:?}")))?;
        sha_crypt::sha512_crypt_b64(password, salt.as_bytes(), &params)
    } else {
        let params = sha_crypt::Sha256Params::new(rounds)
            .map_err(|e| malformed(scheme, &format!("{e:?}")))?;
        sha_crypt::sha256_crypt_b64(password, salt.as_bytes(), &params)
    }
    .map_err(|e| malformed(scheme, &format!("{e:?}")))?;
    Ok(ct_eq(computed.as_bytes(), expected.as_bytes()))
}

/// Compares two byte strings in time that depends only on their lengths.
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// An Argon2id hash with [`hash_password`]'s parameters (of "x y z"; the result of
/// checking against it is thrown away, so the password does not matter).
const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$uelhdeqBpYGXOMZn7CK3Bg$Rzi1lhBatRbZTypbONAr/9Yx5wxbEuNpCZvbsnmiIRc";

/// Spends about the time of a [`verify`] against `reference` (the users file's most
/// costly hash, [`crate::UsersFile::timing_reference`]; without one, a hash of
/// [`hash_password`]'s parameters), and returns false. Call it when the login names no
/// user, and after a wrong password checked against a cheaper hash than `reference`, so
/// the answer time does not tell an attacker which user names exist.
pub fn verify_unknown_user(reference: Option<&PasswordHash>, password: &[u8]) -> bool {
    let dummy;
    let hash = match reference {
        Some(h) => h,
        None => {
            dummy = PasswordHash {
                scheme: "ARGON2ID".to_owned(),
                data: DUMMY_HASH.to_owned(),
            };
            &dummy
        }
    };
    let _ = std::hint::black_box(verify(hash, password));
    false
}

/// Hashes `password` for storage as `{ARGON2ID}$argon2id$v=19$m=19456,t=2,p=1$...`.
///
/// Parameters are the argon2 crate's defaults, which are OWASP's first recommended
/// Argon2id configuration (Password Storage Cheat Sheet: m=19 MiB, t=2, p=1): about
/// 20 ms and 19 MiB per login, so a few concurrent logins behind the server's KDF
/// semaphore stay cheap. Dovecot's `doveadm pw -s ARGON2ID` uses m=64 MiB, t=3;
/// both verify everywhere since the parameters travel in the PHC string. The salt is
/// 16 random bytes from the OS.
pub fn hash_password(password: &[u8]) -> Result<PasswordHash, AuthError> {
    let mut salt = [0u8; 16];
    rand::rngs::OsRng
        .try_fill_bytes(&mut salt)
        .map_err(|e| AuthError::Hash(format!("no OS randomness: {e}")))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| AuthError::Hash(e.to_string()))?;
    let phc = Argon2::default()
        .hash_password(password, &salt)
        .map_err(|e| AuthError::Hash(e.to_string()))?;
    Ok(PasswordHash {
        scheme: "ARGON2ID".to_owned(),
        data: phc.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_forms() {
        let h = PasswordHash::parse("{sha512-crypt}$6$x$y");
        assert_eq!(
            (h.scheme.as_str(), h.data.as_str()),
            ("SHA512-CRYPT", "$6$x$y")
        );
        let h = PasswordHash::parse("$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaA");
        assert_eq!(h.scheme, "CRYPT");
        let h = PasswordHash::parse("abcdef[34]");
        assert_eq!(
            (h.scheme.as_str(), h.data.as_str()),
            ("PLAIN-MD5", "abcdef")
        );
        let h = PasswordHash::parse("abcdef[13]");
        assert_eq!((h.scheme.as_str(), h.data.as_str()), ("CRYPT", "abcdef"));
        // A '$' string ending in [NN] is not the libpam form.
        let h = PasswordHash::parse("$6$ab[13]");
        assert_eq!(h.data, "$6$ab[13]");
        // No closing brace: the whole field is CRYPT data, as in Dovecot.
        let h = PasswordHash::parse("{PLAIN");
        assert_eq!((h.scheme.as_str(), h.data.as_str()), ("CRYPT", "{PLAIN"));
    }

    #[test]
    fn display_round_trips_braced_form() {
        let s = "{BLF-CRYPT}$2y$05$abc";
        assert_eq!(PasswordHash::parse(s).to_string(), s);
    }

    #[test]
    fn debug_hides_data() {
        let h = PasswordHash::parse("{PLAIN}hunter2");
        assert!(!format!("{h:?}").contains("hunter2"));
    }

    #[test]
    fn ct_eq_works() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"ab"));
        assert!(ct_eq(b"", b""));
    }

    #[test]
    fn weak_and_supported() {
        for (field, weak, supported) in [
            ("{PLAIN}x", true, true),
            ("{CLEAR}x", true, true),
            ("{SSHA512}x", true, true),
            ("{PLAIN-MD5}x", true, true),
            ("{MD5-CRYPT}$1$x", true, true),
            ("{CRYPT}abDES12345678", true, true),
            ("{CRYPT}$7$x", true, false),
            ("{MD5-CRYPT}$6$x", true, false),
            ("{CRYPT}$6$a$b", false, true),
            ("{ARGON2ID}$argon2id$x", false, true),
            ("{BLF-CRYPT}$2y$x", false, true),
            ("{PBKDF2}x", true, false),
        ] {
            let h = PasswordHash::parse(field);
            assert_eq!(h.is_weak(), weak, "{field} weak");
            assert_eq!(h.is_supported(), supported, "{field} supported");
        }
    }
}
