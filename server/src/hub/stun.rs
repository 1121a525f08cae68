//! The one STUN fact the hub's worker needs before a datagram is matched to a link: whose ICE
//! credentials a binding request is for.
//!
//! A datagram from an address no link knows yet is, if it is anything, a browser's ICE check.
//! Its USERNAME attribute is `hub-ufrag:browser-ufrag` (the receiver's fragment first, RFC 8445
//! 7.2.2), so the worker finds the one link it can be for by the hub's fragment, in one map
//! lookup, and only that link's ICE agent checks it (its message integrity, then the address).
//! Asking every link in turn instead would let a stranger's flood of datagrams cost the worker
//! work in proportion to its clients. str0m parses STUN fully once the link is chosen; this
//! module reads only the header and walks the attributes, without allocating.

/// STUN's magic cookie (RFC 5389 6).
const MAGIC_COOKIE: [u8; 4] = [0x21, 0x12, 0xA4, 0x42];
/// Message type of a binding request.
const BINDING_REQUEST: [u8; 2] = [0x00, 0x01];
const HEADER_LEN: usize = 20;
/// The USERNAME attribute's type.
const USERNAME: u16 = 0x0006;
/// Longest USERNAME value STUN allows (RFC 5389 15.3).
const MAX_USERNAME: usize = 513;

/// The hub's ICE username fragment a binding request is addressed to, or `None` when `bytes` is
/// not a well-formed binding request with a `local:remote` USERNAME.
pub fn binding_request_ufrag(bytes: &[u8]) -> Option<&str> {
    if bytes.len() < HEADER_LEN || bytes[0..2] != BINDING_REQUEST || bytes[4..8] != MAGIC_COOKIE {
        return None;
    }
    let body_len = usize::from(u16::from_be_bytes([bytes[2], bytes[3]]));
    if body_len % 4 != 0 || HEADER_LEN + body_len != bytes.len() {
        return None;
    }
    let mut at = HEADER_LEN;
    while at + 4 <= bytes.len() {
        let kind = u16::from_be_bytes([bytes[at], bytes[at + 1]]);
        let len = usize::from(u16::from_be_bytes([bytes[at + 2], bytes[at + 3]]));
        let value = bytes.get(at + 4..at + 4 + len)?;
        if kind == USERNAME {
            if len > MAX_USERNAME {
                return None;
            }
            let text = std::str::from_utf8(value).ok()?;
            let (local, remote) = text.split_once(':')?;
            return (!local.is_empty() && !remote.is_empty()).then_some(local);
        }
        at += 4 + len.div_ceil(4) * 4;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A binding request with `attributes` (type, value), padded as STUN pads them.
    fn request(attributes: &[(u16, &[u8])]) -> Vec<u8> {
        let mut body = Vec::new();
        for (kind, value) in attributes {
            body.extend_from_slice(&kind.to_be_bytes());
            body.extend_from_slice(&(value.len() as u16).to_be_bytes());
            body.extend_from_slice(value);
            body.resize(body.len().div_ceil(4) * 4, 0);
        }
        let mut out = vec![0x00, 0x01];
        out.extend_from_slice(&(body.len() as u16).to_be_bytes());
        out.extend_from_slice(&MAGIC_COOKIE);
        out.extend_from_slice(&[7; 12]);
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn finds_the_receivers_fragment_after_other_attributes() {
        // PRIORITY (4 bytes) first, then a USERNAME whose length needs padding.
        let r = request(&[(0x0024, &[0, 0, 0, 1]), (USERNAME, b"hubA:brw")]);
        assert_eq!(binding_request_ufrag(&r), Some("hubA"));
        let r = request(&[(USERNAME, b"h:browser-fragment")]);
        assert_eq!(binding_request_ufrag(&r), Some("h"));
    }

    #[test]
    fn anything_else_is_none() {
        let good = request(&[(USERNAME, b"hubA:brw1")]);
        // Not a request: a binding success response.
        let mut response = good.clone();
        response[0..2].copy_from_slice(&[0x01, 0x01]);
        // Wrong cookie.
        let mut cookie = good.clone();
        cookie[4] ^= 1;
        // Length field disagreeing with the datagram.
        let mut long = good.clone();
        long.push(0);
        // An attribute running past the end.
        let mut overrun = good.clone();
        overrun[HEADER_LEN + 3] = 200;
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("empty", vec![]),
            ("header only, short", good[..19].to_vec()),
            ("truncated", good[..good.len() - 4].to_vec()),
            ("response", response),
            ("wrong cookie", cookie),
            ("length mismatch", long),
            ("attribute overrun", overrun),
            ("no username", request(&[(0x0024, &[0, 0, 0, 1])])),
            ("no colon", request(&[(USERNAME, b"hubAbrw1")])),
            ("empty local", request(&[(USERNAME, b":brw1")])),
            ("empty remote", request(&[(USERNAME, b"hubA:")])),
            ("not UTF-8", request(&[(USERNAME, &[0xff, b':', b'a'])])),
            (
                "DTLS",
                vec![
                    22, 254, 253, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                ],
            ),
        ];
        for (what, bytes) in cases {
            assert_eq!(binding_request_ufrag(&bytes), None, "{what}");
        }
    }

    #[test]
    fn every_prefix_and_every_byte_flip_is_handled() {
        let good = request(&[(0x0024, &[0, 0, 0, 1]), (USERNAME, b"hubA:brw1")]);
        for n in 0..good.len() {
            let _ = binding_request_ufrag(&good[..n]);
        }
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0xff;
            let _ = binding_request_ufrag(&b);
        }
    }
}
