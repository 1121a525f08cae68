//! The nfnetlink_queue messages this program exchanges with the kernel, written and parsed by
//! hand: a bind-and-configure request, verdicts, and the packets, acknowledgements and errors the
//! kernel sends back. Pure functions over byte slices; the socket lives in `sys`.
//!
//! Layout (netlink: header fields in host byte order, nfqueue payloads big-endian):
//!
//! ```text
//!  0       4       6       8          12         16      17      18        20
//! +-------+-------+-------+----------+----------+-------+-------+---------+------------------
//! | len   | type  | flags | seq      | port id  | family| vers. | res_id  | attributes ...
//! | u32   | u16   | u16   | u32      | u32      | u8    | u8    | be16    |
//! +-------+-------+-------+----------+----------+-------+-------+---------+------------------
//!  nlmsghdr (16 bytes, host order)             nfgenmsg (res_id = queue number)
//!
//! attribute: | len u16 (header + value, unpadded) | type u16 | value, padded to 4 bytes |
//! ```
//!
//! - type = `NFNL_SUBSYS_QUEUE << 8 | message`: 0x0300 packet (kernel to us), 0x0301 verdict,
//!   0x0302 config.
//! - Config: `NFQA_CFG_CMD` (1) `{ u8 command, u8 pad, be16 pf }`, `NFQA_CFG_PARAMS` (2)
//!   `{ be32 copy_range, u8 copy_mode }` (5 bytes), `NFQA_CFG_QUEUE_MAXLEN` (3) `be32`.
//! - Verdict: `NFQA_VERDICT_HDR` (2) `{ be32 verdict, be32 packet id }`.
//! - Packet: `NFQA_PACKET_HDR` (1) `{ be32 packet id, be16 hw protocol, u8 hook }`,
//!   `NFQA_PAYLOAD` (10) the first `copy_range` bytes, `NFQA_CAP_LEN` (13) `be32` full length
//!   when the payload was cut short.
//! - Errors and acknowledgements: type `NLMSG_ERROR` (2), payload `{ i32 -errno, the request's
//!   nlmsghdr }`; errno 0 acknowledges a request sent with `NLM_F_ACK`.

/// Netlink message header length.
pub const NLMSG_HDRLEN: usize = 16;
const NFGENMSG_LEN: usize = 4;
const NLA_HDRLEN: usize = 4;
const NLA_TYPE_MASK: u16 = 0x3fff;

const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLMSG_ERROR: u16 = 2;

const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFQNL_MSG_PACKET: u16 = NFNL_SUBSYS_QUEUE << 8;
const NFQNL_MSG_VERDICT: u16 = NFNL_SUBSYS_QUEUE << 8 | 1;
const NFQNL_MSG_CONFIG: u16 = NFNL_SUBSYS_QUEUE << 8 | 2;

const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_PAYLOAD: u16 = 10;
const NFQA_CAP_LEN: u16 = 13;

const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
const NFQNL_CFG_CMD_BIND: u8 = 1;
const NFQNL_COPY_PACKET: u8 = 2;

/// Length of one verdict message: callers size their batches with it.
pub const VERDICT_LEN: usize = NLMSG_HDRLEN + NFGENMSG_LEN + NLA_HDRLEN + 8;
/// Length of the bind-and-configure request.
pub const CONFIG_LEN: usize =
    NLMSG_HDRLEN + NFGENMSG_LEN + (NLA_HDRLEN + 4) + (NLA_HDRLEN + 8) + (NLA_HDRLEN + 4);

/// A verdict: what the kernel does with the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Drop = 0,
    Accept = 1,
}

const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn put_nlmsghdr(out: &mut [u8], len: usize, kind: u16, flags: u16, seq: u32, queue: u16) {
    out[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
    out[4..6].copy_from_slice(&kind.to_ne_bytes());
    out[6..8].copy_from_slice(&flags.to_ne_bytes());
    out[8..12].copy_from_slice(&seq.to_ne_bytes());
    out[12..16].copy_from_slice(&0u32.to_ne_bytes());
    // nfgenmsg: AF_UNSPEC, NFNETLINK_V0, queue number big-endian.
    out[16] = 0;
    out[17] = 0;
    out[18..20].copy_from_slice(&queue.to_be_bytes());
}

/// Writes an attribute at `at`; returns the offset after it (padded).
fn put_attr(out: &mut [u8], at: usize, kind: u16, value: &[u8]) -> usize {
    let len = NLA_HDRLEN + value.len();
    out[at..at + 2].copy_from_slice(&(len as u16).to_ne_bytes());
    out[at + 2..at + 4].copy_from_slice(&kind.to_ne_bytes());
    out[at + 4..at + len].copy_from_slice(value);
    let end = at + align4(len);
    out[at + len..end].fill(0);
    end
}

/// The request that binds this socket to `queue`, asks for the first `copy_range` bytes of each
/// packet (with the full length alongside when cut) and lets `max_len` packets wait in the kernel.
/// Sent with `NLM_F_ACK`: the kernel answers with an error message carrying `seq`.
pub fn config_request(queue: u16, copy_range: u32, max_len: u32, seq: u32) -> [u8; CONFIG_LEN] {
    let mut out = [0u8; CONFIG_LEN];
    put_nlmsghdr(
        &mut out,
        CONFIG_LEN,
        NFQNL_MSG_CONFIG,
        NLM_F_REQUEST | NLM_F_ACK,
        seq,
        queue,
    );
    let mut at = NLMSG_HDRLEN + NFGENMSG_LEN;
    at = put_attr(&mut out, at, NFQA_CFG_CMD, &[NFQNL_CFG_CMD_BIND, 0, 0, 0]);
    let mut params = [0u8; 5];
    params[0..4].copy_from_slice(&copy_range.to_be_bytes());
    params[4] = NFQNL_COPY_PACKET;
    at = put_attr(&mut out, at, NFQA_CFG_PARAMS, &params);
    at = put_attr(&mut out, at, NFQA_CFG_QUEUE_MAXLEN, &max_len.to_be_bytes());
    debug_assert_eq!(at, CONFIG_LEN);
    out
}

/// Writes a verdict for packet `id` of `queue` into `out` (at least [`VERDICT_LEN`] bytes);
/// returns the bytes written. No `NLM_F_ACK`: the kernel only answers when it refuses.
pub fn write_verdict(out: &mut [u8], queue: u16, id: u32, verdict: Verdict) -> usize {
    put_nlmsghdr(out, VERDICT_LEN, NFQNL_MSG_VERDICT, NLM_F_REQUEST, 0, queue);
    let mut value = [0u8; 8];
    value[0..4].copy_from_slice(&(verdict as u32).to_be_bytes());
    value[4..8].copy_from_slice(&id.to_be_bytes());
    let end = put_attr(out, NLMSG_HDRLEN + NFGENMSG_LEN, NFQA_VERDICT_HDR, &value);
    debug_assert_eq!(end, VERDICT_LEN);
    end
}

/// One message from the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    /// A queued packet: its id (for the verdict) and its full length in bytes.
    Packet { id: u32, len: u32 },
    /// Request `seq` was carried out.
    Ack { seq: u32 },
    /// Request `seq` was refused with this errno (positive).
    Error { seq: u32, errno: i32 },
    /// Anything else (other netlink types): ignored.
    Other,
    /// Bytes that do not parse (a length that does not fit, a packet without its header). The
    /// rest of the buffer is skipped.
    Malformed,
}

/// The messages in one datagram from the kernel.
pub fn messages(buf: &[u8]) -> Messages<'_> {
    Messages { buf }
}

/// Iterator over [`messages`].
pub struct Messages<'a> {
    buf: &'a [u8],
}

fn u16_ne(b: &[u8]) -> u16 {
    u16::from_ne_bytes([b[0], b[1]])
}
fn u32_ne(b: &[u8]) -> u32 {
    u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
}
fn u32_be(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl Iterator for Messages<'_> {
    type Item = Message;

    fn next(&mut self) -> Option<Message> {
        if self.buf.is_empty() {
            return None;
        }
        if self.buf.len() < NLMSG_HDRLEN {
            self.buf = &[];
            return Some(Message::Malformed);
        }
        let len = u32_ne(&self.buf[0..4]) as usize;
        if len < NLMSG_HDRLEN || len > self.buf.len() {
            self.buf = &[];
            return Some(Message::Malformed);
        }
        let msg = &self.buf[..len];
        self.buf = &self.buf[align4(len).min(self.buf.len())..];
        let kind = u16_ne(&msg[4..6]);
        Some(match kind {
            NLMSG_ERROR => parse_error(&msg[NLMSG_HDRLEN..]),
            NFQNL_MSG_PACKET => parse_packet(msg),
            _ => Message::Other,
        })
    }
}

fn parse_error(body: &[u8]) -> Message {
    // { i32 error, struct nlmsghdr request }: the request's seq is at offset 4 + 8.
    if body.len() < 4 + NLMSG_HDRLEN {
        return Message::Malformed;
    }
    let error = i32::from_ne_bytes([body[0], body[1], body[2], body[3]]);
    let seq = u32_ne(&body[12..16]);
    if error == 0 {
        Message::Ack { seq }
    } else {
        Message::Error {
            seq,
            errno: error.saturating_neg(),
        }
    }
}

fn parse_packet(msg: &[u8]) -> Message {
    let mut at = NLMSG_HDRLEN + NFGENMSG_LEN;
    let (mut id, mut payload_len, mut cap_len) = (None, 0u32, None);
    while at + NLA_HDRLEN <= msg.len() {
        let len = u16_ne(&msg[at..at + 2]) as usize;
        if len < NLA_HDRLEN || at + len > msg.len() {
            return Message::Malformed;
        }
        let value = &msg[at + NLA_HDRLEN..at + len];
        match u16_ne(&msg[at + 2..at + 4]) & NLA_TYPE_MASK {
            NFQA_PACKET_HDR if value.len() >= 4 => id = Some(u32_be(value)),
            NFQA_PAYLOAD => payload_len = value.len() as u32,
            NFQA_CAP_LEN if value.len() >= 4 => cap_len = Some(u32_be(value)),
            _ => {}
        }
        at += align4(len);
    }
    match id {
        Some(id) => Message::Packet {
            id,
            len: cap_len.unwrap_or(payload_len),
        },
        None => Message::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::impair::SplitMix64;

    #[test]
    #[cfg(target_endian = "little")]
    fn verdict_bytes_match_the_layout() {
        let mut out = [0xaau8; 64];
        let n = write_verdict(&mut out, 0x0102, 0x0a0b_0c0d, Verdict::Accept);
        assert_eq!(n, 32);
        #[rustfmt::skip]
        let want: [u8; 32] = [
            32, 0, 0, 0,   0x01, 0x03,  0x01, 0x00,  0, 0, 0, 0,  0, 0, 0, 0, // nlmsghdr
            0, 0, 0x01, 0x02,                                                 // nfgenmsg
            12, 0, 2, 0,  0, 0, 0, 1,  0x0a, 0x0b, 0x0c, 0x0d,                // verdict header
        ];
        assert_eq!(out[..32], want);
        write_verdict(&mut out, 0, 7, Verdict::Drop);
        assert_eq!(out[24..32], [0, 0, 0, 0, 0, 0, 0, 7]);
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn config_bytes_match_the_layout() {
        let out = config_request(3, 64, 8192, 99);
        #[rustfmt::skip]
        let want: [u8; 48] = [
            48, 0, 0, 0,  0x02, 0x03,  0x05, 0x00,  99, 0, 0, 0,  0, 0, 0, 0, // request + ack
            0, 0, 0, 3,                                                       // queue 3
            8, 0, 1, 0,   1, 0, 0, 0,                                         // cmd: bind
            9, 0, 2, 0,   0, 0, 0, 64,  2, 0, 0, 0,                           // params: 64, packet
            8, 0, 3, 0,   0, 0, 0x20, 0,                                      // maxlen 8192
        ];
        assert_eq!(out, want);
    }

    /// A packet message as the kernel writes it: header, a hook/id attribute, a timestamp-like
    /// attribute we ignore, a payload cut at `payload` bytes and the cap length.
    fn packet_message(id: u32, payload: usize, cap_len: Option<u32>) -> Vec<u8> {
        let mut m = vec![0u8; 20];
        m[4..6].copy_from_slice(&0x0300u16.to_ne_bytes());
        let mut attr = |kind: u16, value: &[u8]| {
            m.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
            m.extend_from_slice(&kind.to_ne_bytes());
            m.extend_from_slice(value);
            while m.len() % 4 != 0 {
                m.push(0);
            }
        };
        let mut hdr = id.to_be_bytes().to_vec();
        hdr.extend_from_slice(&[0x08, 0x00, 3]);
        attr(1, &hdr);
        attr(0x8000 | 4, &[0, 0, 0, 1]); // nested/byte-order flags are masked
        attr(10, &vec![0x45; payload]);
        if let Some(c) = cap_len {
            attr(13, &c.to_be_bytes());
        }
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        m
    }

    fn ack(seq: u32, errno: i32) -> Vec<u8> {
        let mut m = vec![0u8; 16 + 4 + 16];
        m[0..4].copy_from_slice(&36u32.to_ne_bytes());
        m[4..6].copy_from_slice(&2u16.to_ne_bytes());
        m[16..20].copy_from_slice(&(-errno).to_ne_bytes());
        m[28..32].copy_from_slice(&seq.to_ne_bytes());
        m
    }

    #[test]
    fn parses_packets_acks_and_errors_in_one_datagram() {
        let mut buf = packet_message(41, 64, Some(1052));
        buf.extend(packet_message(42, 30, None));
        buf.extend(ack(7, 0));
        buf.extend(ack(8, libc::EPERM));
        let got: Vec<_> = messages(&buf).collect();
        assert_eq!(
            got,
            [
                Message::Packet { id: 41, len: 1052 },
                Message::Packet { id: 42, len: 30 },
                Message::Ack { seq: 7 },
                Message::Error {
                    seq: 8,
                    errno: libc::EPERM
                },
            ]
        );
    }

    #[test]
    fn malformed_input_never_panics() {
        let mut good = packet_message(5, 64, Some(1000));
        good.extend(ack(1, 0));
        // Every truncation, and seeded random corruptions of every byte.
        for cut in 0..good.len() {
            let _ = messages(&good[..cut]).count();
        }
        let mut rng = SplitMix64::new(5);
        for _ in 0..20_000 {
            let mut b = good.clone();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(b.len() as u64) as usize;
                b[i] = rng.next_u64() as u8;
            }
            assert!(messages(&b).count() <= b.len() / NLMSG_HDRLEN + 1);
        }
        for _ in 0..2_000 {
            let len = rng.below(200) as usize;
            let b: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            let _ = messages(&b).count();
        }
        // A packet without its id is malformed, an oversized length stops the walk.
        let mut no_id = vec![0u8; 20];
        no_id[0..4].copy_from_slice(&20u32.to_ne_bytes());
        no_id[4..6].copy_from_slice(&0x0300u16.to_ne_bytes());
        assert_eq!(messages(&no_id).collect::<Vec<_>>(), [Message::Malformed]);
        let mut long = good.clone();
        long[0..4].copy_from_slice(&10_000u32.to_ne_bytes());
        assert_eq!(messages(&long).collect::<Vec<_>>(), [Message::Malformed]);
    }
}
