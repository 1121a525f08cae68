//! What one listener received from each sender in forward mode: the hub sends it one bundle per
//! block holding the other members' packets, each stamped with its sender's stream id, so the
//! listener keeps one [`Reception`] per stream (delivered, lost, late, duplicated by that
//! sender's sequence numbers, and its inter-arrival times).
//!
//! The slots are made up front, as many as the room has other members: a stream takes the next
//! free slot when its first packet comes, so nothing allocates per packet and a listener costs
//! the same whatever arrives. A stream beyond the slots (more senders than the room holds: a
//! room leaking into another) and the listener's own stream (the hub echoes only when asked)
//! are counted, not recorded. A slot is found by a linear search: rooms are small, and a
//! search over a few ids costs less than hashing.

use crate::reception::Reception;
use crate::recording::Recording;
use crate::tones::{self, Heard};

/// One sender as one listener heard it.
#[derive(Clone, Debug)]
pub struct Source {
    /// Its stream id; None while the slot is free.
    pub stream: Option<u16>,
    pub reception: Reception,
    /// When spot-checked: its audio in the window, laid out by sequence number.
    pub recording: Option<Recording>,
}

/// A listener's senders.
#[derive(Clone, Debug)]
pub struct Sources {
    slots: Vec<Source>,
    /// The listener's own stream id.
    own: u16,
    /// Packets of the listener's own stream.
    pub echoes: u64,
    /// Packets of streams that found no free slot.
    pub unknown: u64,
}

impl Sources {
    /// Slots for `others` senders; each records up to `record_frames` when that is above 0.
    pub fn new(own: u16, others: usize, record_frames: usize) -> Sources {
        let slot = Source {
            stream: None,
            reception: Reception::default(),
            recording: (record_frames > 0).then(|| Recording::with_capacity(record_frames)),
        };
        Sources {
            slots: vec![slot; others],
            own,
            echoes: 0,
            unknown: 0,
        }
    }

    /// The slot of `stream`, taking a free one on its first packet; None for the listener's
    /// own stream or when every slot is taken (both counted).
    pub fn slot(&mut self, stream: u16) -> Option<&mut Source> {
        if stream == self.own {
            self.echoes += 1;
            return None;
        }
        let i = self
            .slots
            .iter()
            .position(|s| s.stream == Some(stream))
            .or_else(|| self.slots.iter().position(|s| s.stream.is_none()));
        match i {
            Some(i) => {
                let s = &mut self.slots[i];
                s.stream = Some(stream);
                Some(s)
            }
            None => {
                self.unknown += 1;
                None
            }
        }
    }

    /// Whether the listener records its senders (it is spot-checked).
    pub fn records(&self) -> bool {
        self.slots.iter().any(|s| s.recording.is_some())
    }

    /// Slots no sender took yet: members never heard from.
    pub fn unheard(&self) -> usize {
        self.slots.iter().filter(|s| s.stream.is_none()).count()
    }

    /// The senders heard so far.
    pub fn heard(&self) -> impl Iterator<Item = &Source> {
        self.slots.iter().filter(|s| s.stream.is_some())
    }

    /// Starts a new window: counts and recordings are forgotten, streams stay in their slots.
    pub fn reset(&mut self) {
        for s in &mut self.slots {
            s.reception.reset();
            if let Some(r) = s.recording.as_mut() {
                r.clear();
            }
        }
        self.echoes = 0;
        self.unknown = 0;
    }

    /// What a spot-checked listener heard of `others`, the room's other members as (stream id,
    /// tone bin), each sender playing at `amplitude`: each one's recorded stream must carry its
    /// own tone at its level and nothing else. `frames` is the shortest recording of them (0
    /// when one was never heard).
    pub fn check(&self, others: &[(u16, usize)], amplitude: f32) -> Heard {
        let mut heard = Heard {
            checked: others.len(),
            at_level: 0,
            worst_db: 0.0,
            own_db: None,
            off_level: Vec::new(),
            frames: usize::MAX,
        };
        for &(stream, bin) in others {
            let samples = self
                .slots
                .iter()
                .find(|s| s.stream == Some(stream))
                .and_then(|s| s.recording.as_ref())
                .map_or(&[][..], Recording::samples);
            heard.frames = heard.frames.min(samples.len());
            let Some(tone) = tones::check_stream(samples, bin, amplitude) else {
                continue;
            };
            if tone.ok() {
                heard.at_level += 1;
            } else if heard.off_level.len() < 8 {
                heard.off_level.push((tones::bin_hz(bin), tone.level_db));
            }
            if tone.level_db.abs() > heard.worst_db.abs() {
                heard.worst_db = tone.level_db;
            }
        }
        if others.is_empty() {
            heard.frames = 0;
        }
        heard
    }

    /// The longest run of blocks lost in a recording, frames.
    pub fn longest_fill_frames(&self) -> usize {
        self.slots
            .iter()
            .filter_map(|s| s.recording.as_ref())
            .map(|r| r.longest_fill_frames)
            .max()
            .unwrap_or(0)
    }

    /// Distinct packets delivered, summed over the senders.
    pub fn delivered(&self) -> u64 {
        self.slots.iter().map(|s| s.reception.delivered).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `(stream, seq)` arrivals, one every 1 ms.
    fn feed(s: &mut Sources, arrivals: &[(u16, u16)]) {
        for (t, &(stream, seq)) in arrivals.iter().enumerate() {
            if let Some(src) = s.slot(stream) {
                src.reception.on_packet(seq, 1000 * t as u64);
            }
        }
    }

    #[test]
    fn interleaved_streams_are_counted_each_by_its_own_numbers() {
        let mut s = Sources::new(1, 3, 0);
        // Stream 2 counts from 100, stream 3 from 7; their numbers are unrelated. Stream 2
        // loses 102, stream 3 repeats 8 and has 10 after 11.
        feed(
            &mut s,
            &[
                (2, 100),
                (3, 7),
                (2, 101),
                (3, 8),
                (3, 8),
                (2, 103),
                (3, 9),
                (3, 11),
                (3, 10),
                (2, 104),
            ],
        );
        let by = |stream: u16| {
            let r = &s
                .heard()
                .find(|x| x.stream == Some(stream))
                .unwrap()
                .reception;
            (r.delivered, r.lost(), r.late, r.duplicates)
        };
        assert_eq!(by(2), (4, 1, 0, 0));
        assert_eq!(by(3), (5, 0, 1, 1));
        assert_eq!(s.delivered(), 9);
        assert_eq!((s.heard().count(), s.unheard()), (2, 1));
    }

    #[test]
    fn the_own_stream_and_streams_beyond_the_room_are_counted_not_kept() {
        let mut s = Sources::new(5, 2, 0);
        feed(&mut s, &[(5, 0), (6, 0), (7, 0), (8, 0), (8, 1), (6, 1)]);
        assert_eq!((s.echoes, s.unknown, s.delivered()), (1, 2, 3));
        let streams: Vec<u16> = s.heard().filter_map(|x| x.stream).collect();
        assert_eq!(streams, vec![6, 7]);
    }

    #[test]
    fn inter_arrival_times_are_per_stream() {
        let mut s = Sources::new(1, 2, 0);
        // Two streams alternating: each one's packets are 2 ms apart, though a packet arrives
        // every 1 ms.
        let arrivals: Vec<(u16, u16)> = (0..100u16).map(|k| (2 + k % 2, k / 2)).collect();
        feed(&mut s, &arrivals);
        for src in s.heard() {
            assert_eq!(src.reception.gaps.count(), 49);
            assert!((src.reception.gaps.max_ms() - 2.0).abs() < 1e-9);
        }
    }

    #[test]
    fn a_listener_passes_with_each_sender_at_its_tone_and_fails_with_one_swapped_or_missing() {
        use crate::tones::{ToneLoop, ANALYSIS_FRAMES};
        use tutti_core::packet::{self, MAX_PACKET_LEN};
        let frames = ANALYSIS_FRAMES + 128;
        let mut s = Sources::new(1, 3, frames);
        // Streams 2 and 3 play bins 10 and 20; stream 4 never comes.
        let mut buf = vec![0u8; MAX_PACKET_LEN];
        let (mut left, mut right) = ([0f32; 128], [0f32; 128]);
        for (stream, bin) in [(2u16, 10usize), (3, 20)] {
            let tone = ToneLoop::app(bin, 0.05, 128).unwrap();
            for seq in 0..(frames / 128) as u16 {
                let n = tone.packet_into(seq, 0, &mut buf);
                let p = packet::parse(&buf[..n]).unwrap();
                p.decode_stereo(&mut left, &mut right);
                let rec = s.slot(stream).unwrap().recording.as_mut().unwrap();
                if rec.admit(seq, 128) {
                    rec.push(&left);
                }
            }
        }
        let good = s.check(&[(2, 10), (3, 20)], 0.05);
        assert!(good.ok() && good.checked == 2, "{good:?}");
        // The streams' tones swapped: what a room leaking into another would look like.
        let swapped = s.check(&[(2, 20), (3, 10)], 0.05);
        assert!(!swapped.ok() && swapped.at_level == 0, "{swapped:?}");
        let missing = s.check(&[(2, 10), (3, 20), (4, 30)], 0.05);
        assert!(!missing.ok() && missing.frames == 0, "{missing:?}");
    }

    #[test]
    fn reset_keeps_the_slots_and_their_capacity() {
        let mut s = Sources::new(1, 1, 256);
        feed(&mut s, &[(2, 0), (2, 1)]);
        s.slot(2)
            .unwrap()
            .recording
            .as_mut()
            .unwrap()
            .push(&[0.5; 128]);
        s.reset();
        assert_eq!(s.delivered(), 0);
        assert_eq!(s.heard().count(), 1);
        let rec = s.slot(2).unwrap().recording.as_ref().unwrap();
        assert!(rec.samples().is_empty());
        assert_eq!(s.unknown, 0);
    }
}
