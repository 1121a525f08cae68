//! What a spot-checked listener heard: the left channel of the hub's packets laid out by
//! sequence number, so a lost block is a block of silence where it was due (as a player without
//! concealment would hear it) and never shifts the audio after it; a packet that arrives after a
//! later one is too late to play and is left out, as a player would leave it.
//!
//! The longest run of lost blocks is kept too: it is the longest stretch a listener's
//! concealment would have had to bridge.
//!
//! Capacity is set at the start and the recording stops when it is full, so the emulator's
//! driving thread allocates nothing per packet.

/// At most this many blocks of silence are filled in for one jump of the sequence number; a
/// longer jump (the hub restarted its numbering) restarts the layout without filling.
pub const MAX_FILL_BLOCKS: u16 = 1000;

/// One listener's received audio, one channel, 48 kHz.
#[derive(Clone, Debug)]
pub struct Recording {
    samples: Vec<f32>,
    capacity: usize,
    /// The sequence number due next.
    next: Option<u16>,
    /// Blocks filled with silence, and the longest run of them, in frames.
    pub filled_blocks: u64,
    pub longest_fill_frames: usize,
}

impl Recording {
    /// A recording of at most `frames` frames.
    pub fn with_capacity(frames: usize) -> Recording {
        Recording {
            samples: Vec::with_capacity(frames),
            capacity: frames,
            next: None,
            filled_blocks: 0,
            longest_fill_frames: 0,
        }
    }

    /// Starts over (a new measuring window), keeping the capacity.
    pub fn clear(&mut self) {
        self.samples.clear();
        self.next = None;
        self.filled_blocks = 0;
        self.longest_fill_frames = 0;
    }

    pub fn samples(&self) -> &[f32] {
        &self.samples
    }

    pub fn is_full(&self) -> bool {
        self.samples.len() >= self.capacity
    }

    /// Where the block numbered `seq` of `frames` frames goes: `true` when it is to be appended
    /// (after any silence for the blocks lost before it), `false` when it is late (already
    /// passed) or the recording is full.
    pub fn admit(&mut self, seq: u16, frames: usize) -> bool {
        if self.is_full() {
            return false;
        }
        if let Some(next) = self.next {
            let ahead = seq.wrapping_sub(next);
            if ahead >= 0x8000 {
                return false;
            }
            if ahead > 0 && ahead <= MAX_FILL_BLOCKS {
                let fill = (usize::from(ahead) * frames).min(self.capacity - self.samples.len());
                self.samples.resize(self.samples.len() + fill, 0.0);
                self.filled_blocks += u64::from(ahead);
                self.longest_fill_frames =
                    self.longest_fill_frames.max(usize::from(ahead) * frames);
            }
        }
        self.next = Some(seq.wrapping_add(1));
        !self.is_full()
    }

    /// Appends a block's samples (after [`Recording::admit`] said so), up to the capacity.
    pub fn push(&mut self, block: &[f32]) {
        let take = block.len().min(self.capacity - self.samples.len());
        self.samples.extend_from_slice(&block[..take]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn play(r: &mut Recording, seq: u16, value: f32) {
        if r.admit(seq, 4) {
            r.push(&[value; 4]);
        }
    }

    #[test]
    fn a_lost_block_is_silence_in_its_place_and_a_late_one_is_left_out() {
        let mut r = Recording::with_capacity(100);
        play(&mut r, 10, 1.0);
        play(&mut r, 12, 3.0); // 11 lost
        play(&mut r, 11, 2.0); // late
        play(&mut r, 12, 3.0); // duplicate: late too
        play(&mut r, 13, 4.0);
        let s = r.samples();
        assert_eq!(s.len(), 16);
        assert_eq!(&s[..4], &[1.0; 4]);
        assert_eq!(&s[4..8], &[0.0; 4]);
        assert_eq!(&s[8..12], &[3.0; 4]);
        assert_eq!(&s[12..], &[4.0; 4]);
        assert_eq!((r.filled_blocks, r.longest_fill_frames), (1, 4));
    }

    #[test]
    fn the_numbering_wraps_and_a_restart_is_not_filled() {
        let mut r = Recording::with_capacity(1000);
        play(&mut r, 65_534, 1.0);
        play(&mut r, 65_535, 1.0);
        play(&mut r, 1, 1.0); // 0 lost across the wrap
        assert_eq!((r.samples().len(), r.filled_blocks), (16, 1));
        play(&mut r, 2 + MAX_FILL_BLOCKS + 1, 1.0);
        assert_eq!((r.samples().len(), r.filled_blocks), (20, 1));
    }

    #[test]
    fn it_stops_at_its_capacity_without_growing() {
        let mut r = Recording::with_capacity(10);
        let cap = r.samples.capacity();
        for seq in 0..5 {
            play(&mut r, seq * 3, 1.0);
        }
        assert_eq!(r.samples().len(), 10);
        assert!(r.is_full());
        assert_eq!(r.samples.capacity(), cap);
        r.clear();
        assert_eq!(r.samples().len(), 0);
        play(&mut r, 7, 1.0);
        assert_eq!(r.samples().len(), 4);
    }
}
