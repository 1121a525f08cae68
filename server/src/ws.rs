//! One task per WebSocket connection: reads and answers messages, pings, watches for silence
//! and for a join that never comes, and leaves its room when it ends. A second task writes the
//! connection's outbound queue to the socket, so a slow socket never holds up the room (see
//! [`crate::rooms`]); the queue is bounded in bytes (see [`crate::budget`]).
//!
//! Before upgrading, `GET /ws` checks the page's origin ([`crate::origin`]) and the client
//! address's share of connections ([`crate::limits`]).
//!
//! Closing: the server queues a close frame with its code, then keeps reading (and discarding)
//! until the client's close frame arrives or [`CLOSE_FLUSH`] passes, so the client receives the
//! code instead of a connection reset; a receiver too slow to take even the close frame is cut
//! off after [`CLOSE_FLUSH`].

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

use crate::attempts::{Limit, Refusal as AttemptRefusal};
use crate::budget::{self, QueueBudget, MESSAGE_OVERHEAD};
use crate::hub;
use crate::hub::controller::Report;
use crate::hub::signal::Topology;
use crate::hub::uplink::UplinkReport;
use crate::limits::{AddressKey, Refusal};
use crate::log::short_peer;
use crate::mesh_layers::MeshRules;
use crate::password;
use crate::protocol::{self, ClientMessage, Join, LeaveReason, ProtocolError};
use crate::ratelimit::{RateLimiter, Verdict};
use crate::rooms::{not_joined, Joined, Outbound, Outbox, Proof, RoomId, Step};
use crate::{unix_ms, App};

/// How long a closing connection may take to send its last messages and close frame, and to
/// receive the client's close frame.
pub const CLOSE_FLUSH: Duration = Duration::from_secs(1);
/// Bytes read from the socket at a time. Small, because every open connection holds one such
/// buffer; larger messages still arrive whole.
const READ_BUFFER_BYTES: usize = 8 * 1024;
/// How long a join waits for a free password-hashing slot before it is told to retry.
const HASH_QUEUE_WAIT: Duration = Duration::from_secs(3);
/// What a join that found no free hashing slot is told to wait.
const HASH_BUSY_RETRY: Duration = Duration::from_secs(1);
/// A join retries this many times when the room changed while its password was being hashed.
const JOIN_STEPS: usize = 4;

/// Counts a live connection against the limits; releases it when dropped.
pub struct ConnectionSlot {
    app: Arc<App>,
    key: AddressKey,
}

impl ConnectionSlot {
    fn acquire(app: &Arc<App>, key: AddressKey) -> Result<Self, Refusal> {
        app.limits().admit(key, Instant::now().into_std())?;
        Ok(Self {
            app: app.clone(),
            key,
        })
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let open = {
            let mut limits = self.app.limits();
            limits.release(self.key);
            limits.open()
        };
        if open == 0 {
            self.app.idle.notify_waiters();
        }
    }
}

fn plain(status: StatusCode, text: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        text,
    )
        .into_response()
}

/// The answer to an upgrade the limits refused.
fn refusal_response(refusal: Refusal) -> Response {
    match refusal {
        Refusal::ServerFull | Refusal::TooManyAddresses => plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "Too many connections; try again later.\n".into(),
        ),
        Refusal::AddressFull => plain(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many connections from your network; close some and try again.\n".into(),
        ),
        Refusal::TooFast { retry_after } => {
            let secs = retry_after.as_secs_f64().ceil().max(1.0) as u64;
            let mut r = plain(
                StatusCode::TOO_MANY_REQUESTS,
                format!("Too many new connections from your network; try again in {secs} s.\n"),
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
            r
        }
    }
}

/// `GET /ws`: upgrades unless the page's origin is not allowed (403), the server is full
/// (503) or the client's address has its share or opens connections too fast (429).
pub async fn upgrade(
    State(app): State<Arc<App>>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let key = AddressKey::of(addr.ip());
    let origin = headers.get(header::ORIGIN).map(HeaderValue::as_bytes);
    let host = headers.get(header::HOST).map(HeaderValue::as_bytes);
    if !app.origins.allows(origin, host) {
        let shown: String = String::from_utf8_lossy(origin.unwrap_or_default())
            .chars()
            .take(80)
            .collect();
        app.note_refusal(
            key,
            "origin",
            &format!("status=403 reason=origin origin={shown:?}"),
        );
        return plain(
            StatusCode::FORBIDDEN,
            "Pages from this origin may not connect to this server (see --allowed-origin).\n"
                .into(),
        );
    }
    let slot = match ConnectionSlot::acquire(&app, key) {
        Ok(slot) => slot,
        Err(refusal) => {
            let response = refusal_response(refusal);
            let detail = format!(
                "status={} reason={}",
                response.status().as_u16(),
                refusal.kind()
            );
            app.note_refusal(key, refusal.kind(), &detail);
            return response;
        }
    };
    let max = app.max_message_bytes;
    ws.max_message_size(max)
        .max_frame_size(max)
        .read_buffer_size(READ_BUFFER_BYTES)
        .on_upgrade(move |socket| run(socket, slot, addr))
}

/// How a connection ended.
enum End {
    /// The socket closed or failed, or the client sent a close frame.
    Closed,
    /// Nothing arrived for the heartbeat timeout (a close frame is queued).
    Timeout,
    /// Its outbound queue overflowed; the writer is told to send 1013.
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
    addr: SocketAddr,
    /// The client's IP address (IPv4-mapped IPv6 addresses as IPv4), for the password limits.
    ip: IpAddr,
    outbox: Outbox,
    limiter: RateLimiter,
    /// (room, peer) once joined.
    joined: Option<(RoomId, String)>,
}

async fn run(socket: WebSocket, slot: ConnectionSlot, addr: SocketAddr) {
    let app = slot.app.clone();
    let id = app.next_connection_id.fetch_add(1, Ordering::Relaxed);
    // The byte budget bounds the queue; the message count only backs it up.
    let (tx, rx) = mpsc::channel(app.outbound_bytes_per_connection / MESSAGE_OVERHEAD + 2);
    let kill = Arc::new(Notify::new());
    let budget = Arc::new(QueueBudget::new(
        app.outbound_bytes_per_connection,
        app.outbound_bytes_total.clone(),
    ));
    let outbox = Outbox::new(id, tx, kill.clone()).with_budget(budget.clone());
    let (sink, mut stream) = socket.split();
    let hurry = Arc::new(Notify::new());
    let mut writer = tokio::spawn(write_loop(sink, rx, budget, hurry.clone()));
    let writer_gone = outbox.clone();
    let mut conn = Connection {
        limiter: RateLimiter::new(app.rate, app.burst, Instant::now().into_std()),
        app: app.clone(),
        addr,
        ip: addr.ip().to_canonical(),
        outbox,
        joined: None,
    };
    let mut shutdown = app.shutdown.clone();
    let mut heartbeat = tokio::time::interval_at(Instant::now() + app.heartbeat, app.heartbeat);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let silence = tokio::time::sleep(app.heartbeat_timeout);
    tokio::pin!(silence);
    // Runs while the connection is in no room: from the start, and again after a leave.
    let join_deadline = tokio::time::sleep(app.join_timeout);
    tokio::pin!(join_deadline);

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
                let was_joined = conn.joined.is_some();
                let flow = match msg {
                    Message::Text(text) => conn.on_data(Some(text.as_str())).await,
                    Message::Binary(_) => conn.on_data(None).await,
                    Message::Ping(_) | Message::Pong(_) => Flow::Continue,
                    Message::Close(_) => break End::Closed,
                };
                if let Flow::Close(code, reason) = flow {
                    conn.outbox.send(Outbound::Close(code, reason));
                    conn.log_close(reason);
                    break End::ClosedByServer;
                }
                if was_joined && conn.joined.is_none() {
                    join_deadline.as_mut().reset(Instant::now() + app.join_timeout);
                }
            }
            _ = heartbeat.tick() => conn.outbox.send(Outbound::Ping),
            () = &mut silence => {
                conn.outbox.send(Outbound::Close(1001, "timeout"));
                conn.log_close("heartbeat timeout");
                break End::Timeout;
            }
            () = &mut join_deadline, if conn.joined.is_none() => {
                conn.outbox.send(Outbound::Close(1008, "join deadline"));
                conn.log_close("join deadline");
                break End::ClosedByServer;
            }
            () = kill.notified() => {
                conn.log_close("too slow: outbound queue over its byte budget");
                break End::TooSlow;
            }
            // The writer stopped: a close frame was sent on the room's behalf (replaced,
            // removed) or the socket failed. Nothing more can reach the client.
            () = writer_gone.closed() => break End::Closed,
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
    if matches!(end, End::TooSlow) {
        hurry.notify_one();
    }
    // The writer sends what is queued, ending with the close frame (a too slow one drops its
    // queue and sends only the close frame); meanwhile input is read and discarded until the
    // client's own close frame. Both within CLOSE_FLUSH.
    let writing = async {
        if tokio::time::timeout(CLOSE_FLUSH, &mut writer)
            .await
            .is_err()
        {
            writer.abort();
        }
    };
    tokio::join!(writing, drain(&mut stream));
    drop(stream);
    drop(slot);
}

/// Reads and discards messages until the client's close frame, the end of the stream or
/// [`CLOSE_FLUSH`], so that unread input does not make the kernel reset the connection (which
/// would lose the close frame on its way to the client).
async fn drain(stream: &mut SplitStream<WebSocket>) {
    let _ = tokio::time::timeout(CLOSE_FLUSH, async {
        while let Some(Ok(msg)) = stream.next().await {
            if let Message::Close(_) = msg {
                // One more read sends tungstenite's reply, if the client closed first.
                let _ = stream.next().await;
                break;
            }
        }
    })
    .await;
}

/// Whether a read error is tungstenite refusing a message or frame over the size limit.
fn is_too_large(e: axum::Error) -> bool {
    matches!(
        e.into_inner().downcast_ref::<tungstenite::Error>(),
        Some(tungstenite::Error::Capacity(_))
    )
}

fn close_message(code: u16, reason: &'static str) -> Message {
    Message::Close(Some(CloseFrame {
        code,
        reason: reason.into(),
    }))
}

/// Writes the queue to the socket, returning each message's bytes to the budget once the
/// socket has taken it. When `hurry` is notified (the connection is too slow), drops the queue
/// and sends only a 1013 close frame.
async fn write_loop(
    mut sink: SplitSink<WebSocket, Message>,
    mut rx: mpsc::Receiver<Outbound>,
    budget: Arc<QueueBudget>,
    hurry: Arc<Notify>,
) {
    let too_slow = async {
        loop {
            let out = tokio::select! {
                biased;
                () = hurry.notified() => return true,
                out = rx.recv() => match out {
                    Some(out) => out,
                    None => return false,
                },
            };
            let cost = budget::cost(&out);
            let (msg, last) = match out {
                Outbound::Text(t) => (Message::Text(t.into()), false),
                Outbound::Ping => (Message::Ping(Bytes::new()), false),
                Outbound::Close(code, reason) => (close_message(code, reason), true),
            };
            let sent = tokio::select! {
                biased;
                () = hurry.notified() => {
                    budget.release(cost);
                    return true;
                }
                sent = sink.send(msg) => sent.is_ok(),
            };
            budget.release(cost);
            if !sent || last {
                return false;
            }
        }
    }
    .await;
    if too_slow {
        rx.close();
        while let Ok(out) = rx.try_recv() {
            budget.release(budget::cost(&out));
        }
        // A frame cut short above is completed first; the caller's deadline bounds this.
        let _ = sink.send(close_message(1013, "too slow")).await;
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

    fn log_close(&self, why: &'static str) {
        match &self.joined {
            Some((room, peer)) => tracing::info!(
                "close room={room} peer={} reason={why:?} addr={}",
                short_peer(peer),
                self.addr
            ),
            // Connections in no room are cheap to open: throttle their lines like refusals.
            None => self.app.note_unjoined_close(
                AddressKey::of(self.addr.ip()),
                why,
                &format!(
                    "conn={} reason={why:?} client={}",
                    self.outbox.id(),
                    self.addr
                ),
            ),
        }
    }

    /// A text (`Some`) or binary (`None`) message.
    async fn on_data(&mut self, text: Option<&str>) -> Flow {
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
            Ok(msg) => self.on_message(msg).await,
            Err(e) => {
                self.send_error(e);
                Flow::Continue
            }
        }
    }

    async fn on_message(&mut self, msg: ClientMessage) -> Flow {
        match msg {
            ClientMessage::Ping { t } => self.outbox.send_text(protocol::pong(t)),
            ClientMessage::Join(join) => return self.join(join).await,
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
            ClientMessage::Lock { locked } => match &self.joined {
                Some((room, peer)) => {
                    match self
                        .app
                        .rooms
                        .set_locked(room, peer, self.outbox.id(), locked)
                    {
                        Ok(()) => tracing::info!(
                            "{} room={room} by={}",
                            if locked { "lock" } else { "unlock" },
                            short_peer(peer)
                        ),
                        Err(e) => self.send_error(e),
                    }
                }
                None => self.send_error(not_joined()),
            },
            ClientMessage::Remove { peer: target } => match &self.joined {
                Some((room, peer)) => {
                    let removed = self.app.rooms.remove_member(
                        room,
                        peer,
                        self.outbox.id(),
                        &target,
                        unix_ms(),
                    );
                    match removed {
                        Ok(members) => {
                            if let Some(hub) = &self.app.hub {
                                hub.leave(room, &target);
                            }
                            tracing::info!(
                                "remove room={room} peer={} by={} members={members}",
                                short_peer(&target),
                                short_peer(peer)
                            )
                        }
                        Err(e) => self.send_error(e),
                    }
                }
                None => self.send_error(not_joined()),
            },
            ClientMessage::HubOffer { sdp, echo } => self.hub_offer(sdp, echo).await,
            ClientMessage::Topology { mode } => self.set_topology(mode),
            ClientMessage::Uplink(report) => self.uplink(&report),
            ClientMessage::HubMix(mix) => match (&self.joined, &self.app.hub) {
                (Some((room, peer)), Some(hub)) => hub.set_mix(room, peer, mix),
                (None, _) => self.send_error(not_joined()),
                (_, None) => self.send_error(hub_unavailable("This server runs no hub.")),
            },
            ClientMessage::Reception(report) => self.reception(&report),
        }
        Flow::Continue
    }

    /// The owner moves the room to `mode`; the hub follows.
    fn set_topology(&self, mode: Topology) {
        let Some((room, peer)) = &self.joined else {
            return self.send_error(not_joined());
        };
        let changed = match self
            .app
            .rooms
            .set_topology(room, peer, self.outbox.id(), mode)
        {
            Err(e) => return self.send_error(e),
            Ok(changed) => changed,
        };
        if let (Some(hub), Some(mode)) = (&self.app.hub, mode.hub_mode()) {
            hub.set_mode(room, mode);
        }
        if changed {
            let (mode, by) = (mode.as_str(), short_peer(peer));
            tracing::info!("topology room={room} mode={mode} by={by}");
        }
    }

    /// A listener's report of what reaches it: for the mesh's controllers while the room is a
    /// mesh, else for the hub's.
    fn reception(&self, report: &Report) {
        let Some((room, peer)) = &self.joined else {
            return self.send_error(not_joined());
        };
        let rules = MeshRules {
            policy: self.app.layer_policy,
            hub: self.app.hub.is_some(),
        };
        match self
            .app
            .rooms
            .reception(room, peer, self.outbox.id(), report, rules, unix_ms())
        {
            Err(e) => self.send_error(e),
            Ok(true) => {}
            Ok(false) => match &self.app.hub {
                Some(hub) => hub.reception(room, peer, *report),
                None => self.send_error(hub_unavailable("This server runs no hub.")),
            },
        }
    }

    /// A member's report that the mesh no longer fits its uplink: the room may move to the hub.
    fn uplink(&self, report: &UplinkReport) {
        let Some((room, peer)) = &self.joined else {
            return self.send_error(not_joined());
        };
        let allowed = self.app.hub_auto && self.app.hub.is_some();
        match self
            .app
            .rooms
            .uplink_report(room, peer, self.outbox.id(), report, allowed)
        {
            Err(e) => self.send_error(e),
            Ok(None) => {}
            Ok(Some(reason)) => {
                if let Some(hub) = &self.app.hub {
                    hub.set_mode(room, hub::Mode::Forward);
                }
                let by = short_peer(peer);
                tracing::info!("topology room={room} mode=forward by={by} auto: {reason}");
            }
        }
    }

    /// A member's offer for its link to the hub: answered with the hub's SDP.
    async fn hub_offer(&mut self, sdp: String, echo: bool) {
        let Some((room, peer)) = &self.joined else {
            return self.send_error(not_joined());
        };
        let Some(hub) = &self.app.hub else {
            return self.send_error(hub_unavailable("This server runs no hub."));
        };
        let (stream, topology) = match self.app.rooms.hub_member(room, peer, self.outbox.id()) {
            Ok(found) => found,
            Err(e) => return self.send_error(e),
        };
        let mode = topology.hub_mode().unwrap_or(hub::Mode::Forward);
        match hub.offer(room, peer, stream, mode, sdp, echo).await {
            Ok(answer) => {
                tracing::info!(
                    "hub link room={room} peer={} stream={stream} mode={}{}",
                    short_peer(peer),
                    topology.as_str(),
                    if echo { " echo" } else { "" }
                );
                self.outbox.send_text(hub::signal::answer(&answer));
            }
            Err(e) => self.send_error(hub_unavailable(&e.message())),
        }
    }

    /// A join: the rooms say whether a password must be checked or hashed first; that
    /// happens here, on a blocking thread, after the limiter agreed, and the join goes on with
    /// the result.
    async fn join(&mut self, join: Join) -> Flow {
        if let Some((room, _)) = &self.joined {
            self.send_error(ProtocolError::new(
                "already-joined",
                format!(
                    "This connection is already in room \"{}\"; leave it first.",
                    room.name
                ),
            ));
            return Flow::Continue;
        }
        let id = RoomId::new(&join.room, join.key.as_deref());
        let mut proof = Proof::None;
        for _ in 0..JOIN_STEPS {
            let step = self.app.rooms.join(&join, &self.outbox, &proof, unix_ms());
            match step {
                Ok(Step::Joined(joined)) => {
                    let (what, members) = match joined {
                        Joined::Created => ("join", 1),
                        Joined::New { members } => ("join", members),
                        Joined::Replaced { members } => ("rejoin", members),
                    };
                    let created = if joined == Joined::Created {
                        format!(" created password={}", yes_no(join.password.is_some()))
                    } else {
                        String::new()
                    };
                    tracing::info!(
                        "{what} room={id} peer={} name={:?} members={members}{created} addr={}",
                        short_peer(&join.peer),
                        join.name,
                        self.addr
                    );
                    self.joined = Some((id, join.peer));
                    return Flow::Continue;
                }
                Ok(Step::Verify(hash)) => {
                    let password = join.password.clone().unwrap_or_default();
                    match self.verify(&id, hash.clone(), password).await {
                        Ok(()) => proof = Proof::Verified(hash),
                        Err(e) => {
                            self.send_error(e);
                            return Flow::Continue;
                        }
                    }
                }
                Ok(Step::Hash) => {
                    let password = join.password.clone().unwrap_or_default();
                    match self.hash(&id, password).await {
                        Ok(hash) => proof = Proof::Hashed(hash),
                        Err(e) => {
                            self.send_error(e);
                            return Flow::Continue;
                        }
                    }
                }
                Err(e) => {
                    let removed = e.code == "removed";
                    self.send_error(e);
                    if removed {
                        return Flow::Close(protocol::CLOSE_REMOVED, "removed");
                    }
                    return Flow::Continue;
                }
            }
        }
        // Only if the room was re-created with another password between every step.
        self.send_error(ProtocolError::too_many_attempts(
            HASH_BUSY_RETRY.as_millis() as u64,
            "The room changed while you were joining; try again.",
        ));
        Flow::Continue
    }

    /// Checks `password` against a room's `hash` if the limiter allows it.
    async fn verify(
        &self,
        id: &RoomId,
        hash: Arc<str>,
        password: String,
    ) -> Result<(), ProtocolError> {
        let tag = id.tag();
        let began = lock(&self.app.attempts).begin(self.ip, &tag, std::time::Instant::now());
        let attempt = match began {
            Ok(attempt) => attempt,
            Err(refusal) => return Err(self.refused(id, refusal)),
        };
        let checked = self
            .on_hash_thread(move || password::verify_password(&hash, &password))
            .await;
        let now = std::time::Instant::now();
        match checked {
            Some(true) => {
                lock(&self.app.attempts).finish(attempt, true, now);
                Ok(())
            }
            Some(false) => {
                lock(&self.app.attempts).finish(attempt, false, now);
                if let Some(held) = lock(&self.app.failure_log).admit(now) {
                    tracing::info!(
                        "password wrong room={id} addr={}{}",
                        self.ip,
                        held_back(held)
                    );
                }
                Err(ProtocolError::new(
                    "wrong-password",
                    format!("Wrong password for room \"{}\".", id.name),
                ))
            }
            None => {
                lock(&self.app.attempts).cancel(attempt);
                Err(busy())
            }
        }
    }

    /// Hashes a new room's password if the address's hash budget allows it.
    async fn hash(&self, id: &RoomId, password: String) -> Result<String, ProtocolError> {
        let began = lock(&self.app.attempts).begin_hash(self.ip, std::time::Instant::now());
        if let Err(refusal) = began {
            return Err(self.refused(id, refusal));
        }
        match self
            .on_hash_thread(move || password::hash_password(&password))
            .await
        {
            Some(Ok(hash)) => Ok(hash),
            Some(Err(e)) => {
                tracing::warn!("password hashing failed room={id}: {e}");
                Err(ProtocolError::new(
                    "bad-message",
                    "The server could not set the room password; try again.",
                ))
            }
            None => Err(busy()),
        }
    }

    /// Runs `f` on a blocking thread once one of the server's hashing slots is free; `None`
    /// if none became free within [`HASH_QUEUE_WAIT`] (or the thread failed).
    async fn on_hash_thread<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let slot = tokio::time::timeout(HASH_QUEUE_WAIT, self.app.hash_slots.acquire())
            .await
            .ok()?
            .ok()?;
        let result = tokio::task::spawn_blocking(f).await.ok();
        drop(slot);
        result
    }

    /// The error for an attempt the limiter refused, logged within the log budget.
    fn refused(&self, id: &RoomId, refusal: AttemptRefusal) -> ProtocolError {
        let ms = u64::try_from(refusal.retry_after.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        if let Some(held) = lock(&self.app.refusal_log).admit(std::time::Instant::now()) {
            tracing::info!(
                "password refused room={id} addr={} limit={} retry_after_ms={ms}{}",
                self.ip,
                refusal.limit.as_str(),
                held_back(held)
            );
        }
        let wait = wait_text(refusal.retry_after);
        let message = match refusal.limit {
            Limit::Address => {
                format!("Too many wrong passwords from your network; try again in {wait}.")
            }
            Limit::Room => format!(
                "Room \"{}\" has seen too many wrong passwords; try again in {wait}.",
                id.name
            ),
            Limit::Hashes => {
                format!("Too many password checks from your network; try again in {wait}.")
            }
        };
        ProtocolError::too_many_attempts(ms, message)
    }

    fn forget(&self, room: &RoomId, peer: &str) {
        if let Some(members) = self
            .app
            .rooms
            .forget(room, peer, self.outbox.id(), unix_ms())
        {
            tracing::info!(
                "leave room={room} peer={} reason=shutdown members={members} addr={}",
                short_peer(peer),
                self.addr
            );
        }
    }

    fn leave(&self, room: &RoomId, peer: &str, reason: LeaveReason) {
        if let Some(members) = self
            .app
            .rooms
            .leave(room, peer, self.outbox.id(), reason, unix_ms())
        {
            if let Some(hub) = &self.app.hub {
                hub.leave(room, peer);
            }
            tracing::info!(
                "leave room={room} peer={} reason={} members={members} addr={}",
                short_peer(peer),
                reason.as_str(),
                self.addr
            );
        }
    }
}

fn hub_unavailable(message: &str) -> ProtocolError {
    ProtocolError::new("hub-unavailable", message)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The limiter and log budgets stay consistent if a holder panicked.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn busy() -> ProtocolError {
    ProtocolError::too_many_attempts(
        HASH_BUSY_RETRY.as_millis() as u64,
        "The server is busy checking passwords; try again in a second.",
    )
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// " (N similar lines held back)" when N > 0.
fn held_back(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" ({n} similar lines held back)")
    }
}

/// A wait for people: "3 s", "2 min".
fn wait_text(d: Duration) -> String {
    let s = d.as_secs_f64().ceil() as u64;
    if s < 120 {
        format!("{} s", s.max(1))
    } else {
        format!("{} min", s.div_ceil(60))
    }
}
