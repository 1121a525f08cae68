//! A real `jacktrip -C` and two hub clients in one room mixed by the hub: the whole path of
//! issue 14's JackTrip line. The in-process server runs the hub and the JackTrip handshake on
//! free loopback ports; two members join room `jt`, the owner switches it to `mix`, each links
//! to the hub (str0m, as a browser does) and plays its tone (375 Hz and 1500 Hz: whole periods
//! in each 128-frame PCM16 packet, sent in real time, and far from JackTrip's tones, so that
//! one does not leak into the other's measure). Debian's `jacktrip` on a dummy `jackd` joins
//! as `jt/Ann`, its input `jack_simple_client`'s sine pair (240 Hz left, 720 Hz right).
//!
//! Checked: the members hear `peer-joined` with `kind: jacktrip`; each member's mix holds the
//! JackTrip tones and the other member's tone together (in some 100 ms windows: a loaded machine
//! leaves gaps) and never its own; `jack_rec` of jacktrip's receive
//! ports holds both members' tones and not JackTrip's own; after SIGINT, `peer-left`.
//!
//! Skipped, with a message, when the programs are missing, except under `CI=true`. Every wait is
//! bounded; every process started here is stopped by its pid.

mod common;
mod jack;

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Client, TestServer};
use jack::{free_udp_port, power_at, tools_present, JackRun};
use serde_json::{json, Value};
use tutti_core::packet;
use tutti_core::{bundle, meters};
use tutti_server::hub::client::{pcm16_packet, HubClient};

const FRAMES: usize = 128;
/// One block at 48 kHz.
const BLOCK: Duration = Duration::from_micros(2667);
/// The members' tones, amplitude [`AMPLITUDE`] on both channels.
const MEMBER_HZ: [f64; 2] = [375.0, 1500.0];
const AMPLITUDE: f32 = 0.25;
/// `jack_simple_client`'s tones (amplitude 0.2).
const JT_LEFT_HZ: f64 = 240.0;
const JT_RIGHT_HZ: f64 = 720.0;
/// A tone "is there" above this Goertzel power (a sine of amplitude A gives A²/4: this is an
/// amplitude of 0.02, a tenth of the quietest tone here); "is not there" below 1/100 of it.
const PRESENT: f64 = 1e-4;
const ABSENT: f64 = PRESENT / 100.0;

/// Packet `seq` of a stereo PCM16 sine at `hz`, phase-continuous across packets.
fn tone_packet(seq: u32, hz: f64) -> Vec<u8> {
    let start = seq as usize * FRAMES;
    let mut samples = [0f32; FRAMES];
    for (k, s) in samples.iter_mut().enumerate() {
        let t = (start + k) as f64 / 48_000.0;
        *s = AMPLITUDE * (2.0 * std::f64::consts::PI * hz * t).sin() as f32;
    }
    pcm16_packet(seq as u16, &samples)
}

/// The mix a member received, as interleaved stereo int16 (bundles of one packet, stream 0),
/// from its `skip`-th message on; its meters messages are passed over.
fn mix_of(client: &HubClient, skip: usize) -> Vec<i16> {
    let mut out = Vec::new();
    for message in client
        .received
        .iter()
        .skip(skip)
        .filter(|m| meters::parse(m).is_err())
    {
        let b = bundle::parse(message).expect("the hub sends whole bundles");
        let packets: Vec<&[u8]> = b.packets().collect();
        assert_eq!(packets.len(), 1, "a mix bundle holds one packet");
        let p = packet::parse(packets[0]).expect("a whole packet");
        assert_eq!(p.ext.map(|e| e.stream_id), Some(0), "the mix is stream 0");
        let frames = usize::from(p.header.frames);
        let sample = |i: usize| i16::from_le_bytes([p.payload[2 * i], p.payload[2 * i + 1]]);
        for k in 0..frames {
            out.push(sample(k));
            out.push(sample(frames + k));
        }
    }
    out
}

/// How many 100 ms windows of interleaved stereo `samples` pass `test`, and of how many.
fn windows(samples: &[i16], test: impl Fn(&[i16]) -> bool) -> (usize, usize) {
    let all = samples.chunks_exact(2 * 4_800);
    let n = all.len();
    (all.filter(|w| test(w)).count(), n)
}

/// The next message of `type` on `ws`, skipping others, within `limit`.
async fn next_of(ws: &mut Client, kind: &str, limit: Duration) -> Value {
    let end = Instant::now() + limit;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no {kind} within {limit:?}");
        let m = ws.recv_within(left).await;
        if m["type"] == kind {
            return m;
        }
    }
}

fn free_tcp_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a TCP port on loopback");
    l.local_addr().expect("bound address").port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_jacktrip_client_and_two_members_share_a_mixed_room() {
    if !tools_present() {
        return;
    }
    let t0 = Instant::now();
    // jackd first: it takes a moment.
    let run = JackRun::new("tutti-jth");
    let _jackd = run.jackd();

    let tcp_port = free_tcp_port();
    let udp_base = free_udp_port();
    // The hub's log lines (admission, departure and their counters) go with the test's output.
    let _ = tracing_subscriber::fmt()
        .with_env_filter("tutti_server=info")
        .with_test_writer()
        .try_init();
    let server = TestServer::start(|c| {
        c.jacktrip_port = tcp_port;
        c.jacktrip_udp_base = udp_base;
        // The members' sockets are not read while jacktrip starts and records.
        c.heartbeat_timeout_ms = 120_000;
    })
    .await;
    let mut m = Vec::new();
    for (k, id) in ['a', 'b'].into_iter().enumerate() {
        let mut ws = server.ws().await;
        let w = ws.join("jt", &format!("m{k}"), id, '1', None).await;
        m.push((ws, w["stream"].as_u64().expect("a stream id")));
    }
    assert_eq!(m[0].0.recv().await["type"], "peer-joined");
    let set = m[0].0.ask(json!({"type": "topology", "mode": "mix"})).await;
    assert_eq!(set, json!({"type": "topology", "mode": "mix"}));
    assert_eq!(m[1].0.recv().await["mode"], "mix");
    let mut clients = Vec::new();
    for (ws, _) in m.iter_mut() {
        let (mut client, offer) = HubClient::offer([127, 0, 0, 1].into());
        let reply = ws.ask(json!({"type": "hub-offer", "sdp": offer})).await;
        assert_eq!(reply["type"], "hub-answer", "the hub answers: {reply}");
        client.accept(reply["sdp"].as_str().expect("sdp text"));
        clients.push(client);
    }

    // The members play their tones in real time until told to stop (at most 40 s), each on a
    // thread of its own as a browser would (clients sharing a thread read each other's
    // acknowledgements late, and their SCTP then refuses to send).
    let stop = Arc::new(AtomicBool::new(false));
    let players: Vec<_> = clients
        .into_iter()
        .zip(MEMBER_HZ)
        .map(|(mut c, hz)| {
            let stop = stop.clone();
            tokio::task::spawn_blocking(move || {
                assert!(
                    c.open_within(Duration::from_secs(5)),
                    "the hub channel opens"
                );
                let start = Instant::now();
                let mut seq = 0u32;
                while !stop.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(40) {
                    c.send(&tone_packet(seq, hz));
                    seq += 1;
                    c.run_until(start + BLOCK * seq);
                }
                (c, seq)
            })
        })
        .collect();

    // The real client, with its tone, once jackd is up.
    let client_name = format!("jt{}", run.nanos);
    let procs = {
        let (run, client) = (run.clone(), client_name.clone());
        tokio::task::spawn_blocking(move || {
            run.wait_ready();
            let jacktrip = run.jacktrip(&client, tcp_port, free_udp_port(), "jt/Ann");
            let tone = run.tone_into(&client);
            (jacktrip, tone)
        })
    };

    // (a) The members see the JackTrip client arrive.
    let mut jt_peer = String::new();
    for (ws, _) in m.iter_mut() {
        let joined = next_of(ws, "peer-joined", Duration::from_secs(20)).await;
        assert_eq!(joined["kind"], "jacktrip", "{joined}");
        assert_eq!(joined["name"], "Ann", "{joined}");
        jt_peer = joined["peer"].as_str().expect("a peer id").to_owned();
    }
    let (mut jacktrip, _tone) = procs.await.expect("jacktrip and its tone started");

    // (c) What jacktrip receives: 3 s of its receive ports, after the jitter buffers settle.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let samples = {
        let (run, client) = (run.clone(), client_name.clone());
        tokio::task::spawn_blocking(move || run.record(&client, 3))
            .await
            .expect("jack_rec ran")
    };

    // (d) Goodbye: jacktrip sends its exit packet when interrupted.
    let stopped = tokio::task::spawn_blocking(move || {
        let stopped = jacktrip.signal("-INT", Duration::from_secs(5));
        (stopped, jacktrip)
    });
    let mut reasons = Vec::new();
    for (ws, _) in m.iter_mut() {
        let left = next_of(ws, "peer-left", Duration::from_secs(8)).await;
        assert_eq!(left["peer"], jt_peer.as_str(), "{left}");
        reasons.push(left["reason"].as_str().unwrap_or("").to_owned());
    }
    let (stopped, _jacktrip) = stopped.await.expect("the signal was sent");
    stop.store(true, Ordering::Relaxed);
    let mut clients = Vec::new();
    let mut blocks = 0;
    for p in players {
        let (c, seq) = p.await.expect("the members played");
        clients.push(c);
        blocks = blocks.max(seq);
    }

    // (b) Each member's mix, cut in 100 ms windows. Its own tone must be absent throughout
    // (mix minus its own voice is exact whatever the timing); the other member's tone and both
    // JackTrip tones must be there together in some windows. On a loaded machine late or
    // bursty cycles (jackd's, jacktrip's, the hub's or the clients') leave gaps that the jitter
    // buffers conceal, so not every window holds every tone: the counts are printed.
    for (i, c) in clients.iter().enumerate() {
        let mix = mix_of(c, 0);
        let own = power_at(&mix, 0, MEMBER_HZ[i]).max(power_at(&mix, 1, MEMBER_HZ[i]));
        let full = windows(&mix, |w| {
            power_at(w, 0, MEMBER_HZ[1 - i]) > PRESENT
                && power_at(w, 0, JT_LEFT_HZ) > PRESENT
                && power_at(w, 1, JT_RIGHT_HZ) > PRESENT
        });
        let jt = windows(&mix, |w| power_at(w, 0, JT_LEFT_HZ) > PRESENT);
        let other = windows(&mix, |w| power_at(w, 0, MEMBER_HZ[1 - i]) > PRESENT);
        println!(
            "member {i}: {} mix bundles; of {} windows of 100 ms, {} hold the other member's \
             tone, {} jacktrip's, {} both jacktrip channels and the other member; own tone \
             power {own:.1e}",
            c.received.len(),
            full.1,
            other.0,
            jt.0,
            full.0,
        );
        assert!(
            full.0 >= 1,
            "member {i} hears jacktrip and the other member together"
        );
        assert!(own < ABSENT, "member {i} does not hear itself: {own:.1e}");

        // Its meters (the hub's reading of every player it mixes), the last while jacktrip
        // played (it leaves first): the other member's tone peaks at AMPLITUDE.
        let last = c
            .received
            .iter()
            .rev()
            .filter_map(|m| meters::parse(m).ok())
            .find(|m| m.len() == 3)
            .expect("meters of two members and jacktrip");
        let streams: Vec<u16> = last.entries().map(|e| e.stream).collect();
        let other = last
            .entries()
            .find(|e| u64::from(e.stream) == m[1 - i].1)
            .expect("the other member's meter");
        let peak = meters::code_dbfs(other.levels[0]).expect("not silent");
        let want = 20.0 * AMPLITUDE.log10();
        println!("member {i}: meters of streams {streams:?}, the other member's peak {peak} dBFS");
        assert!((peak - want).abs() < 0.5, "{peak} dBFS, tone {want:.2}");
    }

    // (c) jacktrip's receive ports: both members' tones, not its own.
    assert!(
        samples.len() >= 2 * 2 * 48_000,
        "{} samples recorded",
        samples.len()
    );
    for ch in 0..2 {
        let own = power_at(&samples, ch, [JT_LEFT_HZ, JT_RIGHT_HZ][ch]);
        let both = windows(&samples, |w| {
            power_at(w, ch, MEMBER_HZ[0]) > PRESENT && power_at(w, ch, MEMBER_HZ[1]) > PRESENT
        });
        println!(
            "jacktrip received channel {}: {} of {} windows hold both members' tones; its own \
             tone's power {own:.1e}",
            ch + 1,
            both.0,
            both.1
        );
        assert!(
            both.0 >= 1,
            "jacktrip hears both members (channel {})",
            ch + 1
        );
        assert!(
            own < ABSENT,
            "jacktrip does not hear itself (channel {})",
            ch + 1
        );
    }
    println!(
        "peer-left reasons {reasons:?}; jacktrip stopped on SIGINT: {stopped}; {blocks} blocks \
         played; {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(stopped, "jacktrip did not stop on SIGINT");
    assert_eq!(reasons, ["left", "left"], "the exit packet ends it as left");
    run.clean();
    assert!(
        t0.elapsed() < Duration::from_secs(60),
        "took {:?}",
        t0.elapsed()
    );
}
