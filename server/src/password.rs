//! Room passwords, kept only as a salted SHA-256 and compared in constant time.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// A room's password: a random per-room salt and SHA-256(salt ‖ password).
pub struct PasswordHash {
    salt: [u8; 16],
    hash: [u8; 32],
}

impl PasswordHash {
    /// Hashes `password` with a fresh random salt. Fails only if the OS has no randomness.
    pub fn new(password: &str) -> Result<Self, getrandom::Error> {
        let mut salt = [0u8; 16];
        getrandom::fill(&mut salt)?;
        Ok(Self::with_salt(salt, password))
    }

    fn with_salt(salt: [u8; 16], password: &str) -> Self {
        let hash = digest(&salt, password);
        Self { salt, hash }
    }

    /// Whether `password` is the one this hash was made from (constant time in the hash).
    pub fn matches(&self, password: &str) -> bool {
        digest(&self.salt, password).ct_eq(&self.hash).into()
    }
}

fn digest(salt: &[u8; 16], password: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(salt);
    h.update(password.as_bytes());
    h.finalize().into()
}

/// Constant-time equality of two secrets of public length (peer tokens).
pub fn secrets_equal(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_only_the_same_password() {
        let h = PasswordHash::with_salt([7; 16], "secret");
        assert!(h.matches("secret"));
        assert!(!h.matches("Secret"));
        assert!(!h.matches(""));
        assert!(!h.matches("secret "));
    }

    #[test]
    fn salt_changes_the_hash() {
        let a = PasswordHash::with_salt([1; 16], "pw");
        let b = PasswordHash::with_salt([2; 16], "pw");
        assert_ne!(a.hash, b.hash);
        let Ok(r) = PasswordHash::new("pw") else {
            panic!("no OS randomness")
        };
        assert!(r.matches("pw") && !r.matches("pW"));
    }

    #[test]
    fn known_answer() {
        // SHA-256 of 16 zero bytes followed by "abc", computed independently with
        // `printf '\0%.0s' $(seq 16); printf abc` | sha256sum.
        let h = PasswordHash::with_salt([0; 16], "abc");
        let hex: String = h.hash.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, KNOWN_ANSWER);
    }

    const KNOWN_ANSWER: &str = "277e7ff6d232b9763f4a66e8d05d210da32dac9c6dbce1026ad4cc98acb5fefe";

    #[test]
    fn compares_tokens() {
        assert!(secrets_equal("abc", "abc"));
        assert!(!secrets_equal("abc", "abd"));
        assert!(!secrets_equal("abc", "abcd"));
    }
}
