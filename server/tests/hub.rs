//! The media hub end to end: real WebRTC links (str0m clients on loopback), the real server's
//! signaling and the real hub workers.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{Client, TestServer};
use serde_json::json;
use tutti_core::bundle;
use tutti_core::packet;
use tutti_server::hub::client::{pcm16_packet, HubClient};

const FRAMES: u16 = 128;
/// One block at 48 kHz.
const BLOCK: Duration = Duration::from_micros(2667);

/// A stereo PCM16 packet whose samples all hold `level`.
fn packet(seq: u16, level: f32) -> Vec<u8> {
    pcm16_packet(seq, &[level; FRAMES as usize])
}

/// Joins `n` members to `room` (the first owns it); returns their sockets and stream ids.
async fn members(server: &TestServer, room: &str, n: usize) -> Vec<(Client, u16)> {
    let mut out = Vec::new();
    for k in 0..n {
        let mut ws = server.ws().await;
        let id = char::from(b'a' + k as u8);
        let w = ws.join(room, &format!("m{k}"), id, '1', None).await;
        let stream = w["stream"].as_u64().expect("a stream id") as u16;
        out.push((ws, stream));
    }
    for (k, (ws, _)) in out.iter_mut().enumerate() {
        for _ in k + 1..n {
            assert_eq!(ws.recv().await["type"], "peer-joined");
        }
    }
    out
}

/// The owner (member 0) sets the room's topology; every member hears it.
async fn owner_sets(m: &mut [(Client, u16)], mode: &str) {
    let set = m[0].0.ask(json!({"type": "topology", "mode": mode})).await;
    assert_eq!(set, json!({"type": "topology", "mode": mode}));
    for (ws, _) in m.iter_mut().skip(1) {
        assert_eq!(ws.recv().await["mode"], mode);
    }
}

/// A hub client for member `ws`, its offer answered.
async fn connect(ws: &mut Client) -> HubClient {
    let (mut client, offer) = HubClient::offer([127, 0, 0, 1].into());
    let reply = ws.ask(json!({"type": "hub-offer", "sdp": offer})).await;
    assert_eq!(reply["type"], "hub-answer", "the hub answers: {reply}");
    client.accept(reply["sdp"].as_str().expect("sdp text"));
    client
}

/// Every client sends one packet per block for `blocks` blocks, each its own level, each on
/// its own thread as a browser would.
fn play(clients: Vec<HubClient>, levels: &[f32], blocks: u16) -> Vec<HubClient> {
    let start = Instant::now() + Duration::from_millis(20);
    let threads: Vec<_> = clients
        .into_iter()
        .zip(levels.iter().copied())
        .map(|(mut c, level)| {
            std::thread::spawn(move || {
                for seq in 0..blocks {
                    let due = start + BLOCK * u32::from(seq);
                    c.run_until(due);
                    c.send(&packet(seq, level));
                }
                c.run_until(Instant::now() + Duration::from_millis(200));
                c
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("a client thread"))
        .collect()
}

/// Per stream id: the packets a client received in bundles, and the first sample of each.
fn heard(client: &HubClient) -> HashMap<u16, Vec<f32>> {
    let mut out: HashMap<u16, Vec<f32>> = HashMap::new();
    for message in &client.received {
        let b = bundle::parse(message).expect("the hub sends whole bundles");
        for bytes in b.packets() {
            let p = packet::parse(bytes).expect("a whole packet");
            let stream = p.ext.expect("forwarded packets carry a trailer").stream_id;
            let first = i16::from_le_bytes([p.payload[0], p.payload[1]]);
            out.entry(stream)
                .or_default()
                .push(f32::from(first) / 32768.0);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_forward_through_the_hub() {
    let server = TestServer::start(|_| {}).await;
    let mut m = members(&server, "hubbed", 3).await;
    owner_sets(&mut m, "forward").await;
    let mut clients = Vec::new();
    for (ws, _) in m.iter_mut() {
        clients.push(connect(ws).await);
    }
    let opened = tokio::task::spawn_blocking(move || {
        for c in clients.iter_mut() {
            assert!(
                c.open_within(Duration::from_secs(5)),
                "the hub channel opens"
            );
        }
        play(clients, &[0.125, 0.25, 0.5], 300)
    })
    .await
    .expect("the clients ran");
    for (ws, _) in m.iter_mut() {
        ws.send(json!({"type": "leave"})).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let streams: Vec<u16> = m.iter().map(|(_, s)| *s).collect();
    let levels = [0.125f32, 0.25, 0.5];
    for (i, c) in opened.iter().enumerate() {
        let got = heard(c);
        assert!(
            !got.contains_key(&streams[i]),
            "member {i} never hears itself"
        );
        for (j, &stream) in streams.iter().enumerate() {
            if i == j {
                continue;
            }
            let from_j = got.get(&stream).map(Vec::as_slice).unwrap_or_default();
            println!(
                "member {i} got {} of 300 packets from member {j} in {} bundles ({} sends refused)",
                from_j.len(),
                c.received.len(),
                c.refused
            );
            assert!(
                from_j.len() >= 290,
                "member {i} hears member {j}: {} of 300 packets",
                from_j.len()
            );
            assert!(from_j.iter().all(|&x| (x - levels[j]).abs() < 1e-3));
        }
    }
}

#[tokio::test]
async fn hub_messages_are_checked() {
    let server = TestServer::start(|_| {}).await;
    let mut stranger = server.ws().await;
    let reply = stranger
        .ask(json!({"type": "hub-offer", "sdp": "v=0"}))
        .await;
    assert_eq!(reply["code"], "not-joined");
    let mut m = members(&server, "checked", 2).await;
    let reply = m[1].0.ask(json!({"type": "topology", "mode": "mix"})).await;
    assert_eq!(reply["code"], "not-owner");
    let reply = m[0]
        .0
        .ask(json!({"type": "hub-offer", "sdp": "not sdp"}))
        .await;
    assert_eq!(reply["code"], "hub-unavailable", "{reply}");
    let reply = m[0]
        .0
        .ask(json!({"type": "topology", "mode": "ring"}))
        .await;
    assert_eq!(reply["code"], "bad-message");
    let w = {
        let mut late = server.ws().await;
        late.join("checked", "late", 'c', '1', None).await
    };
    assert_eq!(w["topology"], "mesh");
    let streams: Vec<u64> = w["peers"]
        .as_array()
        .expect("peers")
        .iter()
        .map(|p| p["stream"].as_u64().expect("each peer has a stream"))
        .collect();
    assert_eq!(streams, vec![1, 2]);
    assert_eq!(w["stream"], 3);
}

#[tokio::test]
async fn a_server_without_a_hub_says_so() {
    let server = TestServer::start(|c| c.hub = false).await;
    let mut m = members(&server, "nohub", 1).await;
    let reply = m[0].0.ask(json!({"type": "hub-offer", "sdp": "v=0"})).await;
    assert_eq!(reply["code"], "hub-unavailable");
}

/// Member `ws` hears nothing before the answer to a ping (what it was sent before came first).
async fn hears_nothing_more(ws: &mut Client) {
    let reply = ws.ask(json!({"type": "ping", "t": 7})).await;
    assert_eq!(reply, json!({"type": "pong", "t": 7}));
}

#[tokio::test]
async fn a_member_whose_uplink_cannot_carry_the_mesh_moves_the_room_to_the_hub() {
    let server = TestServer::start(|_| {}).await;
    let mut stranger = server.ws().await;
    let reply = stranger
        .ask(json!({"type": "uplink", "need": 3.7e6, "carries": 2e6}))
        .await;
    assert_eq!(reply["code"], "not-joined");
    let mut m = members(&server, "full", 3).await;
    let reply = m[1]
        .0
        .ask(json!({"type": "uplink", "need": "lots", "carries": 1}))
        .await;
    assert_eq!(reply["code"], "bad-message");
    // An uplink that carries the mesh moves nothing.
    m[2].0
        .send(json!({"type": "uplink", "need": 3.68e6, "carries": 5.2e6}))
        .await;
    hears_nothing_more(&mut m[2].0).await;
    hears_nothing_more(&mut m[0].0).await;
    // One that does not: every member hears the move and why.
    m[2].0
        .send(json!({"type": "uplink", "need": 3.68e6, "carries": 2.14e6}))
        .await;
    for (ws, _) in m.iter_mut() {
        let moved = ws.recv().await;
        assert_eq!(moved["type"], "topology");
        assert_eq!(moved["mode"], "forward");
        let reason = moved["reason"].as_str().expect("a reason");
        assert!(
            reason.starts_with(
                "m2's uplink carries about 2.1 Mbit/s, and a mesh of 3 asks 3.7 Mbit/s of each player"
            ),
            "{reason}"
        );
    }
    // Late joiners find the room on the hub.
    let mut late = server.ws().await;
    let w = late.join("full", "late", 'd', '1', None).await;
    assert_eq!(w["topology"], "forward");
    for (ws, _) in m.iter_mut() {
        assert_eq!(ws.recv().await["type"], "peer-joined");
    }
    // On the hub already: a further report moves nothing.
    m[1].0
        .send(json!({"type": "uplink", "need": 5.5e6, "carries": 1e6}))
        .await;
    hears_nothing_more(&mut m[1].0).await;
    // The owner's mesh stands against reports.
    owner_sets(&mut m, "mesh").await;
    m[2].0
        .send(json!({"type": "uplink", "need": 5.5e6, "carries": 1e6}))
        .await;
    hears_nothing_more(&mut m[2].0).await;
    hears_nothing_more(&mut m[0].0).await;
}

#[tokio::test]
async fn with_hub_auto_off_reports_move_nothing() {
    let server = TestServer::start(|c| c.hub_auto = false).await;
    let mut m = members(&server, "manual", 3).await;
    m[2].0
        .send(json!({"type": "uplink", "need": 3.68e6, "carries": 1e6}))
        .await;
    hears_nothing_more(&mut m[2].0).await;
    hears_nothing_more(&mut m[0].0).await;
}

/// The layer a member's `layer` notice names (the next message it hears must be one).
async fn layer_notice(ws: &mut Client) -> (String, String) {
    let msg = ws.recv().await;
    assert_eq!(msg["type"], "layer", "{msg}");
    let name = msg["layer"].as_str().expect("a layer").to_owned();
    (name, msg["reason"].as_str().expect("a reason").to_owned())
}

/// Complete packet trains among `messages`, and the Opus and PCM packets of `stream`.
fn sorted_messages(messages: &[Vec<u8>], stream: u16) -> (usize, usize, usize) {
    use tutti_core::train;
    let mut trains: HashMap<u32, u8> = HashMap::new();
    let (mut opus, mut pcm) = (0, 0);
    for m in messages {
        if let Ok(t) = train::parse(m) {
            *trains.entry(t.train).or_default() |= 1 << t.index;
            continue;
        }
        let b = bundle::parse(m).expect("a bundle or a train message");
        for bytes in b.packets() {
            let p = packet::parse(bytes).expect("a whole packet");
            if p.ext.map(|e| e.stream_id) != Some(stream) {
                continue;
            }
            if p.is_opus() {
                assert_eq!(p.header.frames, 120, "opus-128's frames");
                opus += 1;
            } else {
                pcm += 1;
            }
        }
    }
    let whole = trains.values().filter(|&&bits| bits == 0b1111).count();
    (whole, opus, pcm)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_that_reports_loss_takes_opus_gets_trains_and_steps_back_up() {
    let server = TestServer::start(|_| {}).await;
    let mut m = members(&server, "layered", 2).await;
    owner_sets(&mut m, "forward").await;
    let a = connect(&mut m[0].0).await;
    let b = connect(&mut m[1].0).await;
    let stream_a = m[0].1;
    let mut clients = tokio::task::spawn_blocking(move || {
        let mut cs = vec![a, b];
        for c in cs.iter_mut() {
            assert!(
                c.open_within(Duration::from_secs(5)),
                "the hub channel opens"
            );
        }
        cs
    })
    .await
    .expect("opened");

    // B hears 30 % loss with 900 kbit/s getting through: one sender's as-sent stream needs
    // 1.87 Mbit/s, opus-128 611 kbit/s with its frames' copies (within 70 % of 900).
    let lossy = json!({"type": "reception", "receivedBps": 900000, "loss": 0.3,
                       "delayRiseMsPerS": 20, "rttMs": 5, "capacityBps": null});
    m[1].0.send(lossy).await;
    let (layer, reason) = layer_notice(&mut m[1].0).await;
    assert_eq!(layer, "opus-128");
    assert_eq!(reason, "30.0 % of packets lost; 900 kbit/s got through");
    clients[1].received.clear();
    clients = tokio::task::spawn_blocking(move || play(clients, &[0.25, 0.5], 600))
        .await
        .expect("played");
    let (trains, opus, pcm) = sorted_messages(&clients[1].received, stream_a);
    println!("on opus-128: {trains} whole trains, {opus} Opus packets, {pcm} PCM packets of A");
    // 600 blocks of 128 are 640 frames of 120 (1.6 s): a train a second.
    assert!(opus >= 620 && pcm == 0, "{opus} Opus, {pcm} PCM");
    assert!(trains >= 1, "trains while below the richest layer");

    // Clean reports with a measured capacity of 100 Mbit/s: back to as-sent after the hold.
    let clean = json!({"type": "reception", "receivedBps": 466000, "loss": 0,
                       "delayRiseMsPerS": 0, "rttMs": 1, "capacityBps": 1e8});
    m[1].0.send(clean.clone()).await;
    for _ in 0..6 {
        // The hold, both members keeping their signaling alive meanwhile.
        tokio::time::sleep(Duration::from_millis(700)).await;
        for (ws, _) in m.iter_mut() {
            assert_eq!(ws.ask(json!({"type": "ping"})).await["type"], "pong");
        }
    }
    m[1].0.send(clean).await;
    let (layer, reason) = layer_notice(&mut m[1].0).await;
    assert_eq!(
        (layer.as_str(), reason.as_str()),
        ("as-sent", "the path carries 100.0 Mbit/s")
    );
    let clients = tokio::task::spawn_blocking(move || {
        // What came during the hold (trains, while it was still below) is taken first.
        for c in clients.iter_mut() {
            c.run_until(Instant::now() + Duration::from_millis(100));
        }
        clients[1].received.clear();
        play(clients, &[0.25, 0.5], 300)
    })
    .await
    .expect("played");
    let (trains, opus, pcm) = sorted_messages(&clients[1].received, stream_a);
    assert_eq!((trains, opus), (0, 0), "as sent: no trains, no Opus");
    assert!(pcm >= 290, "{pcm} PCM packets");
    let reply = m[1]
        .0
        .ask(json!({"type": "reception", "receivedBps": -1, "loss": 0, "delayRiseMsPerS": 0, "rttMs": 0}))
        .await;
    assert_eq!(reply["code"], "bad-message");
}
