//! The pop side of the jitter buffer: one block per call, played, merged, stretched or
//! concealed as the playout state demands. The module docs of [`crate::jitter`] describe the
//! states.

use super::*;

impl JitterBuffer {
    /// Emits the next block into the first [`JitterBuffer::block_frames`] frames of `left` and
    /// `right` (the quantum size before the first packet). When either slice is shorter, writes
    /// nothing and returns `frames: 0`. Real-time safe.
    ///
    /// A PCM stream needs nothing more; an Opus stream is played by [`JitterBuffer::pop_block_with`].
    pub fn pop_block(&mut self, left: &mut [f32], right: &mut [f32]) -> Pop {
        self.pop_block_with(left, right, None)
    }

    /// [`JitterBuffer::pop_block`] with the decoder of this stream's compressed frames: each
    /// frame is decoded once, in order, when played, and a sequence number passed without its
    /// frame is concealed by the decoder (which keeps its state continuous). Without a decoder,
    /// compressed frames play as silence, counted `undecodable`. Real-time safe when the
    /// decoder is.
    pub fn pop_block_with<'d>(
        &mut self,
        left: &mut [f32],
        right: &mut [f32],
        mut decoder: Option<&mut (dyn Decoder + 'd)>,
    ) -> Pop {
        let b = if self.block == 0 {
            self.cfg.quantum as usize
        } else {
            self.block
        };
        if left.len() < b || right.len() < b {
            return Pop {
                kind: PopKind::Silence,
                frames: 0,
            };
        }
        let (l, r) = (&mut left[..b], &mut right[..b]);
        // Frames the consumer drops from the start of this block (playout starting at its
        // target): they are silenced and the fade-in starts after them.
        let mut start_skip = 0;
        match self.state {
            StreamState::Idle => return self.fade(l, r),
            StreamState::Prefill => {
                let adaptive = matches!(self.cfg.mode, BufferMode::Adaptive { .. });
                let observed = self.last_arrival.saturating_sub(self.t_base);
                let observing = adaptive && observed < START_OBSERVE;
                if self.buffered == 0 || observing || self.fill_error() < 0 {
                    self.delay += self.block_local();
                    return self.fade(l, r);
                }
                // Start at the target: the oldest blocks that waited for the estimate to form
                // are dropped (counted in `discarded`; a missing one counts as concealed) while
                // the fill exceeds it by a block or more; what remains above it (less than a
                // block) the consumer drops from this block, before its fade-in
                // ([`JitterBuffer::take_start_excess`]), so playout starts exactly at the
                // target and the drift loop has nothing to correct (it would resample, shifting
                // the pitch, while it did). A dropped Opus
                // frame still goes through the decoder (into `l`/`r`, which the block played
                // next overwrites): its band energies are coded against the frames before
                // it, and a decoder that joined later played the first 100 ms up to 5 dB off
                // the signal's level. Every frame received is still decoded at most once; at a
                // start that is at most the buffer's capacity in frames (68 of 2.5 ms).
                let b_local = self.block_local();
                while adaptive && self.buffered > 1 && self.fill_error() >= b_local {
                    let i = self.slot_of(self.play);
                    if self.slots[i].ext == self.play {
                        if self.opus && decoder.is_some() {
                            let mut dec = Decoding {
                                store: &mut self.store,
                                counters: &mut self.counters,
                                stale: &mut self.decoder_stale,
                            };
                            dec.block(self.slots[i].buf, l, r, decoder.as_deref_mut());
                        }
                        self.free_slot(i);
                        self.buffered -= 1;
                        self.counters.discarded += 1;
                    } else {
                        self.counters.concealed += 1;
                    }
                    self.play += 1;
                    self.delay -= b_local;
                }
                if adaptive {
                    let excess = self.fill_error().clamp(0, b_local - 1);
                    self.start_excess = self.to_stream(excess) as u32;
                    start_skip = (self.start_excess as usize).min(b);
                    self.delay -= excess;
                }
                self.state = StreamState::Playing;
            }
            StreamState::Playing => {}
        }

        if self.buffered == 0 {
            if self.empty_frames == 0 {
                self.counters.underruns += 1;
            }
            self.counters.stretched += 1;
            self.empty_frames += b;
            self.delay += self.block_local();
            if self.empty_frames >= (self.rate / 5) as usize {
                self.state = StreamState::Idle;
                self.empty_frames = 0;
            }
            return self.fade(l, r);
        }
        if self.empty_frames > 0 {
            self.end_underrun();
        }
        if self.grow_pending > 0 {
            // The target grew: wait one block (a concealed block in place).
            self.grow_pending -= 1;
            self.counters.stretched += 1;
            self.delay += self.block_local();
            return self.fade(l, r);
        }

        let i = self.slot_of(self.play);
        if self.slots[i].ext != self.play {
            self.counters.concealed += 1;
            self.play += 1;
            if let (true, Some(d)) = (self.opus, decoder.as_deref_mut()) {
                if self.decoder_stale {
                    d.reset();
                    self.decoder_stale = false;
                }
                if d.decode(None, l, r).is_ok() {
                    // The decoder's concealment is what plays: it is the history now.
                    self.concealer.play(l, r);
                    return Pop {
                        kind: PopKind::Concealed,
                        frames: b,
                    };
                }
            }
            return self.fade(l, r);
        }
        let buf = self.slots[i].buf;
        self.played_arrival = Some((self.slots[i].arrival, self.slots[i].note));
        let mut dec = Decoding {
            store: &mut self.store,
            counters: &mut self.counters,
            stale: &mut self.decoder_stale,
        };
        dec.block(buf, l, r, decoder.as_deref_mut());
        let next = self.slot_of(self.play + 1);
        let merge = self.skip_pending > 0 && self.slots[next].ext == self.play + 1;
        if merge {
            // Catch-up: this block fades into the next; both are consumed.
            let (nl, nr) = (&mut self.merge_l[..b], &mut self.merge_r[..b]);
            let mut dec = Decoding {
                store: &mut self.store,
                counters: &mut self.counters,
                stale: &mut self.decoder_stale,
            };
            dec.block(self.slots[next].buf, nl, nr, decoder);
            for k in 0..b {
                let w = fade_in_weight(k, b);
                l[k] = (1.0 - w) * l[k] + w * nl[k];
                r[k] = (1.0 - w) * r[k] + w * nr[k];
            }
            self.free_slot(next);
            self.buffered -= 1;
            self.play += 1;
            self.counters.discarded += 1;
            self.skip_pending -= 1;
            self.delay -= self.block_local();
        }
        self.slots[i].ext = EMPTY;
        self.buffered -= 1;
        self.play += 1;
        self.counters.played += 1;
        if merge {
            // The output is no stored block: the concealer copies it.
            self.store.release(buf);
            self.concealer.play(l, r);
        } else if start_skip > 0 {
            // The first block of a stream fades in from silence over RECOVER_FRAMES; with its
            // first frames dropped, that fade starts after them (a block longer than the fade,
            // 240-frame Opus, had started on a step up to half the tone's amplitude).
            self.store.release(buf);
            l[..start_skip].fill(0.0);
            r[..start_skip].fill(0.0);
            self.concealer
                .play(&mut l[start_skip..], &mut r[start_skip..]);
        } else {
            let token = self.store.token(buf);
            self.store.retire(buf);
            self.concealer.play_ref(l, r, token);
        }
        Pop {
            kind: PopKind::Audio,
            frames: b,
        }
    }

    /// An underrun ends: a packet is buffered again after pops that found none. If it is the one
    /// playout waited for, that packet was late: the wait stands (its lateness has already
    /// raised the estimate). If numbers before it are still missing, the wait was spent on a
    /// gap: the missing numbers are passed, as many as blocks were stretched (each counted
    /// concealed: the stretched blocks concealed them), so a run of losses leaves the delay
    /// where it was instead of adding its length to it.
    fn end_underrun(&mut self) {
        let stretched = (self.empty_frames / self.block.max(1)) as u64;
        self.empty_frames = 0;
        let mut passed = 0;
        while passed < stretched && self.slots[self.slot_of(self.play)].ext != self.play {
            self.counters.concealed += 1;
            self.play += 1;
            self.delay -= self.block_local();
            passed += 1;
        }
        if self.excused_now {
            self.counters.stall_underruns += 1;
        } else if passed < stretched {
            self.counters.late_underruns += 1;
        }
    }

    /// The arrival time (the `now` it was pushed with, local frames) and the note
    /// ([`JitterBuffer::push_noted`]) of the last packet a pop played as audio since the last
    /// call, taken once: the start of its jitter-buffer wait. A catch-up merge reports the first
    /// of the two blocks it consumed. Real-time safe.
    pub fn take_played(&mut self) -> Option<(u64, f64)> {
        self.played_arrival.take()
    }

    /// Concealment (or its faded-out silence) into `l`/`r`.
    fn fade(&mut self, l: &mut [f32], r: &mut [f32]) -> Pop {
        let store = &mut self.store;
        let audible = self
            .concealer
            .conceal_with(l, r, |t, l, r| store.decode_token(t, l, r));
        Pop {
            kind: if audible {
                PopKind::Concealed
            } else {
                PopKind::Silence
            },
            frames: l.len(),
        }
    }
}

/// The parts of the buffer a stored block's decoding touches (apart from the scratch it is
/// decoded into, which may be the buffer's own).
struct Decoding<'a> {
    store: &'a mut Store,
    counters: &'a mut JitterCounters,
    stale: &'a mut bool,
}

impl Decoding<'_> {
    /// Decodes stored block `buf` into `l`/`r`: PCM directly; an Opus frame with `decoder`,
    /// after which its samples replace it in the store (the concealer may read it again, and a
    /// frame must not go through its decoder twice). A frame the decoder refuses, or one without
    /// a decoder, is concealed (or silence) and counted `undecodable`.
    fn block<'d>(
        &mut self,
        buf: u32,
        l: &mut [f32],
        r: &mut [f32],
        decoder: Option<&mut (dyn Decoder + 'd)>,
    ) {
        let Some(bytes) = self.store.opus_payload(buf) else {
            self.store.decode(buf, l, r);
            return;
        };
        let decoded = match decoder {
            Some(d) => {
                if *self.stale {
                    d.reset();
                    *self.stale = false;
                }
                let ok = d.decode(Some(bytes), l, r).is_ok();
                if !ok && d.decode(None, l, r).is_err() {
                    l.fill(0.0);
                    r.fill(0.0);
                }
                ok
            }
            None => {
                l.fill(0.0);
                r.fill(0.0);
                false
            }
        };
        if !decoded {
            self.counters.undecodable += 1;
        }
        self.store.write_decoded(buf, l, r);
    }
}
