//! The signaling WebSocket as the load generator speaks it: blocking steps to join a room and
//! exchange a hub offer for an answer, then one keeper thread that holds every connection open.
//!
//! The server drops a member whose socket closes or leaves its pings unanswered, and the
//! member's hub link with it, so every emulated member's connection must be read for the whole
//! run. A thread per connection would be hundreds of threads for a few bytes a second each;
//! instead the keeper owns them all, non-blocking, and reads each one every [`KEEP_TICK`]
//! (reading answers the pings; the messages themselves are of no interest once joined). Room
//! owners and emulated clients share it.

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tungstenite::{Message, WebSocket};

use crate::client::connect_from;

/// How long each blocking step (connecting, joining, an answer) may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// How often the keeper reads every connection; well inside the server's ping timeout (5 s).
pub const KEEP_TICK: Duration = Duration::from_millis(100);

pub type Ws = WebSocket<TcpStream>;

/// A signaling connection to the server at `http` from address `from` (blocking, with
/// [`TIMEOUT`] on reads).
pub fn connect(http: SocketAddr, from: IpAddr) -> Result<Ws, String> {
    let stream = connect_from(from, http, TIMEOUT)
        .map_err(|e| format!("connecting to {http} from {from}: {e}"))?;
    stream
        .set_read_timeout(Some(TIMEOUT))
        .map_err(|e| format!("read timeout: {e}"))?;
    let (ws, _) = tungstenite::client(format!("ws://{http}/ws"), stream)
        .map_err(|e| format!("signaling handshake: {e}"))?;
    Ok(ws)
}

pub fn send(ws: &mut Ws, v: Value) -> Result<(), String> {
    ws.send(Message::text(v.to_string()))
        .map_err(|e| format!("signaling send: {e}"))
}

/// A read that timed out with nothing to read (a read timeout, or a non-blocking socket).
pub fn waited(e: &tungstenite::Error) -> bool {
    matches!(e, tungstenite::Error::Io(io) if matches!(io.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut))
}

/// Reads until a message of type `kind` comes (an `error` is the server's refusal).
pub fn expect(ws: &mut Ws, kind: &str) -> Result<Value, String> {
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

/// Joins `room` as `name` with peer id and token `id` (32 hex digits); returns the `welcome`.
pub fn welcome(ws: &mut Ws, room: &str, name: &str, id: &str) -> Result<Value, String> {
    send(
        ws,
        json!({"type": "join", "room": room, "name": name, "peer": id, "token": id}),
    )?;
    expect(ws, "welcome")
}

/// Joins `room` as [`welcome`] does; returns the member's stream id from `welcome` (the id the
/// hub stamps on its packets).
pub fn join(ws: &mut Ws, room: &str, name: &str, id: &str) -> Result<u16, String> {
    let welcome = welcome(ws, room, name, id)?;
    welcome["stream"]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok())
        .ok_or_else(|| format!("welcome without a stream id: {welcome}"))
}

/// Sends the member's hub offer `sdp`; returns the hub's answer's SDP.
pub fn hub_offer(ws: &mut Ws, sdp: &str) -> Result<String, String> {
    send(ws, json!({"type": "hub-offer", "sdp": sdp}))?;
    let answer = expect(ws, "hub-answer")?;
    answer["sdp"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("hub-answer without sdp: {answer}"))
}

/// Peer id and token for member `i` of room `r` (unique per room, as the server asks).
pub fn member_id(r: usize, i: usize) -> String {
    format!("{:032x}", ((r as u128) << 32 | i as u128) + 1)
}

/// The thread that keeps connections open until it is stopped.
pub struct Keeper {
    add: Option<Sender<Ws>>,
    stop: Arc<AtomicBool>,
    closed: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl Keeper {
    pub fn start() -> Result<Keeper, String> {
        let (tx, rx) = mpsc::channel::<Ws>();
        let stop = Arc::new(AtomicBool::new(false));
        let closed = Arc::new(AtomicUsize::new(0));
        let (stopped, closed_by_server) = (Arc::clone(&stop), Arc::clone(&closed));
        let thread = thread::Builder::new()
            .name("loadgen-signal".into())
            .spawn(move || {
                let mut all: Vec<Ws> = Vec::new();
                while !stopped.load(Ordering::Relaxed) {
                    all.extend(rx.try_iter());
                    all.retain_mut(|ws| {
                        let open = keep_reading(ws);
                        if !open {
                            closed_by_server.fetch_add(1, Ordering::Relaxed);
                        }
                        open
                    });
                    thread::sleep(KEEP_TICK);
                }
                all.extend(rx.try_iter());
                for ws in &mut all {
                    let _ = ws.close(None);
                    let _ = ws.flush();
                }
            })
            .map_err(|e| format!("signaling thread: {e}"))?;
        Ok(Keeper {
            add: Some(tx),
            stop,
            closed,
            thread: Some(thread),
        })
    }

    /// Keeps `ws` open (read from now on by the keeper, non-blocking) until [`Keeper::stop`].
    pub fn keep(&self, ws: Ws) -> Result<(), String> {
        ws.get_ref()
            .set_nonblocking(true)
            .map_err(|e| format!("non-blocking signaling: {e}"))?;
        self.add
            .as_ref()
            .and_then(|tx| tx.send(ws).ok())
            .ok_or_else(|| "the signaling thread ended".to_owned())
    }

    /// Connections the server closed so far (each one a member it dropped).
    pub fn closed(&self) -> usize {
        self.closed.load(Ordering::Relaxed)
    }

    /// Closes every connection and ends the thread (once).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.add = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads everything waiting on `ws` and sends what the reads queued (pongs); false once the
/// connection is closed.
fn keep_reading(ws: &mut Ws) -> bool {
    loop {
        match ws.read() {
            Ok(_) => {}
            Err(e) if waited(&e) => break,
            Err(_) => return false,
        }
    }
    match ws.flush() {
        Ok(()) => true,
        Err(e) => waited(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_ids_are_32_hex_digits_and_distinct() {
        let a = member_id(0, 0);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(member_id(1, 0), member_id(0, 1));
        assert_ne!(member_id(0, 0), member_id(0, 1));
    }
}
