//! The Opus path allocates nothing per block: a counting global allocator watches a peer
//! playing a real Opus stream through the native decoder (the worklet's engine plays it the same
//! way through the codec module) for seconds, with lost frames concealed by the decoder, garbage
//! frames (refused, or decoded to whatever libopus makes of them), sequence numbers wrapping, and a pause after which the sender's
//! numbering jumps (a restarted stream, which resets the decoder); and the encoder making that
//! stream, frame by frame. The peer, its decoder and the encoder are made before the watched
//! region, as the worklet makes them off the render path; libopus's own state is allocated then,
//! in C (its scratch is on the stack), so it is not what is counted here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tutti_core::alloc_watch::{calls, watched, Counting};
use tutti_core::codec::Encoder as _;
use tutti_core::engine::{EngineConfig, Peer, QUANTUM};
use tutti_core::packet::{encode_opus, parse, Header, SampleFormat, SampleRate, HEADER_LEN};
use tutti_server::hub::opus_stream::{Call, StreamDecoder, StreamEncoder, Watched};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The count is the binary's: one test watches at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const RATE: f64 = 48_000.0;
const AMP: f64 = 0.4;

/// What the jitter buffer asked of its decoder: frames decoded, concealed, refused, resets.
#[derive(Default)]
struct Asked {
    decoded: AtomicU64,
    concealed: AtomicU64,
    refused: AtomicU64,
    resets: AtomicU64,
}

/// A sender of a 440 Hz sine as Opus frames of `FRAMES` samples, `channels` 1 or 2, framed as
/// packets in place in `buf`. Nothing here allocates once made.
struct Sender<const FRAMES: usize> {
    enc: StreamEncoder,
    channels: u8,
    buf: [u8; 1500],
}

impl<const FRAMES: usize> Sender<FRAMES> {
    /// Frame `k` (its samples from `k × FRAMES`), numbered `seq`: the packet's length in `buf`.
    fn frame(&mut self, k: u64, seq: u16) -> usize {
        let mut l = [0.0f32; FRAMES];
        let mut r = [0.0f32; FRAMES];
        for (i, (l, r)) in l.iter_mut().zip(&mut r).enumerate() {
            let t = (k as usize * FRAMES + i) as f64 / RATE;
            *l = (AMP * (std::f64::consts::TAU * 440.0 * t).sin()) as f32;
            *r = -*l;
        }
        let right = (self.channels == 2).then_some(&r[..]);
        let n = self
            .enc
            .encode(&l, right, &mut self.buf[HEADER_LEN..])
            .unwrap();
        let header = Header {
            timestamp: 0,
            seq,
            frames: FRAMES as u16,
            rate: SampleRate::Hz48000,
            format: SampleFormat::Pcm16,
            channels_in: self.channels,
            channels_out: 0,
        };
        encode_opus(&header, 0, n, &mut self.buf).unwrap()
    }
}

/// Spoils an Opus frame in place, three ways (`how`): a table of contents coding another
/// length (refused before libopus sees it); the stream's frame length in a one-frame code-3
/// packet whose padding runs past its end (refused by libopus); the stream's table of contents
/// over noise (libopus decodes it to whatever it makes of it).
fn spoil(frame: &mut [u8], how: usize) {
    let toc = frame[0];
    frame[1..].fill(0xA5);
    match how {
        0 => frame[0] = 0x00,
        1 => frame[..3].copy_from_slice(&[toc | 0x03, 0x41, 0xFE]),
        _ => {}
    }
}

/// Amplitude of 440 Hz in `x`, Hann-windowed single-bin DFT.
fn amplitude_440(x: &[f32]) -> f64 {
    let (mut re, mut im, mut w) = (0.0, 0.0, 0.0);
    for (i, &v) in x.iter().enumerate() {
        let h = 0.5 - 0.5 * (std::f64::consts::TAU * i as f64 / x.len() as f64).cos();
        let ph = std::f64::consts::TAU * 440.0 * i as f64 / RATE;
        re += h * f64::from(v) * ph.cos();
        im -= h * f64::from(v) * ph.sin();
        w += h;
    }
    2.0 * re.hypot(im) / w
}

/// Plays a peer's Opus stream in `FRAMES`-sample frames in real time: `warm` seconds unwatched,
/// then `seconds` watched, during which one frame in 25 and a run of 3 are lost, three frames
/// are garbage ([`spoil`]), and half a second of silence is followed by numbers 10 000 further
/// on. The first number is just below the wrap of the 16-bit sequence number, so it wraps
/// while watched.
/// Returns the allocator calls counted while watched.
fn play<const FRAMES: usize>(channels: u8, warm: f64, seconds: f64) -> u64 {
    let mut sender = Sender::<FRAMES> {
        enc: StreamEncoder::new(channels, 128_000).unwrap(),
        channels,
        buf: [0; 1500],
    };
    let asked = Arc::new(Asked::default());
    let mut peer = Peer::new(&EngineConfig::default());
    // The decoder's calls counted (the counts are made before the watched region).
    let counts = Arc::clone(&asked);
    peer.set_decoder(Box::new(Watched {
        dec: StreamDecoder::new().unwrap(),
        watch: move |call: Call<'_>| {
            let which = match call {
                Call::Reset => &counts.resets,
                Call::Decode { result: Err(_), .. } => &counts.refused,
                Call::Decode {
                    packet: Some(_), ..
                } => &counts.decoded,
                Call::Decode { packet: None, .. } => &counts.concealed,
            };
            which.fetch_add(1, Ordering::Relaxed);
        },
    }));
    let frames = FRAMES as u64;
    let per_second = RATE as u64 / frames;
    let watch_from = (warm * RATE) as u64 / QUANTUM as u64;
    let quanta = ((warm + seconds) * RATE) as u64 / QUANTUM as u64;
    // Frames (by k) of the watched part: the events.
    let k0 = watch_from * QUANTUM as u64 / frames + 1;
    let first_seq = (65_536 - 50 - k0) as u16;
    let burst = k0 + per_second / 2;
    let garbage = [k0 + per_second, k0 + per_second + 10, k0 + per_second + 20];
    let pause = k0 + 2 * per_second..k0 + 2 * per_second + per_second / 2;
    let jump: u16 = 10_000;
    let lose =
        |k: u64| (k >= k0 && k % 25 == 7) || (burst..burst + 3).contains(&k) || pause.contains(&k);

    let (mut l, mut r) = ([0.0f32; QUANTUM], [0.0f32; QUANTUM]);
    let mut tail = [0.0f32; 48_000];
    let mut k = 0u64;
    let mut step = |q: u64, peer: &mut Peer, l: &mut [f32; QUANTUM], r: &mut [f32; QUANTUM]| {
        let now = q * QUANTUM as u64;
        while (k + 1) * frames <= now {
            let after = if k >= pause.end { jump } else { 0 };
            let seq = first_seq.wrapping_add(k as u16).wrapping_add(after);
            let n = sender.frame(k, seq);
            if let Some(g) = garbage.iter().position(|&x| x == k) {
                spoil(&mut sender.buf[HEADER_LEN..n - 8], g);
            }
            if !lose(k) {
                let pkt = parse(&sender.buf[..n]).unwrap();
                peer.push(&pkt, now);
            }
            k += 1;
        }
        peer.pull(now, l, r);
    };
    for q in 0..watch_from {
        step(q, &mut peer, &mut l, &mut r);
    }
    let warmed = peer.jitter_counters();
    let asked_warm = (
        asked.decoded.load(Ordering::Relaxed),
        asked.resets.load(Ordering::Relaxed),
    );
    let tail_from = quanta - tail.len() as u64 / QUANTUM as u64;
    let before = calls();
    watched(|| {
        for q in watch_from..quanta {
            step(q, &mut peer, &mut l, &mut r);
            if q >= tail_from {
                let at = (q - tail_from) as usize * QUANTUM;
                tail[at..at + QUANTUM].copy_from_slice(&l);
            }
        }
    });
    let counted = calls() - before;

    // The watched part did what it was meant to: the decoder decoded, concealed the losses,
    // refused the garbage frame and was reset by the restart; the tone plays after it.
    let c = peer.jitter_counters();
    let (decoded, concealed, refused, resets) = (
        asked.decoded.load(Ordering::Relaxed) - asked_warm.0,
        asked.concealed.load(Ordering::Relaxed),
        asked.refused.load(Ordering::Relaxed),
        asked.resets.load(Ordering::Relaxed) - asked_warm.1,
    );
    let db = 20.0 * (amplitude_440(&tail) / AMP).log10();
    println!(
        "{FRAMES}-sample frames, {channels} channel(s): {counted} allocator calls in \
         {seconds} s watched; decoder asked {decoded} decodes, {concealed} concealments, \
         {refused} refused, {resets} resets; 440 Hz at {db:+.2} dB at the end; {c:?}"
    );
    assert!(warmed.played > 0 && warmed.lost == 0, "{warmed:?}");
    assert!(
        decoded > (seconds - 1.0) as u64 * per_second,
        "{decoded} decoded"
    );
    // One frame in 25 over the watched seconds but the pause.
    let losses = (seconds - 1.0) as u64 * per_second / 25;
    // All counted and concealed; those playout reaches with a frame buffered after them are
    // concealed by the decoder (the others, met by an empty buffer, by the jitter buffer's own).
    assert!(c.lost > losses && c.concealed == c.lost, "{c:?}");
    assert!(
        concealed > losses / 4,
        "{concealed} concealed by the decoder"
    );
    assert_eq!(c.undecodable, refused);
    assert!((2..=3).contains(&c.undecodable), "{c:?}");
    assert_eq!(c.resets, 1, "{c:?}");
    assert_eq!(resets, 1);
    assert!(db.abs() < 1.0, "level {db:.2} dB");
    counted
}

#[test]
fn an_opus_stream_plays_through_a_peer_without_allocating() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // The counter counts: an allocation while watched is seen.
    let before = calls();
    watched(|| drop(std::hint::black_box(vec![0u8; 64])));
    assert_eq!(calls() - before, 2);

    assert_eq!(play::<120>(1, 1.0, 6.0), 0);
    assert_eq!(play::<240>(2, 1.0, 6.0), 0);
}

#[test]
fn encoding_a_stream_allocates_nothing() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut mono = StreamEncoder::new(1, 64_000).unwrap();
    let mut stereo = StreamEncoder::new(2, 256_000).unwrap();
    let mut out = [0u8; 1500];
    let mut l = [0.0f32; 240];
    let r = [0.1f32; 240];
    let mut bytes = 0;
    let before = calls();
    watched(|| {
        for k in 0..4_000usize {
            for (i, x) in l.iter_mut().enumerate() {
                *x = (0.3 * (0.0577 * (k * 240 + i) as f64).sin()) as f32;
            }
            let frames = if k % 2 == 0 { 120 } else { 240 };
            bytes += mono.encode(&l[..frames], None, &mut out).unwrap();
            bytes += stereo
                .encode(&l[..frames], Some(&r[..frames]), &mut out)
                .unwrap();
            if k == 2_000 {
                mono.set_bitrate(128_000).unwrap();
            }
            // Refused calls (a wrong length, a missing channel) allocate nothing either.
            assert!(mono.encode(&l[..100], None, &mut out).is_err());
            assert!(stereo.encode(&l[..frames], None, &mut out).is_err());
        }
    });
    let counted = calls() - before;
    println!("encoding 8000 frames: {counted} allocator calls, {bytes} bytes");
    assert!(bytes > 8_000 * 20);
    assert_eq!(counted, 0);
}
