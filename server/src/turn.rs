//! TURN credentials by the TURN REST scheme (what coturn calls `use-auth-secret`): the server and
//! the TURN server share a secret; each credential is a user name holding its own expiry time,
//! `<unix expiry>:<user>`, and a password that is the base64 of HMAC-SHA1(secret, user name).
//! The TURN server recomputes the HMAC and refuses expired names, so a credential handed to a
//! browser is worth nothing after its time-to-live and no fixed password is ever given out.
//!
//! Told the time: [`TurnRest::ice_server`] takes `now` as seconds since the Unix epoch.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha1::Sha1;

/// The user part of every name; the TURN server needs none, logs show it.
const USER: &str = "tutti";

/// Shortest secret accepted: a guessable secret lets anyone mint credentials.
pub const MIN_SECRET_BYTES: usize = 16;

/// A TURN server's URLs and the secret shared with it.
#[derive(Clone)]
pub struct TurnRest {
    urls: Vec<String>,
    secret: Vec<u8>,
    ttl_secs: u64,
}

impl TurnRest {
    /// `urls`: comma-separated `turn:` or `turns:` URLs. Errors name the flag at fault.
    pub fn new(urls: &str, secret: &str, ttl_secs: u64) -> Result<Self, String> {
        let urls: Vec<String> = urls
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(String::from)
            .collect();
        if urls.is_empty() {
            return Err(
                "--turn-urls (TUTTI_TURN_URLS) needs at least one turn: or turns: URL \
                        when --turn-secret is given."
                    .into(),
            );
        }
        if let Some(bad) = urls
            .iter()
            .find(|u| !(u.starts_with("turn:") || u.starts_with("turns:")))
        {
            return Err(format!(
                "--turn-urls (TUTTI_TURN_URLS): {bad:?} is not a turn: or turns: URL."
            ));
        }
        if secret.len() < MIN_SECRET_BYTES {
            return Err(format!(
                "--turn-secret (TUTTI_TURN_SECRET) must be at least {MIN_SECRET_BYTES} bytes \
                 long (the TURN server's static-auth-secret)."
            ));
        }
        Ok(Self {
            urls,
            secret: secret.as_bytes().to_vec(),
            ttl_secs,
        })
    }

    /// An RTCIceServer object with a credential valid until `now + ttl`.
    pub fn ice_server(&self, now: u64) -> Value {
        let username = format!("{}:{USER}", now.saturating_add(self.ttl_secs));
        let credential = credential(&self.secret, &username);
        json!({ "urls": self.urls, "username": username, "credential": credential })
    }
}

/// base64(HMAC-SHA1(secret, username)).
fn credential(secret: &[u8], username: &str) -> String {
    // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
    let mut mac = match Hmac::<Sha1>::new_from_slice(secret) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts keys of every length"),
    };
    mac.update(username.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answer() {
        // Computed independently: python3 -c "import hmac,hashlib,base64;
        // print(base64.b64encode(hmac.new(b'north-wind-secret', b'1795269787:tutti',
        // hashlib.sha1).digest()).decode())"
        assert_eq!(
            credential(b"north-wind-secret", "1795269787:tutti"),
            "mdhDjN9or4BBUyVxPF5RCdkHm3s="
        );
        let Ok(t) = TurnRest::new("turn:t.example.org:3478", "north-wind-secret", 3600) else {
            panic!("valid settings refused")
        };
        let server = t.ice_server(1_795_266_187);
        assert_eq!(server["username"], "1795269787:tutti");
        assert_eq!(server["credential"], "mdhDjN9or4BBUyVxPF5RCdkHm3s=");
        assert_eq!(server["urls"], json!(["turn:t.example.org:3478"]));
    }

    #[test]
    fn expiry_moves_with_time() {
        let Ok(t) = TurnRest::new("turns:a:5349, turn:b", "0123456789abcdef", 60) else {
            panic!("valid settings refused")
        };
        let a = t.ice_server(1000);
        let b = t.ice_server(1001);
        assert_eq!(a["username"], "1060:tutti");
        assert_ne!(a["credential"], b["credential"]);
        assert_eq!(a["urls"], json!(["turns:a:5349", "turn:b"]));
    }

    #[test]
    fn refuses_bad_settings() {
        assert!(TurnRest::new("", "0123456789abcdef", 60).is_err());
        assert!(TurnRest::new("stun:x", "0123456789abcdef", 60).is_err());
        assert!(TurnRest::new("turn:x", "short", 60).is_err());
    }
}
