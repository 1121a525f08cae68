//! Secrets the server keeps, and how.
//!
//! - Room passwords are chosen by people, so they may be guessable, and they are stored on disk
//!   (see [`crate::store`]). They are kept as an Argon2id PHC string (RFC 9106) with a random
//!   16-byte salt and OWASP's smallest recommended parameters: m = 19 MiB, t = 2, p = 1 (about
//!   35–45 ms on one core of a busy 2-core machine, 30 ms for the reference implementation on
//!   the same). Hashing is slow on purpose: callers run
//!   [`hash_password`] and [`verify_password`] on a blocking thread, outside the rooms' lock,
//!   and only after the password-failure limiter ([`crate::attempts`]) said yes.
//! - Owner secrets, peer tokens and private room keys are random with at least 128 bits, so a
//!   fast hash is enough: they are kept as SHA-256 ([`digest`]) and compared in constant time
//!   ([`digest_eq`]).

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Argon2id memory cost, in KiB.
pub const ARGON2_MEMORY_KIB: u32 = 19 * 1024;
/// Argon2id passes over the memory.
pub const ARGON2_ITERATIONS: u32 = 2;
/// Argon2id lanes.
pub const ARGON2_LANES: u32 = 1;
/// Stored hashes asking for more than this much memory or time are refused rather than
/// computed: the parameters come from the database, which must not be able to make the server
/// allocate gigabytes.
const MAX_MEMORY_KIB: u32 = 4 * ARGON2_MEMORY_KIB;
const MAX_ITERATIONS: u32 = 4 * ARGON2_ITERATIONS;

/// A SHA-256 digest of a secret.
pub type Digest32 = [u8; 32];

/// Why a password could not be hashed.
#[derive(Debug)]
pub enum HashError {
    /// The OS has no randomness for the salt.
    Random(getrandom::Error),
    /// Argon2 refused (it cannot for a password of at most 128 bytes and these parameters).
    Argon2(String),
}

impl std::fmt::Display for HashError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HashError::Random(e) => write!(f, "no randomness for a salt: {e}"),
            HashError::Argon2(e) => write!(f, "argon2: {e}"),
        }
    }
}

fn argon2() -> Argon2<'static> {
    let params = Params::new(ARGON2_MEMORY_KIB, ARGON2_ITERATIONS, ARGON2_LANES, None)
        .expect("the constant Argon2 parameters are within Argon2's limits");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// Hashes `password` with a fresh random salt into a PHC string
/// (`$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>`). Slow: call it on a blocking thread.
pub fn hash_password(password: &str) -> Result<String, HashError> {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(HashError::Random)?;
    hash_with_salt(password, &salt)
}

fn hash_with_salt(password: &str, salt: &[u8]) -> Result<String, HashError> {
    let salt = SaltString::encode_b64(salt).map_err(|e| HashError::Argon2(e.to_string()))?;
    argon2()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| HashError::Argon2(e.to_string()))
}

/// Whether `password` is the one `phc` was made from. A malformed PHC string, another
/// algorithm or parameters above the server's limits match nothing. Slow: call it on a
/// blocking thread.
pub fn verify_password(phc: &str, password: &str) -> bool {
    let Ok(parsed) = PasswordHash::new(phc) else {
        return false;
    };
    if parsed.algorithm != Algorithm::Argon2id.ident() {
        return false;
    }
    let Ok(params) = Params::try_from(&parsed) else {
        return false;
    };
    if params.m_cost() > MAX_MEMORY_KIB || params.t_cost() > MAX_ITERATIONS {
        return false;
    }
    argon2()
        .verify_password(password.as_bytes(), &parsed)
        .is_ok()
}

/// SHA-256 of a high-entropy secret (owner secret, peer token, private room key).
pub fn digest(secret: &str) -> Digest32 {
    Sha256::digest(secret.as_bytes()).into()
}

/// Constant-time equality of two digests.
pub fn digest_eq(a: &Digest32, b: &Digest32) -> bool {
    a.ct_eq(b).into()
}

/// A new random secret: 32 lowercase hex chars (128 bits). Fails only if the OS has no
/// randomness.
pub fn random_hex_id() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Made independently with the reference implementation's command-line tool:
    /// `echo -n "open sesame" | argon2 tutti-salt-16byt -id -k 19456 -t 2 -p 1 -l 32 -e`.
    const KNOWN_PHC: &str = "$argon2id$v=19$m=19456,t=2,p=1$dHV0dGktc2FsdC0xNmJ5dA$\
                             Mb8ahP763K2AYhKqGkSNxsThuRiGbqR7ipKeGV+Gwtc";

    #[test]
    fn known_answer() {
        let Ok(phc) = hash_with_salt("open sesame", b"tutti-salt-16byt") else {
            panic!("hashing failed")
        };
        assert_eq!(phc, KNOWN_PHC);
        assert!(verify_password(KNOWN_PHC, "open sesame"));
        assert!(!verify_password(KNOWN_PHC, "open sesamE"));
    }

    #[test]
    fn matches_only_the_same_password_and_salts_differ() {
        let (Ok(a), Ok(b)) = (hash_password("pw"), hash_password("pw")) else {
            panic!("hashing failed")
        };
        assert_ne!(a, b, "each hash has its own salt");
        assert!(a.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{a}");
        for phc in [&a, &b] {
            assert!(verify_password(phc, "pw"));
            assert!(!verify_password(phc, "pW"));
            assert!(!verify_password(phc, ""));
            assert!(!verify_password(phc, "pw "));
        }
    }

    #[test]
    fn malformed_or_costly_stored_hashes_match_nothing() {
        for bad in [
            "",
            "pw",
            "$argon2id$",
            "$argon2i$v=19$m=19456,t=2,p=1$dHV0dGktc2FsdC0xNmJ5dA$Mb8ahP763K2AYhKqGkSNxsThuRiGbqR7ipKeGV+Gwtc",
            "$argon2id$v=19$m=4000000,t=2,p=1$dHV0dGktc2FsdC0xNmJ5dA$Mb8ahP763K2AYhKqGkSNxsThuRiGbqR7ipKeGV+Gwtc",
            "$argon2id$v=19$m=19456,t=1000,p=1$dHV0dGktc2FsdC0xNmJ5dA$Mb8ahP763K2AYhKqGkSNxsThuRiGbqR7ipKeGV+Gwtc",
        ] {
            assert!(!verify_password(bad, "open sesame"), "{bad}");
        }
    }

    #[test]
    fn digests() {
        // `printf abc | sha256sum`
        let hex: String = digest("abc").iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(digest_eq(&digest("abc"), &digest("abc")));
        assert!(!digest_eq(&digest("abc"), &digest("abd")));
        let Ok(id) = random_hex_id() else {
            panic!("no OS randomness")
        };
        assert!(crate::protocol::is_hex_id(&id), "{id}");
    }
}
