//! Which web pages may open the signaling WebSocket.
//!
//! A browser sends an `Origin` header with every WebSocket upgrade, and a page cannot leave it
//! out or change it. Without a check, any page a musician happens to visit could connect to a
//! server on their network and fill its connection slots or probe its rooms. So an upgrade
//! whose `Origin` is present must name the server itself (the scheme it serves and the `Host`
//! the request was sent to) or one of the origins given with `--allowed-origin`. An upgrade
//! without `Origin` comes from a native tool or a test, not from a page, and is allowed.

use std::fmt;

/// A web origin: scheme, host (lower case, IPv6 in brackets) and port (the scheme's default
/// port when absent, so `http://a` and `http://a:80` are the same origin).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    https: bool,
    host: String,
    port: u16,
}

impl Origin {
    /// Parses `scheme://host[:port]` (an `Origin` header or an `--allowed-origin` value; one
    /// trailing `/` is tolerated). Only http and https are origins a page can have here.
    pub fn parse(text: &str) -> Result<Origin, &'static str> {
        let text = text.trim();
        let text = text.strip_suffix('/').unwrap_or(text);
        let (scheme, rest) = text
            .split_once("://")
            .ok_or("it does not start with http:// or https://")?;
        let https = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            _ => return Err("its scheme is not http or https"),
        };
        Self::from_authority(https, rest)
    }

    /// The origin a page served by this server has when its request carried `host` (the
    /// `Host` header).
    pub fn from_host(https: bool, host: &str) -> Result<Origin, &'static str> {
        Self::from_authority(https, host.trim())
    }

    fn from_authority(https: bool, authority: &str) -> Result<Origin, &'static str> {
        let default_port = if https { 443 } else { 80 };
        let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
            let (inside, after) = rest.split_once(']').ok_or("its IPv6 host has no ']'")?;
            if inside.is_empty()
                || !inside
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
            {
                return Err("its IPv6 host is not an address");
            }
            let port = match after {
                "" => None,
                p => Some(
                    p.strip_prefix(':')
                        .ok_or("something follows its IPv6 host")?,
                ),
            };
            (format!("[{}]", inside.to_ascii_lowercase()), port)
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host.to_ascii_lowercase(), Some(port)),
                None => (authority.to_ascii_lowercase(), None),
            }
        };
        let host_ok = !host.is_empty()
            && (host.starts_with('[')
                || host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')));
        if !host_ok {
            return Err("it has no host, or a host with characters a host name cannot have");
        }
        let port = match port {
            None => default_port,
            Some(p) if !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => p
                .parse()
                .map_err(|_| "its port is not a number from 0 to 65535")?,
            Some(_) => return Err("its port is not a number from 0 to 65535"),
        };
        Ok(Origin { https, host, port })
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}:{}", self.host, self.port)
    }
}

/// The origins allowed to open `/ws`.
#[derive(Debug, Clone)]
pub struct OriginPolicy {
    https: bool,
    allowed: Vec<Origin>,
}

impl OriginPolicy {
    /// `https`: whether the server serves TLS (its own pages then have https origins).
    /// `allowed`: the `--allowed-origin` values.
    pub fn new(https: bool, allowed: &[String]) -> Result<Self, String> {
        let allowed = allowed
            .iter()
            .map(|a| Origin::parse(a).map_err(|why| format!("{a:?}: {why}")))
            .collect::<Result<_, _>>()?;
        Ok(Self { https, allowed })
    }

    /// Whether an upgrade with these `Origin` and `Host` header values may proceed.
    pub fn allows(&self, origin: Option<&[u8]>, host: Option<&[u8]>) -> bool {
        let Some(origin) = origin else {
            return true;
        };
        let Some(origin) = std::str::from_utf8(origin)
            .ok()
            .and_then(|o| Origin::parse(o).ok())
        else {
            return false; // "null" (sandboxed pages, file: URLs) and garbage
        };
        let own = host
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| Origin::from_host(self.https, h).ok());
        own.as_ref() == Some(&origin) || self.allowed.contains(&origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_normalises() {
        let o = |s| Origin::parse(s).map(|o| o.to_string());
        assert_eq!(o("http://Tutti.LAN"), Ok("http://tutti.lan:80".into()));
        assert_eq!(o("HTTPS://a.b:8443/"), Ok("https://a.b:8443".into()));
        assert_eq!(o("https://a"), Ok("https://a:443".into()));
        assert_eq!(o("http://[::1]:8080"), Ok("http://[::1]:8080".into()));
        assert_eq!(o("http://[FE80::1]"), Ok("http://[fe80::1]:80".into()));
        assert_eq!(
            o("http://192.168.1.2:8080"),
            Ok("http://192.168.1.2:8080".into())
        );
        for bad in [
            "",
            "null",
            "tutti.lan",
            "ftp://a",
            "http://",
            "http://a:",
            "http://a:99999",
            "http://a:8o",
            "http://a/path",
            "http://u@a",
            "http://a b",
            "http://[::1",
            "http://[::1]x",
            "http://[]",
        ] {
            assert!(Origin::parse(bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn own_origin_allowed_others_and_null_refused() {
        let plain = OriginPolicy::new(false, &[]).expect("policy");
        let host = Some(&b"tutti.lan:8080"[..]);
        assert!(plain.allows(None, host));
        assert!(plain.allows(None, None));
        assert!(plain.allows(Some(b"http://tutti.lan:8080"), host));
        assert!(plain.allows(Some(b"http://TUTTI.lan:8080"), host));
        assert!(
            !plain.allows(Some(b"https://tutti.lan:8080"), host),
            "scheme"
        );
        assert!(!plain.allows(Some(b"http://tutti.lan:8081"), host), "port");
        assert!(!plain.allows(Some(b"http://evil.example"), host));
        assert!(!plain.allows(Some(b"null"), host));
        assert!(
            !plain.allows(Some(b"http://tutti.lan:8080"), None),
            "no Host"
        );
        assert!(!plain.allows(Some(b"\xff"), host));
        // Default ports: a Host without a port matches an Origin with the default one.
        assert!(plain.allows(Some(b"http://tutti.lan"), Some(b"tutti.lan:80")));

        let tls = OriginPolicy::new(true, &["http://proxy.lan:3000".into()]).expect("policy");
        assert!(tls.allows(Some(b"https://tutti.lan"), Some(b"tutti.lan")));
        assert!(!tls.allows(Some(b"http://tutti.lan"), Some(b"tutti.lan")));
        assert!(tls.allows(Some(b"http://proxy.lan:3000"), Some(b"tutti.lan")));
        assert!(OriginPolicy::new(false, &["proxy.lan".into()]).is_err());
    }
}
