//! The media room against known answers: forwarded bundles hold exactly the others' packets with
//! their senders' stream ids, and leave on time; each listener's mix holds the other tones at
//! their levels and not its own; a personal gain reaches only its listener; a JackTrip listener
//! gets its own format; hostile input changes no other client's bytes and is counted by reason.

use std::collections::HashMap;
use std::f64::consts::{FRAC_1_SQRT_2, PI};

use tutti_core::packet::{
    self, encode, Extension, Header, SampleFormat, SampleRate, CODEC_PCM, MAX_PACKET_LEN,
};
use tutti_core::{bundle, meters};

use super::*;

/// Tone frequencies, Hz: multiples of 9.375 Hz, so every 128-frame block holds whole cycles.
const HZ: [f64; 4] = [375.0, 562.5, 750.0, 937.5];
/// Their amplitudes.
const AMP: [f64; 4] = [0.1, 0.2, 0.15, 0.25];
/// The JackTrip client's own tone (test of its mix minus itself).
const JT_HZ: f64 = 1125.0;
const JT_AMP: f64 = 0.3;

/// Tick `k`'s time from the room's start, µs.
fn tick_us(k: u64) -> u64 {
    mix::tick_offset_us(k)
}

/// Samples `k·frames ..` of a sine.
fn sine(k: u64, frames: usize, hz: f64, amp: f64) -> Vec<f32> {
    (0..frames)
        .map(|i| {
            let n = (k as usize * frames + i) as f64;
            (amp * (2.0 * PI * hz * n / 48_000.0).sin()) as f32
        })
        .collect()
}

/// Block `k` of a tone as a browser's packet: 128 frames, PCM16 stereo, trailer with `stream`.
fn browser_packet(k: u64, hz: f64, amp: f64, stream: Option<u16>) -> Vec<u8> {
    let x = sine(k, 128, hz, amp);
    packet_of(
        k,
        128,
        SampleFormat::Pcm16,
        SampleRate::Hz48000,
        &[&x, &x],
        stream,
    )
}

fn packet_of(
    k: u64,
    frames: u16,
    format: SampleFormat,
    rate: SampleRate,
    planar: &[&[f32]],
    stream: Option<u16>,
) -> Vec<u8> {
    let header = Header {
        timestamp: k,
        seq: k as u16,
        frames,
        rate,
        format,
        channels_in: planar.len() as u8,
        channels_out: 0,
    };
    let ext = stream.map(|stream_id| Extension {
        stream_id,
        codec: CODEC_PCM,
    });
    let mut out = vec![0u8; MAX_PACKET_LEN];
    let n = encode(&header, ext.as_ref(), planar, &mut out).unwrap();
    out.truncate(n);
    out
}

/// Amplitude of `hz` in `x` (48 kHz) by a single-bin DFT over a whole number of its cycles.
fn amplitude(x: &[f32], hz: f64) -> f64 {
    let (mut re, mut im) = (0.0, 0.0);
    for (n, &v) in x.iter().enumerate() {
        let ph = 2.0 * PI * hz * n as f64 / 48_000.0;
        re += f64::from(v) * ph.cos();
        im += f64::from(v) * ph.sin();
    }
    2.0 * re.hypot(im) / x.len() as f64
}

fn db(x: f64) -> f64 {
    20.0 * x.max(1e-12).log10()
}

/// Everything a run sent, per client, in order.
type Sent = HashMap<ClientId, Vec<Vec<u8>>>;

fn collect(sent: &mut Sent) -> impl FnMut(ClientId, &[u8]) + '_ {
    move |to, bytes| sent.entry(to).or_default().push(bytes.to_vec())
}

/// The left and right samples of a listener's mix bundles (one packet each, the mix stream);
/// its meters messages are passed over.
fn decode_mix(messages: &[Vec<u8>]) -> (Vec<f32>, Vec<f32>) {
    let (mut l, mut r) = (Vec::new(), Vec::new());
    for b in messages.iter().filter(|m| meters::parse(m).is_err()) {
        let b = bundle::parse(b).unwrap();
        assert_eq!(b.len(), 1);
        for p in b.packets() {
            let p = packet::parse(p).unwrap();
            assert_eq!(p.ext.unwrap().stream_id, MIX_STREAM);
            assert_eq!((p.frames(), p.channels), (128, 2));
            let (mut bl, mut br) = ([0.0; 128], [0.0; 128]);
            p.decode_stereo(&mut bl, &mut br);
            l.extend_from_slice(&bl);
            r.extend_from_slice(&br);
        }
    }
    (l, r)
}

/// A mix-mode run of four tone sources (and optional extras), `ticks` ticks long: source `i`
/// sends block k 300 µs after tick k; the room is polled at each tick and after each packet.
struct MixRun {
    room: MediaRoom,
    ids: Vec<ClientId>,
    sent: Sent,
}

impl MixRun {
    fn new(mode: Mode) -> MixRun {
        let mut room = MediaRoom::new(mode, 0);
        let ids = (0..4)
            .map(|i| room.add_client(10 + i, ClientKind::Browser, 0).unwrap())
            .collect();
        MixRun {
            room,
            ids,
            sent: Sent::new(),
        }
    }

    /// Adds a JackTrip listener (stream 40) of this format.
    fn jacktrip(&mut self, frames: u16, bits: u8, channels: u8) -> ClientId {
        let format = JackTripFormat {
            frames,
            bits,
            channels,
        };
        self.room
            .add_client(40, ClientKind::JackTrip(format), 0)
            .unwrap()
    }

    fn run(&mut self, ticks: u64, mut extra: impl FnMut(&mut MediaRoom, u64, u64)) {
        for k in 0..ticks {
            let t = tick_us(k);
            self.room.poll(t, &mut collect(&mut self.sent));
            for (i, &id) in self.ids.iter().enumerate() {
                let p = browser_packet(k, HZ[i], AMP[i], Some(10 + i as u16));
                let at = t + 300 + 50 * i as u64;
                assert_eq!(self.room.receive(id, &p, at), Received::Accepted);
                self.room.poll(at, &mut collect(&mut self.sent));
            }
            extra(&mut self.room, k, t + 600);
            self.room.poll(t + 700, &mut collect(&mut self.sent));
        }
    }
}

/// A room in forward mode with three browsers of streams `first`, `first + 1`, `first + 2`.
fn forward_room(first: u16) -> (MediaRoom, Vec<ClientId>) {
    layered_room(first, 3, &[])
}

/// A room in forward mode with `n` browsers of streams `first`.., the `i`th of `layers` taking
/// its layer.
fn layered_room(first: u16, n: u16, layers: &[(usize, Layer)]) -> (MediaRoom, Vec<ClientId>) {
    let mut room = MediaRoom::new(Mode::Forward, 0);
    let ids: Vec<ClientId> = (0..n)
        .map(|i| room.add_client(first + i, ClientKind::Browser, 0).unwrap())
        .collect();
    for &(i, layer) in layers {
        room.set_layer(ids[i], layer).unwrap();
    }
    (room, ids)
}

#[test]
fn forward_bundles_hold_exactly_the_others_packets() {
    let (mut room, ids) = forward_room(21);
    let mut sent = Sent::new();
    // What each sender sent per round, without its trailer (the hub writes its own).
    let mut bodies: HashMap<(u16, u64), Vec<u8>> = HashMap::new();
    for k in 0..50u64 {
        let t = tick_us(k);
        for (i, &id) in ids.iter().enumerate() {
            // Sender 0 writes no trailer, sender 1 its own stream, sender 2 zero.
            let stream = [None, Some(22), Some(0)][i];
            let p = browser_packet(k, HZ[i], AMP[i], stream);
            let body_len = 16 + 128 * 2 * 2;
            bodies.insert((21 + i as u16, k), p[..body_len].to_vec());
            room.receive(id, &p, t + 100 * i as u64);
            room.poll(t + 100 * i as u64, &mut collect(&mut sent));
        }
    }
    room.poll(tick_us(50) + BUNDLE_WAIT_US, &mut collect(&mut sent));
    for (i, &id) in ids.iter().enumerate() {
        let own = 21 + i as u16;
        let bundles = &sent[&id];
        // The first round flushes early (the others were not yet sending) and the last packet
        // leaves at its deadline; in between one bundle per round holds both others, and every
        // round is accounted for.
        let mut seen = Vec::new();
        for (n, b) in bundles.iter().enumerate() {
            let b = bundle::parse(b).unwrap();
            if (2..bundles.len() - 1).contains(&n) {
                assert_eq!(b.len(), 2, "listener {own}, bundle {n}");
            }
            for p in b.packets() {
                let parsed = packet::parse(p).unwrap();
                let stream = parsed.ext.unwrap().stream_id;
                assert_ne!(stream, own, "own packet forwarded back");
                let k = u64::from(parsed.header.seq);
                assert_eq!(&p[..p.len() - 8], &bodies[&(stream, k)][..]);
                seen.push((stream, k));
            }
        }
        seen.sort();
        let want: Vec<_> = (21..24u16)
            .filter(|&s| s != own)
            .flat_map(|s| (0..50).map(move |k| (s, k)))
            .collect();
        assert_eq!(seen, want, "listener {own}");
        let c = room.client_counters(id).unwrap();
        assert_eq!((c.received, c.accepted, c.forwarded), (50, 50, 100));
    }
}

#[test]
fn an_opus_packet_is_forwarded_with_its_codec_and_bytes() {
    let (mut room, ids) = forward_room(61);
    let mut sent = Sent::new();
    let header = Header {
        timestamp: 9,
        seq: 4,
        frames: 240,
        rate: SampleRate::Hz48000,
        format: SampleFormat::Pcm16,
        channels_in: 2,
        channels_out: 0,
    };
    let opus = [0xEC, 0x12, 0x34, 0x56, 0x78];
    let mut p = vec![0u8; MAX_PACKET_LEN];
    p[16..16 + opus.len()].copy_from_slice(&opus);
    let n = packet::encode_opus(&header, 61, opus.len(), &mut p).unwrap();
    p.truncate(n);
    assert_eq!(room.receive(ids[0], &p, 0), Received::Accepted);
    room.poll(BUNDLE_WAIT_US, &mut collect(&mut sent));
    for &id in &ids[1..] {
        let b = bundle::parse(&sent[&id][0]).unwrap();
        let back: Vec<&[u8]> = b.packets().collect();
        assert_eq!(back, [&p[..]], "the same bytes");
        let parsed = packet::parse(back[0]).unwrap();
        assert!(parsed.is_opus());
        assert_eq!(parsed.payload, &opus[..]);
    }
}

#[test]
fn an_echo_client_gets_its_own_packets_back_and_nobody_else_changes() {
    // Alone in its room: each packet comes straight back, in a bundle of its own stream.
    let mut room = MediaRoom::new(Mode::Forward, 0);
    let me = room.add_client(5, ClientKind::Browser, 0).unwrap();
    room.set_echo(me, true);
    let mut sent = Sent::new();
    for k in 0..20u64 {
        let t = tick_us(k);
        let p = browser_packet(k, HZ[0], AMP[0], None);
        assert_eq!(room.receive(me, &p, t), Received::Accepted);
        room.poll(t, &mut collect(&mut sent));
        // Not held for the bundle wait: it was all the bundle waited for.
        assert_eq!(sent[&me].len() as u64, k + 1, "packet {k} back at once");
        let b = bundle::parse(sent[&me].last().unwrap()).unwrap();
        let back: Vec<&[u8]> = b.packets().collect();
        assert_eq!(back.len(), 1);
        let parsed = packet::parse(back[0]).unwrap();
        assert_eq!(parsed.ext.unwrap().stream_id, 5);
        assert_eq!(
            &back[0][..back[0].len() - 8],
            &p[..],
            "the same audio, our stream id added"
        );
    }

    // In a room of three, the echo client hears itself and the others; they hear as before.
    let (mut room, ids) = forward_room(41);
    room.set_echo(ids[0], true);
    let mut sent = Sent::new();
    for k in 0..10u64 {
        let t = tick_us(k);
        for (i, &id) in ids.iter().enumerate() {
            room.receive(
                id,
                &browser_packet(k, HZ[i], AMP[i], None),
                t + 50 * i as u64,
            );
            room.poll(t + 50 * i as u64, &mut collect(&mut sent));
        }
    }
    room.poll(tick_us(10) + BUNDLE_WAIT_US, &mut collect(&mut sent));
    let streams_heard = |id: ClientId| {
        let mut s: Vec<u16> = sent[&id]
            .iter()
            .flat_map(|b| {
                bundle::parse(b)
                    .unwrap()
                    .packets()
                    .map(|p| packet::parse(p).unwrap().ext.unwrap().stream_id)
                    .collect::<Vec<_>>()
            })
            .collect();
        s.sort();
        s.dedup();
        s
    };
    assert_eq!(streams_heard(ids[0]), [41, 42, 43]);
    assert_eq!(streams_heard(ids[1]), [41, 43]);
    assert_eq!(streams_heard(ids[2]), [41, 42]);
    let c = room.client_counters(ids[0]).unwrap();
    assert_eq!(c.forwarded, 30, "to both others and back to itself");
}

#[test]
fn a_bundle_waits_at_most_one_millisecond() {
    let (mut room, ids) = forward_room(31);
    let mut sent = Sent::new();
    for (i, &id) in ids.iter().enumerate() {
        room.receive(id, &browser_packet(0, 375.0, 0.1, None), 10 * i as u64);
        room.poll(10 * i as u64, &mut collect(&mut sent));
    }
    room.poll(2_000, &mut collect(&mut sent));
    sent.clear();
    // Only client 0 sends this round: clients 1 and 2 wait for client 2 and 1 (still active).
    let t = 3_000;
    room.receive(ids[0], &browser_packet(1, 375.0, 0.1, None), t);
    assert_eq!(room.next_deadline(), t + BUNDLE_WAIT_US);
    room.poll(t + BUNDLE_WAIT_US - 1, &mut collect(&mut sent));
    assert!(sent.is_empty(), "flushed before its deadline");
    room.poll(t + BUNDLE_WAIT_US, &mut collect(&mut sent));
    for &id in &ids[1..] {
        assert_eq!(sent[&id].len(), 1);
        assert_eq!(bundle::parse(&sent[&id][0]).unwrap().len(), 1);
    }
    assert!(!sent.contains_key(&ids[0]));
    assert_eq!(room.next_deadline(), u64::MAX);
}

/// Levels (dB relative to each tone's own amplitude through the centre pan) of the four tones in
/// each listener's left channel, after 100 ticks of warm-up.
fn levels(sent: &Sent, ids: &[ClientId]) -> Vec<[f64; 4]> {
    ids.iter()
        .map(|id| {
            let (l, r) = decode_mix(&sent[id]);
            assert_eq!(l, r, "centred tones are the same in both channels");
            let l = &l[100 * 128..];
            std::array::from_fn(|j| db(amplitude(l, HZ[j]) / (AMP[j] * FRAC_1_SQRT_2)))
        })
        .collect()
}

#[test]
fn each_listener_hears_the_others_at_their_levels_and_not_itself() {
    let mut run = MixRun::new(Mode::Mix);
    run.run(400, |_, _, _| {});
    for (i, lv) in levels(&run.sent, &run.ids).iter().enumerate() {
        for (j, &got) in lv.iter().enumerate() {
            if i == j {
                assert!(got < -40.0, "listener {i} hears itself at {got} dB");
            } else {
                assert!(got.abs() < 0.5, "listener {i} hears {j} at {got} dB");
            }
        }
    }
    let c = run.room.room_counters();
    assert_eq!((c.ticks, c.late_ticks, c.skipped_ticks), (400, 0, 0));
    for &id in &run.ids {
        let c = run.room.client_counters(id).unwrap();
        assert_eq!(c.sent, 400);
        assert_eq!(c.concealed, 0);
    }
}

#[test]
fn each_browser_listener_gets_every_players_level_twenty_times_a_second() {
    let mut run = MixRun::new(Mode::Mix);
    // A listen-only browser (it never sends) and a personal fader: neither moves the readings.
    let quiet = run.room.add_client(50, ClientKind::Browser, 0).unwrap();
    run.room
        .set_strip(run.ids[0], 11, 0.1, 0.5, false, false)
        .unwrap();
    // 1,200 ticks (3.2 s): the RMS meter's 0.3 s time constant has settled.
    run.run(1_200, |_, _, _| {});
    let meters_of = |id: ClientId| -> Vec<Vec<u8>> {
        run.sent[&id]
            .iter()
            .filter(|m| meters::parse(m).is_ok())
            .cloned()
            .collect()
    };
    for id in run.ids.iter().copied().chain([quiet]) {
        let messages = meters_of(id);
        assert_eq!(
            messages.len() as u64,
            1_200 / METER_TICKS,
            "one per {METER_TICKS} ticks"
        );
        let last = meters::parse(messages.last().unwrap()).unwrap();
        let entries: Vec<_> = last.entries().collect();
        // Every sending player, the listener itself included; the silent one is not a source.
        let streams: Vec<u16> = entries.iter().map(|e| e.stream).collect();
        assert_eq!(streams, [10, 11, 12, 13]);
        for (i, e) in entries.iter().enumerate() {
            let peak = db(AMP[i]);
            let rms = db(AMP[i] * FRAC_1_SQRT_2);
            let got = e.levels.map(|c| f64::from(meters::code_dbfs(c).unwrap()));
            for (k, want) in [peak, peak, rms, rms].into_iter().enumerate() {
                assert!(
                    (got[k] - want).abs() < 0.1,
                    "stream {}: level {k} reads {} dBFS, tone {want:.2}",
                    e.stream,
                    got[k]
                );
            }
        }
    }
    let c = run.room.room_counters();
    assert_eq!(c.meter_messages, 5 * (1_200 / METER_TICKS));
    // The mix itself is untouched: one mix bundle per tick to every listener.
    assert_eq!(run.room.client_counters(run.ids[2]).unwrap().sent, 1_200);
}

#[test]
fn no_meters_in_forward_mode_and_none_to_a_jacktrip_listener() {
    let mut run = MixRun::new(Mode::Forward);
    let jt = run.jacktrip(128, 16, 2);
    run.run(200, |_, _, _| {});
    for id in run.ids.iter().chain([&jt]) {
        assert!(
            run.sent
                .get(id)
                .is_none_or(|m| m.iter().all(|m| meters::parse(m).is_err())),
            "meters sent in forward mode"
        );
    }
    assert_eq!(run.room.room_counters().meter_messages, 0);
    let mut mix = MixRun::new(Mode::Mix);
    let jt = mix.jacktrip(128, 16, 2);
    mix.run(200, |_, _, _| {});
    assert!(mix.sent[&jt].iter().all(|m| meters::parse(m).is_err()));
    assert_eq!(
        mix.room.room_counters().meter_messages,
        4 * (200 / METER_TICKS)
    );
}

#[test]
fn a_personal_gain_changes_only_its_listeners_mix() {
    let mut plain = MixRun::new(Mode::Mix);
    plain.run(300, |_, _, _| {});
    let mut changed = MixRun::new(Mode::Mix);
    let (a, b_stream) = (changed.ids[0], 11);
    changed
        .room
        .set_strip(a, b_stream, 0.5, 0.0, false, false)
        .unwrap();
    changed.room.set_master(a, 1.0).unwrap();
    changed.run(300, |_, _, _| {});
    assert_ne!(plain.sent[&a], changed.sent[&a]);
    for &id in &plain.ids[1..] {
        assert_eq!(
            plain.sent[&id], changed.sent[&id],
            "another listener's bytes changed"
        );
    }
    let lv = levels(&changed.sent, &changed.ids);
    assert!((lv[0][1] - db(0.5)).abs() < 0.5, "B at {} dB", lv[0][1]);
    assert!(lv[0][2].abs() < 0.5 && lv[0][3].abs() < 0.5);
    assert_eq!(
        changed.room.set_strip(a, 10, 1.0, 0.0, false, false),
        Err(MediaError::OwnVoice)
    );
    assert_eq!(
        changed.room.set_strip(a, 99, 1.0, 0.0, false, false),
        Err(MediaError::NoSuchSource)
    );
}

#[test]
fn a_jacktrip_listener_gets_its_own_format_in_forward_mode_too() {
    let mut run = MixRun::new(Mode::Forward);
    let jt = run.jacktrip(64, 24, 1);
    // The JackTrip client sends its own tone, 64-frame 24-bit mono, two packets a tick.
    run.run(400, |room, k, at| {
        for half in 0..2 {
            let n = 2 * k + half;
            let x = sine(n, 64, JT_HZ, JT_AMP);
            let p = packet_of(n, 64, SampleFormat::Pcm24, SampleRate::Hz48000, &[&x], None);
            assert_eq!(room.receive(jt, &p, at), Received::Accepted);
        }
    });
    let packets = &run.sent[&jt];
    assert_eq!(packets.len(), 800);
    let mut mono = Vec::new();
    for (n, p) in packets.iter().enumerate() {
        assert_eq!(p.len(), 16 + 64 * 3, "no trailer, 64 frames of 24-bit mono");
        let p = packet::parse(p).unwrap();
        let h = p.header;
        assert_eq!(
            (h.seq, h.frames, h.rate, h.format),
            (n as u16, 64, SampleRate::Hz48000, SampleFormat::Pcm24)
        );
        assert_eq!((h.channels_in, h.channels_out, p.channels), (1, 0, 1));
        assert!(p.ext.is_none());
        let (mut l, mut r) = ([0.0; 64], [0.0; 64]);
        p.decode_stereo(&mut l, &mut r);
        mono.extend_from_slice(&l);
    }
    let mono = &mono[100 * 128..];
    for j in 0..4 {
        let got = db(amplitude(mono, HZ[j]) / (AMP[j] * FRAC_1_SQRT_2));
        assert!(got.abs() < 0.5, "tone {j} at {got} dB");
    }
    let own = db(amplitude(mono, JT_HZ) / (JT_AMP * FRAC_1_SQRT_2));
    assert!(own < -40.0, "the JackTrip client hears itself at {own} dB");
    // Browsers, in forward mode, get its packets forwarded with its stream id.
    let b = bundle::parse(run.sent[&run.ids[0]].last().unwrap()).unwrap();
    let streams: Vec<u16> = b
        .packets()
        .map(|p| packet::parse(p).unwrap().ext.unwrap().stream_id)
        .collect();
    assert!(streams.contains(&40), "{streams:?}");
    assert!(!streams.contains(&10));
}

#[test]
fn a_jacktrip_listener_at_256_frames_gets_a_packet_every_second_tick() {
    let mut run = MixRun::new(Mode::Mix);
    let jt = run.jacktrip(256, 16, 2);
    run.run(100, |_, _, _| {});
    let packets = &run.sent[&jt];
    assert_eq!(packets.len(), 50);
    for (n, p) in packets.iter().enumerate() {
        assert_eq!(p.len(), 16 + 256 * 2 * 2);
        let p = packet::parse(p).unwrap();
        assert_eq!(
            (p.header.seq, p.header.frames, p.channels),
            (n as u16, 256, 2)
        );
    }
}

/// Everything the hostile client sends in round `k` (at `at`): garbage, a truncated packet, the
/// wrong rate, the wrong format, another client's stream id, and every tenth round a flood.
fn hostile(room: &mut MediaRoom, h: ClientId, k: u64, at: u64) {
    let good = browser_packet(k, 1125.0, 0.5, None);
    let x = sine(k, 128, 1125.0, 0.5);
    let messages: [Vec<u8>; 5] = [
        (0..300).map(|i| (i * 7 + k as usize) as u8).collect(),
        good[..good.len() - 5].to_vec(),
        packet_of(
            k,
            128,
            SampleFormat::Pcm16,
            SampleRate::Hz44100,
            &[&x, &x],
            None,
        ),
        {
            let mut p = good.clone();
            p[13] = 8; // 8-bit
            p
        },
        browser_packet(k, 1125.0, 0.5, Some(10)),
    ];
    let want = [
        DropReason::Malformed,
        DropReason::Malformed,
        DropReason::WrongRate,
        DropReason::WrongFormat,
        DropReason::Spoofed,
    ];
    for (m, reason) in messages.iter().zip(want) {
        match room.receive(h, m, at) {
            // Garbage is refused for whatever its bytes say first.
            Received::Dropped(r) => assert!(
                r == reason || r == DropReason::Flood || reason == DropReason::Malformed,
                "{r:?}"
            ),
            other => panic!("hostile message taken: {other:?}"),
        }
    }
    if k % 10 == 0 {
        for _ in 0..200 {
            let outcome = room.receive(h, &messages[4], at);
            assert!(matches!(outcome, Received::Dropped(_)));
        }
    }
}

#[test]
fn hostile_input_leaves_every_other_clients_bytes_unchanged() {
    for mode in [Mode::Forward, Mode::Mix] {
        let jt_format = JackTripFormat {
            frames: 128,
            bits: 16,
            channels: 2,
        };
        let run = |attack: bool| {
            let mut run = MixRun::new(mode);
            let h = run.room.add_client(50, ClientKind::Browser, 0).unwrap();
            let jt = run
                .room
                .add_client(51, ClientKind::JackTrip(jt_format), 0)
                .unwrap();
            run.run(200, |room, k, at| {
                if attack {
                    hostile(room, h, k, at);
                }
            });
            (run, h, jt)
        };
        let (quiet, _, jt) = run(false);
        let (attacked, h, _) = run(true);
        for id in quiet.ids.iter().chain([&jt]) {
            assert_eq!(
                quiet.sent[id], attacked.sent[id],
                "{mode:?}: {id:?} disturbed"
            );
        }
        let c = attacked.room.client_counters(h).unwrap();
        assert_eq!(c.accepted, 0);
        assert!(
            c.malformed > 0 && c.wrong_rate > 0 && c.wrong_format > 0,
            "{c:?}"
        );
        assert!(c.spoofed > 0 && c.flood > 0, "{c:?}");
        assert_eq!(
            c.received,
            c.malformed + c.wrong_rate + c.wrong_format + c.spoofed + c.flood
        );
        // The flood is cut to about twice its block rate: 200 extra messages every tenth round
        // are all but a burst's worth dropped as flood.
        assert!(c.flood >= 20 * (200 - ingest::BURST_PACKETS), "{c:?}");
    }
}

#[test]
fn exit_and_unknown_clients_are_reported() {
    let mut room = MediaRoom::new(Mode::Forward, 0);
    let format = JackTripFormat {
        frames: 64,
        bits: 16,
        channels: 2,
    };
    let jt = room.add_client(7, ClientKind::JackTrip(format), 0).unwrap();
    assert_eq!(room.receive(jt, &[0xFF; 63], 10), Received::Exit);
    assert_eq!(room.client_counters(jt).unwrap().exits, 1);
    // Its own format only: 128 frames from a 64-frame client is the wrong format.
    let p = browser_packet(0, 375.0, 0.1, None);
    assert_eq!(
        room.receive(jt, &p, 20),
        Received::Dropped(DropReason::WrongFormat)
    );
    room.remove_client(jt);
    assert_eq!(
        room.receive(jt, &p, 30),
        Received::Dropped(DropReason::UnknownClient)
    );
    assert_eq!(room.room_counters().unknown_client, 1);
    assert!(room.client_counters(jt).is_none());
    // The slot is reused under a new id; the old one still matches nobody.
    let again = room.add_client(7, ClientKind::Browser, 40).unwrap();
    assert_ne!(again, jt);
    assert_eq!(
        room.add_client(7, ClientKind::Browser, 40),
        Err(MediaError::StreamTaken)
    );
    assert_eq!(
        room.add_client(0, ClientKind::Browser, 40),
        Err(MediaError::BadStream)
    );
    assert_eq!(
        room.add_client(65535, ClientKind::Browser, 40),
        Err(MediaError::BadStream)
    );
    let bad = JackTripFormat {
        frames: 100,
        bits: 16,
        channels: 2,
    };
    assert_eq!(
        room.add_client(8, ClientKind::JackTrip(bad), 40),
        Err(MediaError::BadFormat)
    );
}

#[test]
fn a_late_poll_is_counted_and_catches_up_without_a_burst() {
    let mut room = MediaRoom::new(Mode::Mix, 0);
    let id = room.add_client(5, ClientKind::Browser, 0).unwrap();
    let mut sent = Sent::new();
    room.poll(0, &mut collect(&mut sent));
    assert_eq!(room.next_deadline(), tick_us(1));
    // Ten ticks late: two run, the other nine are skipped, the lateness is recorded.
    let late = tick_us(11);
    room.poll(late, &mut collect(&mut sent));
    let c = room.room_counters();
    assert_eq!((c.ticks, c.late_ticks, c.skipped_ticks), (3, 1, 9));
    assert_eq!(c.max_tick_lateness_us, late - tick_us(1));
    assert_eq!(sent[&id].len(), 3);
    // The schedule holds: the next tick is tick 12, at its exact time.
    assert_eq!(room.next_deadline(), tick_us(12));
    assert_eq!(tick_us(3), 8_000);
}

/// A room that carries part of a larger one: its four players and a link to the home hub, whose
/// mix holds a remote tone already at the default level (amplitude · cos π/4). Each tick the link
/// gets the four players' raw sum (unit gain, unpanned); each listener hears the remote tone
/// at the level of a local voice, besides the other local players, and never itself.
#[test]
fn a_linked_room_sends_its_raw_sum_and_adds_the_home_mix_at_unit_gain() {
    const REMOTE_HZ: f64 = 1312.5;
    const REMOTE_AMP: f64 = 0.3;
    let mut run = MixRun::new(Mode::Mix);
    run.room.set_cascade(true, 0);
    assert!(run.room.has_cascade());
    run.run(400, |room, k, at| {
        let x = sine(k, 128, REMOTE_HZ, REMOTE_AMP * FRAC_1_SQRT_2);
        let p = packet_of(
            k,
            128,
            SampleFormat::Pcm16,
            SampleRate::Hz48000,
            &[&x, &x],
            None,
        );
        assert_eq!(room.receive_cascade(&p, at), Received::Accepted);
    });
    // What went to the home hub: plain JackTrip packets, 128 frames of 16-bit stereo, one per
    // tick, holding every local tone at its own amplitude and nothing of the remote one.
    let link = &run.sent[&CASCADE];
    assert_eq!(link.len(), 400);
    let mut sum = Vec::new();
    for (n, p) in link.iter().enumerate() {
        let p = packet::parse(p).unwrap();
        assert!(p.ext.is_none());
        assert_eq!((p.header.seq, p.frames(), p.channels), (n as u16, 128, 2));
        let (mut l, mut r) = ([0.0; 128], [0.0; 128]);
        p.decode_stereo(&mut l, &mut r);
        assert_eq!(l, r);
        sum.extend_from_slice(&l);
    }
    let sum = &sum[100 * 128..];
    for j in 0..4 {
        let got = db(amplitude(sum, HZ[j]) / AMP[j]);
        assert!(got.abs() < 0.05, "the link carries tone {j} at {got} dB");
    }
    assert!(
        db(amplitude(sum, REMOTE_HZ)) < -90.0,
        "no remote tone sent back"
    );
    // What each listener hears.
    for (i, lv) in levels(&run.sent, &run.ids).iter().enumerate() {
        for (j, &got) in lv.iter().enumerate() {
            if i == j {
                assert!(got < -40.0, "listener {i} hears itself at {got} dB");
            } else {
                assert!(got.abs() < 0.5, "listener {i} hears {j} at {got} dB");
            }
        }
        let (l, _) = decode_mix(&run.sent[&run.ids[i]]);
        let remote = db(amplitude(&l[100 * 128..], REMOTE_HZ) / (REMOTE_AMP * FRAC_1_SQRT_2));
        assert!(
            remote.abs() < 0.1,
            "listener {i} hears the remote tone at {remote} dB"
        );
    }
    let (c, sent) = run.room.cascade_counters().unwrap();
    assert_eq!((c.accepted, sent), (400, 400));
}

#[test]
fn a_link_drops_bad_packets_and_a_room_without_one_refuses_them() {
    let mut room = MediaRoom::new(Mode::Mix, 0);
    let x = sine(0, 128, 375.0, 0.1);
    let good = packet_of(
        0,
        128,
        SampleFormat::Pcm16,
        SampleRate::Hz48000,
        &[&x, &x],
        None,
    );
    assert_eq!(
        room.receive_cascade(&good, 1),
        Received::Dropped(DropReason::UnknownClient)
    );
    room.set_cascade(true, 0);
    let x64 = sine(0, 64, 375.0, 0.1);
    let bad = [
        vec![0x5a; 300],
        good[..100].to_vec(),
        packet_of(
            0,
            64,
            SampleFormat::Pcm16,
            SampleRate::Hz48000,
            &[&x64],
            None,
        ),
        packet_of(
            0,
            128,
            SampleFormat::Pcm16,
            SampleRate::Hz44100,
            &[&x],
            None,
        ),
    ];
    for b in &bad {
        assert!(matches!(room.receive_cascade(b, 2), Received::Dropped(_)));
    }
    assert_eq!(room.receive_cascade(&good, 3), Received::Accepted);
    let (c, _) = room.cascade_counters().unwrap();
    assert_eq!((c.received, c.accepted), (5, 1));
    room.set_cascade(false, 4);
    assert_eq!(room.cascade_counters(), None);
}

/// The packets of `stream` in a listener's bundles, in order.
fn packets_of(messages: &[Vec<u8>], stream: u16) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for b in messages {
        for p in bundle::parse(b).unwrap().packets() {
            if packet::parse(p).unwrap().ext.unwrap().stream_id == stream {
                out.push(p.to_vec());
            }
        }
    }
    out
}

/// Plays Opus packets through a peer with a decoder, as a browser's engine would, at the
/// pace they were made (one quantum pulled per 128 frames): the left channel.
fn play_opus(packets: &[Vec<u8>]) -> Vec<f32> {
    use crate::hub::opus_stream::StreamDecoder;
    let mut peer = Peer::new(&EngineConfig::default());
    peer.set_decoder(Box::new(StreamDecoder::new().unwrap()));
    let frames = usize::from(packet::parse(&packets[0]).unwrap().header.frames);
    let quanta = packets.len() * frames / 128;
    let (mut l, mut r) = ([0.0f32; 128], [0.0f32; 128]);
    let mut out = Vec::new();
    let mut k = 0;
    for q in 0..quanta {
        let now = (q * 128) as u64;
        while k < packets.len() && ((k + 1) * frames) as u64 <= now {
            peer.push(&packet::parse(&packets[k]).unwrap(), now);
            k += 1;
        }
        peer.pull(now, &mut l, &mut r);
        out.extend_from_slice(&l);
    }
    out
}

/// Checks Opus packets of one stream from its start: `frames`-sample frames numbered from 0
/// without a gap, each after the first carrying the previous frame's copy.
fn assert_opus_stream(packets: &[Vec<u8>], frames: usize) {
    for (n, p) in packets.iter().enumerate() {
        let p = packet::parse(p).unwrap();
        assert!(p.is_opus());
        assert_eq!(
            (usize::from(p.header.frames), usize::from(p.header.seq)),
            (frames, n)
        );
        assert_eq!(p.redundant.is_empty(), n == 0, "frame {n}");
    }
}

#[test]
fn each_listener_takes_its_layer_and_each_layer_is_encoded_once() {
    // Sender 31 plays 750 Hz; 32 and 35 take Opus at 128 kbit/s, 33 takes the packets as
    // sent, 34 Opus at 64 kbit/s.
    let (mut room, ids) = layered_room(
        31,
        5,
        &[(1, Layer::Opus128), (4, Layer::Opus128), (3, Layer::Opus64)],
    );
    assert_eq!(room.layer(ids[2]), Some(Layer::AsSent));
    let mut sent = Sent::new();
    let blocks = 1500u64; // 4 s
    for k in 0..blocks {
        let t = tick_us(k);
        room.receive(ids[0], &browser_packet(k, 750.0, 0.2, Some(31)), t);
        room.poll(t, &mut collect(&mut sent));
    }
    room.poll(tick_us(blocks) + BUNDLE_WAIT_US, &mut collect(&mut sent));

    // As sent: the sender's bytes.
    let plain = packets_of(&sent[&ids[2]], 31);
    assert_eq!(plain.len(), blocks as usize);
    assert!(plain.iter().all(|p| !packet::parse(p).unwrap().is_opus()));
    // Opus: every frame, numbered without a gap, at its layer's frame and at level.
    for (who, frames, min_db) in [(1usize, 120usize, -0.5), (4, 120, -0.5), (3, 240, -0.5)] {
        let ps = packets_of(&sent[&ids[who]], 31);
        assert_eq!(ps.len(), blocks as usize * 128 / frames, "listener {who}");
        assert_opus_stream(&ps, frames);
        let out = play_opus(&ps);
        let steady = &out[out.len() - 48_000..];
        let level = db(amplitude(steady, 750.0) / 0.2);
        println!("listener {who} ({frames}-sample Opus): 750 Hz at {level:+.2} dB");
        assert!(
            level > min_db && level < 0.5,
            "listener {who}: {level:.2} dB"
        );
    }
    // Encoded once per frame and layer, whatever the listeners: 1500 blocks of 128 = 1600
    // frames of 120 and 800 of 240.
    let c = room.layer_counters(ids[0]).unwrap();
    assert_eq!(
        (c.encoded, c.skipped, c.late, c.failed),
        (1600 + 800, 0, 0, 0)
    );
    // Nobody sends to the others: their layers encoded nothing.
    assert_eq!(room.layer_counters(ids[2]).unwrap().encoded, 0);
}

/// Plays a listener's Opus packets through a peer with a decoder, as a browser's engine would:
/// each pushed once its frame's last sample was due (its number × frames), one quantum pulled
/// per 128 frames, the numbers never sent concealed by the decoder. The left channel.
fn play_opus_numbered(packets: &[Vec<u8>]) -> (Vec<f32>, Box<Peer>) {
    use crate::hub::opus_stream::StreamDecoder;
    let mut peer = Peer::new(&EngineConfig::default());
    peer.set_decoder(Box::new(StreamDecoder::new().unwrap()));
    let parsed: Vec<_> = packets.iter().map(|p| packet::parse(p).unwrap()).collect();
    let frames = usize::from(parsed[0].header.frames);
    let due = |k: usize| (usize::from(parsed[k].header.seq) + 1) * frames;
    let (mut l, mut r) = ([0.0f32; 128], [0.0f32; 128]);
    let mut out = Vec::new();
    let mut k = 0;
    for q in 0..due(parsed.len() - 1) / 128 + 40 {
        let now = q * 128;
        while k < parsed.len() && due(k) <= now {
            peer.push(&parsed[k], now as u64);
            k += 1;
        }
        peer.pull(now as u64, &mut l, &mut r);
        out.extend_from_slice(&l);
    }
    (out, peer)
}

/// Sender 41 plays `hz` at 0.2 in 128-frame blocks, `blocks` of them, `lost` never reaching
/// the hub; 42 takes `layer`. Its packets of 41's stream, and 41's layer counters.
fn layer_through_loss(
    layer: Layer,
    hz: f64,
    blocks: u64,
    lost: std::ops::Range<u64>,
) -> (Vec<Vec<u8>>, layers::LayerCounters) {
    let mut room = MediaRoom::new(Mode::Forward, 0);
    let a = room.add_client(41, ClientKind::Browser, 0).unwrap();
    let b = room.add_client(42, ClientKind::Browser, 0).unwrap();
    room.set_layer(b, layer).unwrap();
    let mut sent = Sent::new();
    for k in (0..blocks).filter(|k| !lost.contains(k)) {
        let t = tick_us(k);
        room.receive(a, &browser_packet(k, hz, 0.2, Some(41)), t);
        room.poll(t, &mut collect(&mut sent));
    }
    room.poll(tick_us(blocks) + BUNDLE_WAIT_US, &mut collect(&mut sent));
    (packets_of(&sent[&b], 41), room.layer_counters(a).unwrap())
}

#[test]
fn a_short_gap_in_the_sender_is_concealed_into_the_layer_and_a_late_packet_is_not_reencoded() {
    let mut room = MediaRoom::new(Mode::Forward, 0);
    let a = room.add_client(41, ClientKind::Browser, 0).unwrap();
    let b = room.add_client(42, ClientKind::Browser, 0).unwrap();
    room.set_layer(b, Layer::Opus64).unwrap();
    let mut sent = Sent::new();
    for k in 0..100u64 {
        // Blocks 40..=44 are lost; block 20 comes again, late, after block 60.
        if (40..45).contains(&k) {
            continue;
        }
        let t = tick_us(k);
        room.receive(a, &browser_packet(k, 750.0, 0.2, Some(41)), t);
        if k == 60 {
            room.receive(a, &browser_packet(20, 750.0, 0.2, Some(41)), t);
        }
        room.poll(t, &mut collect(&mut sent));
    }
    room.poll(tick_us(100) + BUNDLE_WAIT_US, &mut collect(&mut sent));
    let ps = packets_of(&sent[&b], 41);
    let c = room.layer_counters(a).unwrap();
    // The 5 lost blocks (640 frames, within the concealment's 50 ms) are concealed into the
    // stream: 100 blocks of 128 make 53 frames of 240, numbered without a gap, each after the
    // first carrying the previous frame's copy.
    assert_opus_stream(&ps, 240);
    assert_eq!(ps.len(), 53);
    assert_eq!((c.concealed, c.skipped, c.late), (5, 0, 1), "{c:?}");
    // So the listener loses nothing, and hears the tone at its level to the end.
    let (out, peer) = play_opus_numbered(&ps);
    let j = peer.jitter_counters();
    assert_eq!((j.lost, j.concealed, j.undecodable), (0, 0, 0), "{j:?}");
    let end = &out[out.len() - 48 * 128..out.len() - 40 * 128];
    let level = db(amplitude(end, 750.0) / 0.2);
    assert!(level.abs() < 1.0, "750 Hz at {level:+.2} dB after the gap");
}

#[test]
fn a_long_gap_is_concealed_until_faded_out_and_only_the_rest_skipped() {
    // Blocks 40..80 lost (5120 frames). The concealment fades out after 2400 frames: 19 blocks
    // (2432 frames) are concealed into the stream, the other 21 (2688 frames) skipped. Before
    // the gap, 59 blocks (7552 frames) made 31 frames of 240 and 112 samples, dropped with the
    // gap: the numbers 31..43 (12, for 2800 frames) are never sent.
    let (ps, c) = layer_through_loss(Layer::Opus64, 750.0, 120, 40..80);
    assert_eq!((c.concealed, c.skipped), (19, 12), "{c:?}");
    let seqs: Vec<u16> = ps
        .iter()
        .map(|p| packet::parse(p).unwrap().header.seq)
        .collect();
    assert_eq!(&seqs[..31], &(0..31).collect::<Vec<_>>()[..]);
    assert_eq!(seqs[31], 43, "{seqs:?}");
    assert!(seqs.windows(2).skip(31).all(|w| w[1] == w[0] + 1));
    // The first frame after the skip starts anew: it carries no copy.
    assert!(packet::parse(&ps[31]).unwrap().redundant.is_empty());
    let (out, peer) = play_opus_numbered(&ps);
    assert_eq!(peer.jitter_counters().lost, 12);
    let end = &out[out.len() - 48 * 128..out.len() - 40 * 128];
    let level = db(amplitude(end, 750.0) / 0.2);
    assert!(level.abs() < 1.0, "750 Hz at {level:+.2} dB after the gap");
}

#[test]
fn a_sender_that_gaps_before_every_packet_gets_no_more_concealment_than_time_passes() {
    // 40 blocks in order, then 100 packets at the real pace (one per 128 frames), each 50
    // numbers after the last: every one a gap of 49 blocks. The first gap is concealed until
    // the fade (19 blocks, out of the full budget); after that the budget refills one block's
    // time per packet, so about one block per packet is concealed and the rest skipped and
    // counted. Unbounded, every packet would cost 19 concealed blocks (1,900).
    let mut room = MediaRoom::new(Mode::Forward, 0);
    let a = room.add_client(41, ClientKind::Browser, 0).unwrap();
    let b = room.add_client(42, ClientKind::Browser, 0).unwrap();
    room.set_layer(b, Layer::Opus64).unwrap();
    let mut sent = Sent::new();
    let numbers: Vec<u64> = (0..40).chain((1..=100).map(|j| 39 + 50 * j)).collect();
    for (i, &k) in numbers.iter().enumerate() {
        let t = tick_us(i as u64);
        room.receive(a, &browser_packet(k, 750.0, 0.2, Some(41)), t);
        room.poll(t, &mut collect(&mut sent));
    }
    let c = room.layer_counters(a).unwrap();
    // The budget: 55 ms at the start and the 100 packets' 267 ms since, in 128-frame blocks.
    println!(
        "100 packets each after a 49-block gap: {} blocks concealed, {} over the budget",
        c.concealed, c.over_budget
    );
    let budget_blocks = (2656 + 100 * 128) / 128;
    assert!(c.concealed <= budget_blocks, "{c:?}");
    assert!(
        c.concealed >= 100,
        "the refill is concealed, not lost: {c:?}"
    );
    assert!(c.over_budget >= 99, "{c:?}");
    // What the encoder coded: the sender's real frames and at most as much again (+ the
    // first budget), in 240-frame Opus frames.
    let real_frames = numbers.len() as u64 * 128;
    assert!(c.encoded * 240 <= 2 * real_frames + 2656 + 240, "{c:?}");
}

#[test]
fn a_listener_on_an_opus_layer_hears_no_click_louder_than_the_tone_across_a_gap() {
    // Before the layers concealed a gap, the encoder saw the signal jump while the listener's
    // decoder concealed the numbers skipped, and the first frame after the gap added to that
    // concealment: 4.9-7.3 dB over the tone's level (220 to 550 Hz, both layers). Now the
    // largest sample anywhere stays within 1 dB of the tone's.
    let mut worst = (f64::MIN, 0.0, 0, Layer::AsSent);
    for layer in [Layer::Opus128, Layer::Opus64] {
        for hz in [220.0, 440.0, 550.0] {
            for gap in [1, 2, 3, 7, 19, 40] {
                let (ps, _) = layer_through_loss(layer, hz, 120, 50..50 + gap);
                let (out, _) = play_opus_numbered(&ps);
                // From the stream's first sound (its start has a test of its own, above).
                let first = out.iter().position(|x| x.abs() > 1e-3).unwrap();
                let peak = out[first..].iter().fold(0.0f32, |m, x| m.max(x.abs()));
                let over = db(f64::from(peak) / 0.2);
                if over > worst.0 {
                    worst = (over, hz, gap, layer);
                }
            }
        }
    }
    println!(
        "the loudest sample across gaps: {:+.2} dB over the tone ({} Hz, {} blocks lost, {})",
        worst.0,
        worst.1,
        worst.2,
        worst.3.name()
    );
    assert!(worst.0 < 1.0, "{worst:?}");
}

#[test]
fn a_jacktrip_client_takes_no_layer_and_a_departed_listener_frees_its_layer() {
    let mut room = MediaRoom::new(Mode::Forward, 0);
    let a = room.add_client(51, ClientKind::Browser, 0).unwrap();
    let b = room.add_client(52, ClientKind::Browser, 0).unwrap();
    let f = JackTripFormat {
        frames: 128,
        bits: 16,
        channels: 2,
    };
    let j = room.add_client(53, ClientKind::JackTrip(f), 0).unwrap();
    assert_eq!(
        room.set_layer(j, Layer::Opus64),
        Err(MediaError::NotBrowser)
    );
    room.set_layer(b, Layer::Opus64).unwrap();
    room.remove_client(b);
    assert_eq!(
        room.set_layer(b, Layer::Opus64),
        Err(MediaError::NoSuchClient)
    );
    // Nobody takes Opus any more: the sender's blocks are not encoded.
    for k in 0..20u64 {
        room.receive(a, &browser_packet(k, 750.0, 0.2, Some(51)), tick_us(k));
    }
    assert_eq!(room.layer_counters(a).unwrap().encoded, 0);
    assert_eq!(Layer::from_name("opus-128"), Some(Layer::Opus128));
    assert_eq!(Layer::from_name("flac"), None);
}

/// The bundles of a listener's messages (its meters passed over).
fn bundles_of(messages: &[Vec<u8>]) -> Vec<Vec<u8>> {
    messages
        .iter()
        .filter(|m| meters::parse(m).is_err())
        .cloned()
        .collect()
}

#[test]
fn a_mix_listener_on_an_opus_layer_gets_its_own_mix_as_opus_and_the_others_keep_pcm() {
    // Listeners 1 and 2 take Opus 128 and Opus 64; 0 and 3 keep the PCM16 mix.
    let mut run = MixRun::new(Mode::Mix);
    run.room.set_layer(run.ids[1], Layer::Opus128).unwrap();
    run.room.set_layer(run.ids[2], Layer::Opus64).unwrap();
    // 600 ticks are 640 frames of 120 and 320 of 240, none left over; listener 1 goes back to
    // PCM after them, for ten ticks more.
    let ticks = 600u64;
    let back = run.ids[1];
    run.run(ticks + 10, |room, k, _| {
        if k == ticks - 1 {
            room.set_layer(back, Layer::AsSent).unwrap();
        }
    });

    // The PCM listeners: one 128-frame packet a tick, every other tone at its level.
    for i in [0usize, 3] {
        let (l, _) = decode_mix(&run.sent[&run.ids[i]]);
        assert_eq!(l.len(), (ticks + 10) as usize * 128);
        let l = &l[100 * 128..];
        for j in (0..4).filter(|&j| j != i) {
            let got = db(amplitude(l, HZ[j]) / (AMP[j] * FRAC_1_SQRT_2));
            assert!(got.abs() < 0.5, "PCM listener {i} hears {j} at {got:.2} dB");
        }
    }
    // The Opus listeners: every frame of the ticks' samples, numbered without a gap, each after
    // the first carrying the previous one's copy; at most two a bundle, none empty.
    for (i, frames) in [(1usize, 120usize), (2, 240)] {
        let mut bundles = bundles_of(&run.sent[&run.ids[i]]);
        if i == 1 {
            // Back to PCM: the last ten ticks are PCM16 blocks again.
            let pcm = bundles.split_off(bundles.len() - 10);
            assert_eq!(decode_mix(&pcm).0.len(), 10 * 128);
        }
        let mut counts = [0usize; 3];
        for b in &bundles {
            counts[bundle::parse(b).unwrap().len()] += 1;
        }
        assert_eq!(counts[0], 0);
        let ps = packets_of(&bundles, MIX_STREAM);
        let opus_ticks = if i == 1 { ticks } else { ticks + 10 };
        assert_eq!(ps.len(), opus_ticks as usize * 128 / frames, "listener {i}");
        assert_eq!(counts[1] + 2 * counts[2], ps.len());
        assert_opus_stream(&ps, frames);
        let c = run.room.mix_opus_counters(run.ids[i]).unwrap();
        assert_eq!((c.encoded, c.failed), (ps.len() as u64, 0));
        // Decoded as the browser's engine would: the others at their levels, not itself.
        let out = play_opus(&ps);
        let steady = &out[out.len() - 48_000..];
        for j in 0..4 {
            let got = db(amplitude(steady, HZ[j]) / (AMP[j] * FRAC_1_SQRT_2));
            println!("Opus {frames} listener {i} hears {j} at {got:+.2} dB");
            if i == j {
                assert!(got < -30.0, "listener {i} hears itself at {got:.2} dB");
            } else {
                assert!(got.abs() < 1.0, "listener {i} hears {j} at {got:.2} dB");
            }
        }
    }
}

/// A chord's tones (whole cycles in a second) and amplitudes: a mono instrument's sound.
const CHORD: [(f64, f64); 7] = [
    (220.0, 0.12),
    (440.0, 0.10),
    (660.0, 0.08),
    (880.0, 0.06),
    (1320.0, 0.05),
    (2640.0, 0.03),
    (5280.0, 0.02),
];

/// Block `k` of [`CHORD`], 128 frames.
fn chord(k: u64) -> Vec<f32> {
    let mut x = vec![0.0f32; 128];
    for (hz, amp) in CHORD {
        for (a, b) in x.iter_mut().zip(sine(k, 128, hz, amp)) {
            *a += b;
        }
    }
    x
}

/// Signal to noise and distortion of `x` (a whole second at 48 kHz) holding [`CHORD`], dB: each
/// tone is fitted (the tones are orthogonal over the second) and what remains is the noise.
fn chord_sinad_db(x: &[f32]) -> f64 {
    assert_eq!(x.len(), 48_000);
    let mut rest: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let mut signal = 0.0;
    for (hz, _) in CHORD {
        let (mut re, mut im) = (0.0, 0.0);
        for (n, &v) in rest.iter().enumerate() {
            let ph = 2.0 * PI * hz * n as f64 / 48_000.0;
            re += v * ph.cos();
            im += v * ph.sin();
        }
        let (a, b) = (2.0 * re / 48_000.0, 2.0 * im / 48_000.0);
        signal += (a * a + b * b) / 2.0;
        for (n, v) in rest.iter_mut().enumerate() {
            let ph = 2.0 * PI * hz * n as f64 / 48_000.0;
            *v -= a * ph.cos() + b * ph.sin();
        }
    }
    let noise = rest.iter().map(|v| v * v).sum::<f64>() / 48_000.0;
    10.0 * (signal / noise.max(1e-24)).log10()
}

#[test]
fn a_mono_sender_is_coded_mono_in_every_layer_and_sounds_better_for_it() {
    // Senders 51 (mono) and 52 (the same chord as two equal channels); 53 takes Opus at 128
    // kbit/s, 54 at 64.
    let (mut room, ids) = layered_room(51, 4, &[(2, Layer::Opus128), (3, Layer::Opus64)]);
    let mut sent = Sent::new();
    let blocks = 1500u64; // 4 s
    for k in 0..blocks {
        let t = tick_us(k);
        let x = chord(k);
        let (mono, stereo): (&[&[f32]], &[&[f32]]) = (&[&x], &[&x, &x]);
        for (id, planar, stream) in [(ids[0], mono, 51), (ids[1], stereo, 52)] {
            let p = packet_of(
                k,
                128,
                SampleFormat::Pcm16,
                SampleRate::Hz48000,
                planar,
                Some(stream),
            );
            room.receive(id, &p, t);
        }
        room.poll(t, &mut collect(&mut sent));
    }
    room.poll(tick_us(blocks) + BUNDLE_WAIT_US, &mut collect(&mut sent));

    for (who, layer) in [(2usize, "opus-128"), (3, "opus-64")] {
        let mut sinad = [0.0; 2];
        for (i, stream) in [51u16, 52].into_iter().enumerate() {
            let ps = packets_of(&sent[&ids[who]], stream);
            assert_eq!(ps.len(), blocks as usize * 128 / [120, 240][who - 2]);
            for p in &ps {
                let p = packet::parse(p).unwrap();
                // The header and the Opus packet's own table-of-contents byte (its stereo
                // flag, 0x04) say what was coded.
                let (channels, toc_stereo) = (p.channels, p.payload[0] & 0x04 != 0);
                assert_eq!(
                    (channels, toc_stereo),
                    [(1, false), (2, true)][i],
                    "{layer}"
                );
            }
            let out = play_opus(&ps);
            sinad[i] = chord_sinad_db(&out[out.len() - 48_000..]);
        }
        println!(
            "{layer}: a mono chord coded mono {:.1} dB SINAD, as two equal channels {:.1} dB",
            sinad[0], sinad[1]
        );
        assert!(sinad[0] > sinad[1] + 0.5, "{layer}: {sinad:?}");
    }
}

#[test]
fn a_listener_starting_on_an_opus_layer_hears_the_tone_at_its_level_from_the_first_10_ms() {
    // The peer's playout starts at its target by dropping the frames that waited while its
    // delay estimate formed. Opus codes band energies against the frames before, so a decoder
    // that first saw a later frame played the first 100 ms up to +5.2 dB (220 Hz, 2.5 ms
    // frames) and -9.5 dB (440 Hz) off the tone. The dropped frames now go through the
    // decoder unplayed: every 10 ms from the first sound holds its level within 0.5 dB.
    let mut worst = (0.0f64, 0.0, 0, Layer::AsSent);
    for layer in [Layer::Opus128, Layer::Opus64] {
        for hz in [220.0, 440.0, 550.0] {
            let (ps, _) = layer_through_loss(layer, hz, 120, 0..0);
            let (out, peer) = play_opus_numbered(&ps);
            assert!(
                peer.jitter_counters().discarded > 0,
                "the start dropped frames"
            );
            let first = out.iter().position(|x| x.abs() > 1e-3).unwrap();
            for w in 0..12 {
                let s = &out[first + w * 480..first + (w + 1) * 480];
                let peak = s.iter().fold(0.0f32, |m, x| m.max(x.abs()));
                let off = db(f64::from(peak) / 0.2);
                if off.abs() > worst.0.abs() {
                    worst = (off, hz, w, layer);
                }
            }
        }
    }
    println!(
        "the first 120 ms: at most {:+.2} dB off the tone ({} Hz, window {}, {})",
        worst.0,
        worst.1,
        worst.2,
        worst.3.name()
    );
    assert!(worst.0.abs() < 0.5, "{worst:?}");
}

#[test]
fn a_stream_starts_without_a_click_whatever_its_block() {
    // Playout starts at its target by dropping the frames above it from the first block,
    // which fades in from silence over 128 frames. The fade began before the drop, so a block
    // longer than the fade (240-frame Opus) could start on a step up to half the tone's
    // amplitude (14 times the tone's own largest step at 220 Hz). Now the first 5 ms step no
    // more than the tone does.
    let mut worst = (0.0f64, 0.0, Layer::AsSent);
    for layer in [Layer::AsSent, Layer::Opus128, Layer::Opus64] {
        for hz in [220.0, 440.0, 550.0, 750.0] {
            let (ps, _) = layer_through_loss(layer, hz, 120, 0..0);
            let (out, _) = play_opus_numbered(&ps);
            let first = out.iter().position(|x| x.abs() > 1e-4).unwrap();
            let step = (first.max(1)..first + 240)
                .map(|n| (out[n] - out[n - 1]).abs())
                .fold(0.0f32, f32::max);
            // The tone's largest step: amplitude × 2π f / rate.
            let ratio = f64::from(step) / (0.2 * 2.0 * std::f64::consts::PI * hz / 48_000.0);
            if ratio > worst.0 {
                worst = (ratio, hz, layer);
            }
        }
    }
    println!(
        "a stream's first 5 ms: largest step {:.2} times the tone's ({} Hz, {})",
        worst.0,
        worst.1,
        worst.2.name()
    );
    assert!(worst.0 < 1.1, "{worst:?}");
}
