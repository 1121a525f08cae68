//! The signaling protocol on /ws, against an in-process server.

mod common;

use std::time::{Duration, Instant};

use common::{hex_id, message_rate, Client, TestServer};
use futures_util::SinkExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

#[tokio::test]
async fn join_welcome_and_peer_joined() {
    let server = TestServer::start(|_| {}).await;
    let mut a = server.ws().await;
    let mut b = server.ws().await;
    let w = a.join("jam", "Ana", 'a', '1', None).await;
    for (field, value) in [
        ("type", json!("welcome")),
        ("room", json!("jam")),
        ("peer", json!(hex_id('a'))),
        ("peers", json!([])),
        ("cap", json!(16)),
        ("locked", json!(false)),
        ("protected", json!(false)),
    ] {
        assert_eq!(w[field], value, "{field} in {w}");
    }
    let w = b.join("jam", "  Bo ", 'b', '2', None).await;
    assert_eq!(
        w["peers"],
        json!([{"peer": hex_id('a'), "name": "Ana", "stream": 1}])
    );
    assert_eq!(
        a.recv().await,
        json!({"type": "peer-joined", "peer": hex_id('b'), "name": "Bo", "stream": 2})
    );
    // Same peer id with another token: refused.
    let mut c = server.ws().await;
    assert_eq!(
        c.join("jam", "Cy", 'a', '9', None).await["code"],
        "peer-id-taken"
    );
    // A second join on a joined connection.
    assert_eq!(
        b.join("other", "Bo", 'b', '2', None).await["code"],
        "already-joined"
    );
    // Bad fields.
    assert_eq!(
        c.join("bad room", "Cy", 'c', '3', None).await["code"],
        "bad-room"
    );
    assert_eq!(c.join("jam", "", 'c', '3', None).await["code"], "bad-name");
    assert_eq!(
        c.join("jam", "Cy", 'C', '3', None).await["code"],
        "bad-peer-id"
    );
    // Ping works joined or not.
    c.send(json!({"type": "ping", "t": 42.5})).await;
    assert_eq!(c.recv().await, json!({"type": "pong", "t": 42.5}));
    a.send(json!({"type": "ping"})).await;
    assert_eq!(a.recv().await, json!({"type": "pong"}));
}

#[tokio::test]
async fn signals_are_relayed_within_a_room_only() {
    let server = TestServer::start(|_| {}).await;
    let mut a = server.ws().await;
    let mut b = server.ws().await;
    let mut x = server.ws().await;
    a.join("r1", "A", 'a', '1', None).await;
    b.join("r1", "B", 'b', '2', None).await;
    x.join("r2", "X", 'f', '3', None).await;
    a.recv().await; // peer-joined b

    let data = json!({"sdp": "v=0", "n": [1, 2]});
    a.send(json!({"type": "signal", "to": hex_id('b'), "data": data}))
        .await;
    assert_eq!(
        b.recv().await,
        json!({"type": "signal", "from": hex_id('a'), "data": data})
    );

    a.send(json!({"type": "signal", "to": hex_id('f'), "data": {}}))
        .await;
    assert_eq!(a.recv().await["code"], "unknown-peer");
    x.send(json!({"type": "ping", "t": 1})).await;
    assert_eq!(x.recv().await["type"], "pong", "nothing from r1 reached r2");

    let mut lone = server.ws().await;
    lone.send(json!({"type": "signal", "to": hex_id('a'), "data": {}}))
        .await;
    assert_eq!(lone.recv().await["code"], "not-joined");
    lone.send(json!({"type": "leave"})).await;
    assert_eq!(lone.recv().await["code"], "not-joined");
}

#[tokio::test]
async fn passwords() {
    let server = TestServer::start(|_| {}).await;
    let mut a = server.ws().await;
    let mut b = server.ws().await;
    assert_eq!(
        a.join("locked", "A", 'a', '1', Some("sesame")).await["type"],
        "welcome"
    );
    let e = b.join("locked", "B", 'b', '2', None).await;
    assert_eq!(e["code"], "wrong-password");
    assert_eq!(
        b.join("locked", "B", 'b', '2', Some("Sesame")).await["code"],
        "wrong-password"
    );
    // The connection stays open: a retry with the right password works.
    assert_eq!(
        b.join("locked", "B", 'b', '2', Some("sesame")).await["type"],
        "welcome"
    );
    // A password given to an open room is refused, so nobody believes it is protected; the
    // same connection may join without one.
    let mut c = server.ws().await;
    let mut d = server.ws().await;
    c.join("open", "C", 'c', '3', None).await;
    assert_eq!(
        d.join("open", "D", 'd', '4', Some("x")).await["code"],
        "no-password"
    );
    assert_eq!(d.join("open", "D", 'd', '4', None).await["type"], "welcome");
}

#[tokio::test]
async fn room_full_at_cap() {
    let server = TestServer::start(|c| c.room_cap = 2).await;
    let mut a = server.ws().await;
    let mut b = server.ws().await;
    let mut c = server.ws().await;
    assert_eq!(a.join("small", "A", 'a', '1', None).await["cap"], 2);
    b.join("small", "B", 'b', '2', None).await;
    assert_eq!(a.recv().await["type"], "peer-joined");
    let e = c.join("small", "C", 'c', '3', None).await;
    assert_eq!(e["code"], "room-full");
    assert_eq!(
        e["message"],
        "Room \"small\" is full (2 of 2 places taken)."
    );
    // Other rooms are unaffected, and a place freed can be taken.
    b.send(json!({"type": "leave"})).await;
    assert_eq!(
        a.recv().await,
        json!({"type": "peer-left", "peer": hex_id('b'), "reason": "left"})
    );
    assert_eq!(
        c.join("small", "C", 'c', '3', None).await["type"],
        "welcome"
    );
}

#[tokio::test]
async fn malformed_messages_get_errors_and_the_connection_stays() {
    let server = TestServer::start(|_| {}).await;
    let mut a = server.ws().await;
    for (text, code) in [
        ("not json", "bad-json"),
        ("[1]", "bad-json"),
        (r#"{"no":"type"}"#, "bad-message"),
        (r#"{"type":"dance"}"#, "unknown-type"),
        (r#"{"type":"join","room":"r"}"#, "bad-message"),
        (r#"{"type":"signal","to":"x"}"#, "bad-message"),
    ] {
        a.send_raw(Message::Text(text.into())).await;
        let reply = a.recv().await;
        assert_eq!(reply["type"], "error", "{text}");
        assert_eq!(reply["code"], code, "{text}");
        assert!(
            reply["message"].as_str().is_some_and(|m| m.ends_with('.')),
            "{reply}"
        );
    }
    let reply = {
        a.send_raw(Message::Text(r#"{"type":"join","room":"r"}"#.into()))
            .await;
        a.recv().await
    };
    assert!(
        reply["message"]
            .as_str()
            .is_some_and(|m| m.contains("name")),
        "{reply}"
    );
    a.send_raw(Message::Binary(vec![1, 2, 3].into())).await;
    assert_eq!(a.recv().await["code"], "bad-message");
    assert_eq!(a.join("r", "A", 'a', '1', None).await["type"], "welcome");
}

#[tokio::test]
async fn oversized_message_closes_with_1009() {
    let server = TestServer::start(|c| c.max_message_bytes = 1024).await;
    let (mut a, mut b) = server.joined_pair().await;
    let big = json!({"type": "ping", "pad": "x".repeat(4000)}).to_string();
    b.send_raw(Message::Text(big.into())).await;
    let (code, texts) = b.closed().await;
    assert_eq!(code, Some(1009));
    assert!(texts.iter().any(|t| t["code"] == "too-large"), "{texts:?}");
    assert_eq!(
        a.recv().await,
        json!({"type": "peer-left", "peer": hex_id('b'), "reason": "closed"})
    );
}

#[tokio::test]
async fn flooding_is_rate_limited_then_closed() {
    let server = TestServer::start(message_rate(5.0, 10)).await;
    let mut a = server.ws().await;
    for i in 0..40 {
        // The server may close before the last ones are written: ignore send failures.
        let ping = json!({"type": "ping", "t": i}).to_string();
        let _ = a.ws.send(Message::Text(ping.into())).await;
    }
    let (code, texts) = a.closed().await;
    assert_eq!(code, Some(1008));
    let pongs = texts.iter().filter(|t| t["type"] == "pong").count();
    let limited = texts.iter().filter(|t| t["code"] == "rate-limited").count();
    assert!((10..=11).contains(&pongs), "{pongs} pongs");
    // One error when dropping starts (at most one per second) and one when closing.
    assert_eq!(limited, 2, "{texts:?}");
}

#[tokio::test]
async fn silent_peer_is_announced_as_timed_out() {
    let server = TestServer::start(|c| {
        c.heartbeat_ms = 100;
        c.heartbeat_timeout_ms = 500;
    })
    .await;
    let (mut a, b) = server.joined_pair().await;
    // b now reads nothing: it answers no pings and sends nothing.
    let start = Instant::now();
    let left = a.recv_within(Duration::from_millis(1500)).await;
    assert_eq!(
        left,
        json!({"type": "peer-left", "peer": hex_id('b'), "reason": "timeout"})
    );
    assert!(
        start.elapsed() >= Duration::from_millis(400),
        "{:?}",
        start.elapsed()
    );
    // a, which answered pings while reading, is still a member.
    a.send(json!({"type": "ping", "t": 1})).await;
    assert_eq!(a.recv().await["type"], "pong");
    drop(b);
}

#[tokio::test]
async fn closed_socket_is_announced_as_closed() {
    let server = TestServer::start(|_| {}).await;
    let (mut a, b) = server.joined_pair().await;
    drop(b); // TCP close without a close frame
    assert_eq!(
        a.recv().await,
        json!({"type": "peer-left", "peer": hex_id('b'), "reason": "closed"})
    );
}

#[tokio::test]
async fn same_peer_and_token_replaces_without_announcements() {
    let server = TestServer::start(|_| {}).await;
    let (mut a, mut b_old) = server.joined_pair().await;
    let mut b_new = server.ws().await;
    let w = b_new.join("r", "B", 'b', '2', None).await;
    assert_eq!(w["type"], "welcome");
    assert_eq!(
        w["peers"],
        json!([{"peer": hex_id('a'), "name": "A", "stream": 1}])
    );
    let (code, texts) = b_old.closed().await;
    assert!(texts.iter().any(|t| t["code"] == "replaced"), "{texts:?}");
    assert_eq!(code, Some(1000));
    // Signals reach the new connection; a heard no peer-left or peer-joined.
    a.send(json!({"type": "signal", "to": hex_id('b'), "data": {"k": 1}}))
        .await;
    assert_eq!(b_new.recv().await["from"], hex_id('a'));
    a.send(json!({"type": "ping", "t": 7})).await;
    assert_eq!(a.recv().await, json!({"type": "pong", "t": 7}));
}

#[tokio::test]
async fn leave_then_rejoin_on_the_same_connection() {
    let server = TestServer::start(|_| {}).await;
    let (mut a, mut b) = server.joined_pair().await;
    b.send(json!({"type": "leave"})).await;
    assert_eq!(
        a.recv().await,
        json!({"type": "peer-left", "peer": hex_id('b'), "reason": "left"})
    );
    let w = b.join("r", "B", 'b', '2', None).await;
    assert_eq!(
        w["peers"],
        json!([{"peer": hex_id('a'), "name": "A", "stream": 1}])
    );
    assert_eq!(
        a.recv().await,
        json!({"type": "peer-joined", "peer": hex_id('b'), "name": "B", "stream": 3})
    );
}

#[tokio::test]
async fn connection_cap_refuses_upgrades_with_503() {
    let server = TestServer::start(|c| c.max_connections = 1).await;
    let _a = server.ws().await;
    let refused = tokio_tungstenite::connect_async(format!("ws://{}/ws", server.addr)).await;
    match refused {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => assert_eq!(r.status(), 503),
        other => panic!("expected a 503, got {other:?}"),
    }
}

#[tokio::test]
async fn shutdown_tells_clients_and_closes_with_1001() {
    // Members are not told that the others left: they are still linked peer to peer and will
    // rejoin when the server is back.
    let mut server = TestServer::start(|_| {}).await;
    let (mut a, mut b) = server.joined_pair().await;
    let started = Instant::now();
    server.begin_shutdown();
    for c in [&mut a, &mut b] {
        let (code, texts) = c.closed().await;
        assert_eq!(code, Some(1001));
        assert!(
            texts.iter().any(|t| t["code"] == "shutting-down"),
            "{texts:?}"
        );
        assert!(!texts.iter().any(|t| t["type"] == "peer-left"), "{texts:?}");
    }
    let result = tokio::time::timeout(Duration::from_secs(4), &mut server.task).await;
    assert!(matches!(result, Ok(Ok(Ok(())))), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn unknown_type_is_named_and_truncated() {
    let server = TestServer::start(|_| {}).await;
    let mut a: Client = server.ws().await;
    a.send(json!({"type": "y".repeat(100)})).await;
    let e = a.recv().await;
    assert_eq!(e["code"], "unknown-type");
    let m = e["message"].as_str().unwrap_or_default();
    assert!(
        m.contains(&"y".repeat(40)) && !m.contains(&"y".repeat(41)),
        "{m}"
    );
}

#[tokio::test]
async fn a_receiver_that_stops_reading_is_dropped_without_blocking_the_room() {
    let server = TestServer::start(message_rate(10_000.0, 10_000)).await;
    let (mut a, slow) = server.joined_pair().await;
    let mut c = server.ws().await;
    c.join("r", "C", 'c', '3', None).await;
    assert_eq!(a.recv().await["type"], "peer-joined");
    // `slow` reads nothing from here on. ~20 MB of signals overflow the socket buffers and
    // then its bounded outbound queue.
    let pad = "x".repeat(32 * 1024);
    let started = Instant::now();
    let mut left = None;
    for i in 0..640 {
        a.send(json!({"type": "signal", "to": hex_id('b'), "data": {"i": i, "pad": pad}}))
            .await;
        if i % 64 == 63 {
            // The room keeps working meanwhile.
            a.send(json!({"type": "signal", "to": hex_id('c'), "data": {"i": i}}))
                .await;
            let mut m = c.recv().await;
            if m["type"] == "peer-left" {
                m = c.recv().await; // `slow` was dropped meanwhile
            }
            assert_eq!(m["data"]["i"], i);
        }
    }
    while left.is_none() {
        let m = a.recv_within(Duration::from_secs(5)).await;
        if m["type"] == "peer-left" {
            left = Some(m);
        }
    }
    assert_eq!(
        left,
        Some(json!({"type": "peer-left", "peer": hex_id('b'), "reason": "closed"}))
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    drop(slow);
}
