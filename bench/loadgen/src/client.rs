//! One emulated JackTrip client: the hub handshake over TCP, then its UDP socket, its tone and
//! what it received.
//!
//! The handshake is JackTrip's (the hub's `handshake` module has the layout): bind a UDP socket,
//! send its port as an `i32` and a 64-byte NUL-padded name on a TCP connection, read one `i32`
//! back: a UDP port of the hub for this client, or a refusal code above 65535. The same client
//! then sends one packet per block from that socket to that port and reads the hub's packets
//! on it. Leaving is JackTrip's exit datagram (63 bytes of 0xFF), sent twice.
//!
//! Every failure is an `Err` naming the step; nothing here panics on what a server sends.
//!
//! In forward mode a client is the app's instead: the same socket, sequence number and tone,
//! with a [`HubLink`] (WebRTC to the hub) that carries its packets and counts what it hears
//! per sender; the fields for JackTrip's stream (`hub`, `reception`, `recording`, `exits`)
//! then stay unused.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use tutti_core::packet::{self, CONTROL_PACKET_LEN};
use tutti_server::hub::jacktrip::handshake::NAME_LEN;

use crate::hublink::HubLink;
use crate::reception::Reception;
use crate::recording::Recording;

/// JackTrip's exit datagram.
pub const EXIT: [u8; CONTROL_PACKET_LEN] = [0xFF; CONTROL_PACKET_LEN];

/// What a refusal code above 65535 means (JackTrip's `Auth` answers).
fn refusal(code: i32) -> &'static str {
    match code {
        65_536 => "authentication asked for (OK code where a port was due)",
        131_072 => "authentication required",
        196_608 => "authentication not required (no port followed)",
        262_144 => "wrong credentials",
        327_680 => "wrong time",
        _ => "an answer that is neither a port nor a known code",
    }
}

/// The loopback address of emulated client `i` (127.1.0.1 and up): each client comes from an
/// address of its own, as real ones do, so a server's per-address limits meet one client each.
pub fn client_ip(i: usize) -> IpAddr {
    loopback_ip(1, i)
}

/// The `i`-th address of loopback block `127.net.0.0/16` (from `.0.1`; `i` below 65,535).
pub fn loopback_ip(net: u8, i: usize) -> IpAddr {
    let n = (i % 65_535) as u32 + 1;
    IpAddr::V4(Ipv4Addr::new(127, net, (n >> 8) as u8, n as u8))
}

/// A TCP connection to `to` from address `from`, within `timeout`.
pub fn connect_from(from: IpAddr, to: SocketAddr, timeout: Duration) -> std::io::Result<TcpStream> {
    let socket = Socket::new(Domain::for_address(to), Type::STREAM, Some(Protocol::TCP))?;
    socket.bind(&SocketAddr::new(from, 0).into())?;
    socket.connect_timeout(&to.into(), timeout)?;
    Ok(socket.into())
}

/// Runs the handshake with the hub at `tcp` as client `name` (`room/name` for Tutti's hub; at
/// most 64 bytes), from address `from`. Returns the client's UDP socket (non-blocking, on
/// `from`) and the hub's UDP address for it.
pub fn handshake(
    tcp: SocketAddr,
    from: IpAddr,
    name: &str,
    timeout: Duration,
) -> Result<(UdpSocket, SocketAddr), String> {
    if name.len() > NAME_LEN || name.as_bytes().contains(&0) {
        return Err(format!(
            "client name {name:?}: at most {NAME_LEN} bytes, no NUL"
        ));
    }
    let socket = UdpSocket::bind((from, 0)).map_err(|e| format!("binding UDP on {from}: {e}"))?;
    let port = socket
        .local_addr()
        .map_err(|e| format!("UDP address: {e}"))?
        .port();
    let mut hello = Vec::with_capacity(4 + NAME_LEN);
    hello.extend_from_slice(&i32::from(port).to_le_bytes());
    let mut field = [0u8; NAME_LEN];
    field[..name.len()].copy_from_slice(name.as_bytes());
    hello.extend_from_slice(&field);
    let mut stream = connect_from(from, tcp, timeout)
        .map_err(|e| format!("{name}: connecting to {tcp} from {from}: {e}"))?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| format!("{name}: socket timeouts: {e}"))?;
    stream
        .write_all(&hello)
        .map_err(|e| format!("{name}: sending the hello: {e}"))?;
    let mut answer = [0u8; 4];
    stream
        .read_exact(&mut answer)
        .map_err(|e| format!("{name}: reading the hub's answer: {e}"))?;
    let code = i32::from_le_bytes(answer);
    let hub_port = u16::try_from(code)
        .ok()
        .filter(|&p| p != 0)
        .ok_or_else(|| format!("{name}: the hub answered {code}: {}", refusal(code)))?;
    socket
        .set_nonblocking(true)
        .map_err(|e| format!("non-blocking UDP: {e}"))?;
    Ok((socket, SocketAddr::new(tcp.ip(), hub_port)))
}

/// One client's state in the emulator.
pub struct Client {
    /// Its index in its room (its tone is the room's `bins[index]`).
    pub index: usize,
    pub room: usize,
    pub socket: mio::net::UdpSocket,
    pub hub: SocketAddr,
    /// The next sequence number to send.
    pub seq: u16,
    /// Its tone's loop among the shared ones.
    pub tone: usize,
    pub reception: Reception,
    /// Datagrams from the hub that were not packets of the expected layout (counted, dropped).
    pub malformed: u64,
    /// Exit datagrams from the hub.
    pub exits: u64,
    /// Packets sent; sends the socket refused.
    pub sent: u64,
    pub send_errors: u64,
    /// When spot-checked: the left channel received in the window, laid out by sequence number.
    pub recording: Option<Recording>,
    /// It never leaves in a churn.
    pub stays: bool,
    /// On its driver's clock, µs: when its handshake ended, and when its first packet came.
    pub added_us: u64,
    pub first_packet_us: Option<u64>,
    /// Since when its reception counts: the window's start, or its joining if later.
    pub since: std::time::Instant,
    /// Forward mode: its WebRTC link to the hub, which carries its packets both ways.
    pub link: Option<Box<HubLink>>,
}

impl Client {
    pub fn new(
        index: usize,
        room: usize,
        socket: UdpSocket,
        hub: SocketAddr,
        tone: usize,
    ) -> Client {
        Client {
            index,
            room,
            socket: mio::net::UdpSocket::from_std(socket),
            hub,
            seq: 0,
            tone,
            reception: Reception::default(),
            malformed: 0,
            exits: 0,
            sent: 0,
            send_errors: 0,
            recording: None,
            stays: false,
            added_us: 0,
            first_packet_us: None,
            since: std::time::Instant::now(),
            link: None,
        }
    }

    /// The client with its packets carried by `link` (forward mode).
    pub fn with_link(mut self, link: HubLink) -> Client {
        self.link = Some(Box::new(link));
        self
    }

    /// Takes one datagram from the hub, received at `now_us`. `scratch` holds at least one block
    /// of each channel when recording.
    pub fn on_datagram(&mut self, bytes: &[u8], now_us: u64, left: &mut [f32], right: &mut [f32]) {
        if bytes.len() == CONTROL_PACKET_LEN && bytes.iter().all(|&b| b == 0xFF) {
            self.exits += 1;
            return;
        }
        let Ok(p) = packet::parse(bytes) else {
            self.malformed += 1;
            return;
        };
        self.reception.on_packet(p.header.seq, now_us);
        self.first_packet_us.get_or_insert(now_us);
        if let Some(rec) = self.recording.as_mut() {
            let frames = p.frames();
            if frames <= left.len() && rec.admit(p.header.seq, frames) {
                p.decode_stereo(&mut left[..frames], &mut right[..frames]);
                rec.push(&left[..frames]);
            }
        }
    }

    /// Starts a new measuring window.
    pub fn reset(&mut self) {
        self.since = std::time::Instant::now();
        self.reception.reset();
        self.malformed = 0;
        if let Some(link) = self.link.as_mut() {
            link.reset();
        }
        if let Some(rec) = self.recording.as_mut() {
            rec.clear();
        }
    }

    /// Says goodbye as JackTrip does: the exit datagram, twice; or closes its WebRTC link.
    pub fn leave(&mut self) {
        if let Some(link) = self.link.as_mut() {
            link.close(&self.socket);
            return;
        }
        for _ in 0..2 {
            let _ = self.socket.send_to(&EXIT, self.hub);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::thread;

    /// A one-shot hub: reads a hello and answers `answer`; returns what it read.
    fn fake_hub(answer: i32) -> (SocketAddr, thread::JoinHandle<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut hello = vec![0u8; 4 + NAME_LEN];
            s.read_exact(&mut hello).unwrap();
            s.write_all(&answer.to_le_bytes()).unwrap();
            hello
        });
        (addr, handle)
    }

    #[test]
    fn the_hello_is_the_udp_port_and_the_padded_name_and_the_answer_is_the_hub_port() {
        let (addr, hub) = fake_hub(61_010);
        let (socket, to) =
            handshake(addr, client_ip(6), "room/alto-7", Duration::from_secs(5)).unwrap();
        assert_eq!(socket.local_addr().unwrap().ip(), client_ip(6));
        let hello = hub.join().unwrap();
        let port = i32::from_le_bytes(hello[..4].try_into().unwrap());
        assert_eq!(port, i32::from(socket.local_addr().unwrap().port()));
        assert_eq!(&hello[4..15], b"room/alto-7");
        assert!(hello[15..].iter().all(|&b| b == 0));
        assert_eq!(to, SocketAddr::from(([127, 0, 0, 1], 61_010)));
    }

    #[test]
    fn a_refusal_code_is_an_error_that_says_what_it_means() {
        let (addr, hub) = fake_hub(131_072);
        let e = handshake(addr, client_ip(0), "r/x", Duration::from_secs(5)).unwrap_err();
        hub.join().unwrap();
        assert!(
            e.contains("131072") && e.contains("authentication required"),
            "{e}"
        );
        let long = "x".repeat(NAME_LEN + 1);
        assert!(handshake(addr, client_ip(0), &long, Duration::from_secs(1)).is_err());
    }

    #[test]
    fn every_client_has_an_address_of_its_own() {
        assert_eq!(client_ip(0), IpAddr::V4(Ipv4Addr::new(127, 1, 0, 1)));
        assert_eq!(client_ip(255), IpAddr::V4(Ipv4Addr::new(127, 1, 1, 0)));
        let all: std::collections::BTreeSet<IpAddr> = (0..2000).map(client_ip).collect();
        assert_eq!(all.len(), 2000);
        assert_eq!(
            loopback_ip(2, 254),
            IpAddr::V4(Ipv4Addr::new(127, 2, 0, 255))
        );
        assert_eq!(loopback_ip(2, 255), IpAddr::V4(Ipv4Addr::new(127, 2, 1, 0)));
    }

    #[test]
    fn datagrams_are_counted_by_kind() {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let hub = socket.local_addr().unwrap();
        let mut c = Client::new(0, 0, socket, hub, 0);
        c.recording = Some(Recording::with_capacity(1000));
        let (mut l, mut r) = (vec![0f32; 256], vec![0f32; 256]);
        let tone = crate::tones::ToneLoop::new(10, 0.1, 128).unwrap();
        let mut buf = vec![0u8; packet::MAX_PACKET_LEN];
        for seq in 0..3u16 {
            let n = tone.packet_into(seq, 0, &mut buf);
            c.on_datagram(&buf[..n], u64::from(seq) * 2667, &mut l, &mut r);
        }
        c.on_datagram(&EXIT, 9000, &mut l, &mut r);
        c.on_datagram(&[1, 2, 3], 9100, &mut l, &mut r);
        assert_eq!((c.reception.delivered, c.exits, c.malformed), (3, 1, 1));
        assert_eq!(c.recording.as_ref().unwrap().samples().len(), 3 * 128);
    }
}
