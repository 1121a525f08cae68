//! One task per WebSocket connection: reads and answers messages, pings, watches for silence,
//! and leaves its room when it ends. A second task writes the connection's outbound queue to the
//! socket, so a slow socket never holds up the room (see [`crate::rooms`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

use crate::log::{event, short_peer};
use crate::protocol::{self, ClientMessage, LeaveReason, ProtocolError};
use crate::ratelimit::{RateLimiter, Verdict};
use crate::rooms::{not_joined, Joined, Outbound, Outbox};
use crate::App;

/// Messages queued for one connection before it counts as too slow and is closed.
const OUTBOX_CAPACITY: usize = 256;
/// How long a closing connection may take to flush its last messages and close frame.
const CLOSE_FLUSH: Duration = Duration::from_secs(1);

/// Counts a live connection; decrements the server's count when dropped.
pub struct ConnectionSlot(Arc<App>);

impl ConnectionSlot {
    fn acquire(app: &Arc<App>) -> Option<Self> {
        let taken = app
            .connections
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < app.max_connections).then_some(n + 1)
            });
        taken.ok().map(|_| Self(app.clone()))
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        if self.0.connections.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// `GET /ws`: upgrades unless the server is at its connection cap (503).
pub async fn upgrade(State(app): State<Arc<App>>, ws: WebSocketUpgrade) -> Response {
    let Some(slot) = ConnectionSlot::acquire(&app) else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "Too many connections; try again later.\n",
        )
            .into_response();
    };
    let max = app.max_message_bytes;
    ws.max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| run(socket, slot))
}

/// How a connection ended.
enum End {
    /// The socket closed or failed.
    Closed,
    /// Nothing arrived for the heartbeat timeout.
    Timeout,
    /// Its outbound queue overflowed.
    TooSlow,
    /// We closed it (a close frame is queued).
    ClosedByServer,
    /// The server is shutting down (a close frame is queued).
    Shutdown,
}

/// What the reader does after a message.
enum Flow {
    Continue,
    /// Close with this code after queuing the error already sent.
    Close(u16, &'static str),
}

struct Connection {
    app: Arc<App>,
    outbox: Outbox,
    limiter: RateLimiter,
    /// (room, peer) once joined.
    joined: Option<(String, String)>,
}

async fn run(socket: WebSocket, slot: ConnectionSlot) {
    let app = slot.0.clone();
    let id = app.next_connection_id.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = mpsc::channel(OUTBOX_CAPACITY);
    let kill = Arc::new(Notify::new());
    let outbox = Outbox::new(id, tx, kill.clone());
    let (sink, mut stream) = socket.split();
    let mut writer = tokio::spawn(write_loop(sink, rx));
    let mut conn = Connection {
        limiter: RateLimiter::new(app.rate, app.burst, Instant::now().into_std()),
        app: app.clone(),
        outbox,
        joined: None,
    };
    let mut shutdown = app.shutdown.clone();
    let mut heartbeat = tokio::time::interval_at(Instant::now() + app.heartbeat, app.heartbeat);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let silence = tokio::time::sleep(app.heartbeat_timeout);
    tokio::pin!(silence);

    let end = loop {
        if *shutdown.borrow_and_update() {
            conn.close_with(
                ProtocolError::new("shutting-down", "The server is shutting down."),
                1001,
                "shutting down",
            );
            break End::Shutdown;
        }
        tokio::select! {
            msg = stream.next() => {
                let msg = match msg {
                    None => break End::Closed,
                    Some(Ok(msg)) => msg,
                    Some(Err(e)) => {
                        if is_too_large(e) {
                            conn.close_with(ProtocolError::new(
                                "too-large",
                                format!(
                                    "Messages may be at most {} bytes long.",
                                    app.max_message_bytes
                                ),
                            ), 1009, "message too large");
                            conn.log_close("too-large");
                            break End::ClosedByServer;
                        }
                        break End::Closed;
                    }
                };
                silence.as_mut().reset(Instant::now() + app.heartbeat_timeout);
                let flow = match msg {
                    Message::Text(text) => conn.on_data(Some(text.as_str())),
                    Message::Binary(_) => conn.on_data(None),
                    Message::Ping(_) | Message::Pong(_) => Flow::Continue,
                    Message::Close(_) => break End::Closed,
                };
                if let Flow::Close(code, reason) = flow {
                    conn.outbox.send(Outbound::Close(code, reason));
                    conn.log_close(reason);
                    break End::ClosedByServer;
                }
            }
            _ = heartbeat.tick() => conn.outbox.send(Outbound::Ping),
            () = &mut silence => {
                conn.outbox.send(Outbound::Close(1001, "timeout"));
                break End::Timeout;
            }
            () = kill.notified() => {
                conn.log_close("outbound queue full");
                break End::TooSlow;
            }
            changed = shutdown.changed() => {
                if changed.is_err() {
                    // The server is gone without saying so; treat it as a shutdown.
                    conn.close_with(ProtocolError::new(
                        "shutting-down",
                        "The server is shutting down.",
                    ), 1001, "shutting down");
                    break End::Shutdown;
                }
            }
        }
    };

    if let Some((room, peer)) = conn.joined.take() {
        match end {
            // Every member is going at once, and each is still connected to the others peer to
            // peer: telling them that the others left would make them hang up on each other.
            // They rejoin with the same identity when the server is back.
            End::Shutdown => conn.forget(&room, &peer),
            End::Timeout => conn.leave(&room, &peer, LeaveReason::Timeout),
            _ => conn.leave(&room, &peer, LeaveReason::Closed),
        }
    }
    drop(conn);
    // A connection too slow to drain its queue gets no goodbye; the others get up to
    // CLOSE_FLUSH to send what is queued, ending with the close frame.
    let flushed = !matches!(end, End::TooSlow)
        && tokio::time::timeout(CLOSE_FLUSH, &mut writer).await.is_ok();
    if !flushed {
        writer.abort();
    }
    drop(slot);
}

/// Whether a read error is tungstenite refusing a message or frame over the size limit.
fn is_too_large(e: axum::Error) -> bool {
    matches!(
        e.into_inner().downcast_ref::<tungstenite::Error>(),
        Some(tungstenite::Error::Capacity(_))
    )
}

async fn write_loop(mut sink: SplitSink<WebSocket, Message>, mut rx: mpsc::Receiver<Outbound>) {
    while let Some(out) = rx.recv().await {
        let (msg, last) = match out {
            Outbound::Text(t) => (Message::Text(t.into()), false),
            Outbound::Ping => (Message::Ping(Bytes::new()), false),
            Outbound::Close(code, reason) => (
                Message::Close(Some(CloseFrame {
                    code,
                    reason: reason.into(),
                })),
                true,
            ),
        };
        if sink.send(msg).await.is_err() || last {
            break;
        }
    }
}

impl Connection {
    fn send_error(&self, e: ProtocolError) {
        self.outbox.send_text(e.to_json());
    }

    fn close_with(&self, e: ProtocolError, code: u16, reason: &'static str) {
        self.send_error(e);
        self.outbox.send(Outbound::Close(code, reason));
    }

    fn log_close(&self, why: &str) {
        match &self.joined {
            Some((room, peer)) => event(&format!(
                "close room={room} peer={} reason={why:?}",
                short_peer(peer)
            )),
            None => event(&format!("close conn={} reason={why:?}", self.outbox.id())),
        }
    }

    /// A text (`Some`) or binary (`None`) message.
    fn on_data(&mut self, text: Option<&str>) -> Flow {
        match self.limiter.check(Instant::now().into_std()) {
            Verdict::Accept => {}
            Verdict::Drop { notify } => {
                if notify {
                    self.send_error(ProtocolError::new(
                        "rate-limited",
                        format!(
                            "Too many messages: at most {} per second (bursts of {}); some \
                             were dropped.",
                            self.app.rate, self.app.burst
                        ),
                    ));
                }
                return Flow::Continue;
            }
            Verdict::Close => {
                self.send_error(ProtocolError::new(
                    "rate-limited",
                    "Too many messages for too long; closing the connection.",
                ));
                return Flow::Close(1008, "rate limit");
            }
        }
        let Some(text) = text else {
            self.send_error(ProtocolError::new(
                "bad-message",
                "Binary messages are not part of the protocol.",
            ));
            return Flow::Continue;
        };
        if text.len() > self.app.max_message_bytes {
            self.send_error(ProtocolError::new(
                "too-large",
                format!(
                    "Messages may be at most {} bytes long.",
                    self.app.max_message_bytes
                ),
            ));
            return Flow::Close(1009, "message too large");
        }
        match protocol::parse(text) {
            Ok(msg) => self.on_message(msg),
            Err(e) => self.send_error(e),
        }
        Flow::Continue
    }

    fn on_message(&mut self, msg: ClientMessage) {
        match msg {
            ClientMessage::Ping { t } => self.outbox.send_text(protocol::pong(t)),
            ClientMessage::Join(join) => {
                if let Some((room, _)) = &self.joined {
                    self.send_error(ProtocolError::new(
                        "already-joined",
                        format!("This connection is already in room \"{room}\"; leave it first."),
                    ));
                    return;
                }
                match self.app.rooms.join(&join, &self.outbox) {
                    Ok(joined) => {
                        let (what, members) = match joined {
                            Joined::New { members } => ("join", members),
                            Joined::Replaced { members } => ("rejoin", members),
                        };
                        event(&format!(
                            "{what} room={} peer={} name={:?} members={members}",
                            join.room,
                            short_peer(&join.peer),
                            join.name
                        ));
                        self.joined = Some((join.room, join.peer));
                    }
                    Err(e) => self.send_error(e),
                }
            }
            ClientMessage::Signal { to, data } => match &self.joined {
                Some((room, peer)) => {
                    let sent = self
                        .app
                        .rooms
                        .signal(room, peer, self.outbox.id(), &to, data);
                    if let Err(e) = sent {
                        self.send_error(e);
                    }
                }
                None => self.send_error(not_joined()),
            },
            ClientMessage::Leave => match self.joined.take() {
                Some((room, peer)) => self.leave(&room, &peer, LeaveReason::Left),
                None => self.send_error(not_joined()),
            },
            ClientMessage::Lock { .. } | ClientMessage::Remove { .. } => match &self.joined {
                Some(_) => self.send_error(ProtocolError::new(
                    "not-owner",
                    "Only the room's owner can lock it or remove members.",
                )),
                None => self.send_error(not_joined()),
            },
        }
    }

    fn forget(&self, room: &str, peer: &str) {
        if let Some(members) = self.app.rooms.forget(room, peer, self.outbox.id()) {
            event(&format!(
                "leave room={room} peer={} reason=shutdown members={members}",
                short_peer(peer)
            ));
        }
    }

    fn leave(&self, room: &str, peer: &str, reason: LeaveReason) {
        if let Some(members) = self.app.rooms.leave(room, peer, self.outbox.id(), reason) {
            event(&format!(
                "leave room={room} peer={} reason={} members={members}",
                short_peer(peer),
                reason.as_str()
            ));
        }
    }
}
