//! A room's owner on this project's server, as the load generator needs one: the server admits
//! a JackTrip client only into a room that a member opened and switched to the hub, so each
//! room of a run is first joined over the signaling WebSocket and set to `mix`, and that member
//! stays (its connection read by a thread of its own, which answers the server's pings) until
//! the run ends.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tungstenite::{Message, WebSocket};

use crate::client::connect_from;

/// How long joining and switching the room may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The reader's read timeout: how soon it sees that the run ended.
const READ_TICK: Duration = Duration::from_millis(200);

pub struct RoomOwner {
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
}

type Ws = WebSocket<std::net::TcpStream>;

fn send(ws: &mut Ws, v: Value) -> Result<(), String> {
    ws.send(Message::text(v.to_string()))
        .map_err(|e| format!("signaling send: {e}"))
}

/// A read that timed out with nothing to read (the socket's read timeout).
fn waited(e: &tungstenite::Error) -> bool {
    matches!(e, tungstenite::Error::Io(io) if matches!(io.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut))
}

/// Reads until a message of type `kind` comes (an `error` is the server's refusal).
fn expect(ws: &mut Ws, kind: &str) -> Result<Value, String> {
    let deadline = Instant::now() + TIMEOUT;
    while Instant::now() < deadline {
        match ws.read() {
            Ok(Message::Text(t)) => {
                let v: Value =
                    serde_json::from_str(t.as_str()).map_err(|e| format!("signaling JSON: {e}"))?;
                if v["type"] == kind {
                    return Ok(v);
                }
                if v["type"] == "error" {
                    return Err(format!("the server refused: {v}"));
                }
            }
            Ok(_) => {}
            Err(e) if waited(&e) => {}
            Err(e) => return Err(format!("signaling read: {e}")),
        }
    }
    Err(format!("no {kind} within {TIMEOUT:?}"))
}

impl RoomOwner {
    /// Joins `room` on the server at `http` from address `from` and switches it to `mode`
    /// (`mix` or `forward`).
    pub fn open(
        http: SocketAddr,
        from: IpAddr,
        room: &str,
        mode: &str,
    ) -> Result<RoomOwner, String> {
        let stream =
            connect_from(from, http, TIMEOUT).map_err(|e| format!("connecting to {http}: {e}"))?;
        stream
            .set_read_timeout(Some(TIMEOUT))
            .map_err(|e| format!("read timeout: {e}"))?;
        let (mut ws, _) = tungstenite::client(format!("ws://{http}/ws"), stream)
            .map_err(|e| format!("signaling handshake: {e}"))?;
        // Peer ids and tokens are 32 hex digits; unique per room is enough here.
        let id = format!(
            "{:032x}",
            u128::from(room.len() as u32) << 64 | u128::from(fnv(room))
        );
        send(
            &mut ws,
            json!({"type": "join", "room": room, "name": "load owner", "peer": id, "token": id}),
        )?;
        expect(&mut ws, "welcome")?;
        send(&mut ws, json!({"type": "topology", "mode": mode}))?;
        expect(&mut ws, "topology")?;
        ws.get_ref()
            .set_read_timeout(Some(READ_TICK))
            .map_err(|e| format!("read timeout: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let reader = thread::Builder::new()
            .name("loadgen-owner".into())
            .spawn(move || {
                // Reading answers the server's pings; everything else is of no interest here.
                while !stopped.load(Ordering::Relaxed) {
                    match ws.read() {
                        Ok(_) => {}
                        Err(e) if waited(&e) => {}
                        Err(_) => return,
                    }
                }
                let _ = ws.close(None);
                let _ = ws.flush();
            })
            .map_err(|e| format!("owner thread: {e}"))?;
        Ok(RoomOwner {
            stop,
            reader: Some(reader),
        })
    }
}

impl Drop for RoomOwner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// FNV-1a of `s`: a stable id per room name.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
