//! The push side of the jitter buffer: a received packet checked, placed in the slot of its
//! sequence number (or counted as late, duplicate or too far ahead), and the depth checks its
//! arrival triggers. The module docs of [`crate::jitter`] describe the rules.

use super::*;

impl JitterBuffer {
    /// Places a received packet: its payload bytes go to the slot of its sequence number
    /// (decoded when the slot is popped). `now` = local frame time of the quantum that drained
    /// it. Real-time safe.
    pub fn push(&mut self, pkt: &Packet, now: u64) -> PushOutcome {
        self.push_noted(pkt, now, f64::NAN)
    }

    /// [`JitterBuffer::push`] with a note the caller keeps with the packet (any `f64`, e.g. when
    /// it was sent) and gets back from [`JitterBuffer::take_played`] when it plays. Real-time
    /// safe.
    pub fn push_noted(&mut self, pkt: &Packet, now: u64, note: f64) -> PushOutcome {
        self.pushed_note = note;
        let frames = pkt.frames();
        let channels = pkt.channels;
        let opus = pkt.is_opus();
        // PCM: exactly the block's samples. Opus: a frame of 2.5 or 5 ms, no larger than the
        // PCM16 block of the same length (the packet module's bound).
        let pcm_len = frames * usize::from(channels) * pkt.header.format.bytes();
        let (block_ok, len_ok) = if opus {
            let bound = frames * usize::from(channels) * 2;
            (
                OPUS_FRAMES.contains(&pkt.header.frames),
                (1..=bound).contains(&pkt.payload.len()),
            )
        } else {
            (
                frames.is_power_of_two() && (MIN_BLOCK..=MAX_FRAMES).contains(&frames),
                pkt.payload.len() == pcm_len,
            )
        };
        if !block_ok || !len_ok || !(1..=2).contains(&channels) {
            self.counters.discarded += 1;
            return PushOutcome::Rejected;
        }
        self.bits = pkt.header.format.bits();
        self.accept(pkt, now)
    }

    /// The body of [`JitterBuffer::push`] for a validated block format.
    fn accept(&mut self, pkt: &Packet, now: u64) -> PushOutcome {
        let (seq, frames, channels) = (pkt.header.seq, pkt.frames(), pkt.channels);
        let rate = pkt.header.rate.hz();
        let mut outcome = None;
        if self.block == 0 {
            self.set_format(&pkt.header, channels, pkt.is_opus());
            let ext = SEQ_BASE + u64::from(seq);
            self.new_segment(ext);
            self.restart(ext, now);
            outcome = Some(PushOutcome::Started);
        } else if frames != self.block
            || rate != self.rate
            || channels != self.channels
            || pkt.is_opus() != self.opus
        {
            self.counters.resets += 1;
            self.drop_all();
            self.close_segment();
            self.set_format(&pkt.header, channels, pkt.is_opus());
            let ext = self.extend(seq);
            self.new_segment(ext);
            self.restart(ext, now);
            outcome = Some(PushOutcome::FormatReset);
        }
        let ext = self.extend(seq);

        if outcome.is_none() {
            if ext.saturating_add(SEEN_BITS) <= self.highest {
                self.stale_run += 1;
                if self.stale_run < STALE_RESTART {
                    self.counters.discarded += 1;
                    return PushOutcome::Stale;
                }
                // The sender restarted its numbering below the old one.
                self.counters.resets += 1;
                self.drop_all();
                self.close_segment();
                self.new_segment(ext);
                self.restart(ext, now);
                outcome = Some(PushOutcome::Started);
            } else if self.is_seen(ext) {
                self.counters.duplicates += 1;
                return PushOutcome::Duplicate;
            }
        }
        self.stale_run = 0;

        if outcome.is_none() {
            outcome = self.place(ext, now);
        }
        // A unique packet of the current segment.
        self.mark_seen(ext);
        self.counters.received += 1;
        self.seg_received += 1;
        self.seg_lowest = self.seg_lowest.min(ext);
        self.seg_highest = self.seg_highest.max(ext);
        self.last_arrival = now;
        self.last_ext = ext;

        let outcome = outcome.unwrap_or(PushOutcome::Stored);
        self.excused_now = self.excused_until.is_some_and(|u| now <= u);
        if self.state != StreamState::Idle && !self.excused_now {
            let l = self.elapsed(now) - self.nominal(ext);
            self.lat.roll(now, u64::from(self.cfg.local_rate));
            let cutoff = self.coverable() + i64::from(self.cfg.quantum);
            self.lat.add_checked(l, cutoff);
            self.update_target();
        }
        if outcome == PushOutcome::Late {
            self.counters.late += 1;
            return outcome;
        }
        let kind = if pkt.is_opus() {
            Stored::Opus(pkt.payload.len() as u16)
        } else {
            Stored::Pcm(pkt.header.format)
        };
        self.store(ext, pkt.payload, kind, now);
        if !pkt.redundant.is_empty() {
            self.recover(ext, pkt.redundant, now);
        }
        self.delay = self.elapsed(now) - self.nominal(self.play);
        if self.state == StreamState::Playing {
            self.check_depth(now);
        }
        outcome
    }

    /// Decides where a unique packet of the running stream goes. `None` = store it normally;
    /// `Late` = do not store; anything else = store (after the restart it implies).
    fn place(&mut self, ext: u64, now: u64) -> Option<PushOutcome> {
        let n = self.n_slots as u64;
        if ext < self.play {
            // Before the play position: in prefill, playout may still start earlier.
            let fits = self.buffered == 0 || self.seg_highest < ext + n;
            if self.state == StreamState::Prefill && fits {
                self.play = ext;
                return None;
            }
            return Some(PushOutcome::Late);
        }
        let stopped = self.state == StreamState::Prefill
            && now.saturating_sub(self.last_arrival) > STOP_FRAMES;
        if self.state == StreamState::Idle || stopped {
            // The first packet after a pause: timing starts afresh from it (a prefill that
            // waited through the pause drops what it held).
            self.restart_after_gap(ext, now);
            return Some(PushOutcome::Started);
        }
        if ext >= self.play + n {
            // Too far ahead: drop the oldest to make room, or restart when nothing would remain.
            let new_play = ext + 1 - n;
            let remains = self.buffered > 0 && self.seg_highest >= new_play;
            if remains {
                self.pass_to(new_play);
                if self.state == StreamState::Playing {
                    // The audio jumps: the next block crossfades from a continuation.
                    let store = &mut self.store;
                    self.concealer
                        .splice_with(|t, l, r| store.decode_token(t, l, r));
                }
                return None;
            }
            self.restart_after_gap(ext, now);
            return Some(PushOutcome::Started);
        }
        None
    }

    /// Restarts playout at `ext` (ahead of the play position) after a gap in arrivals: what
    /// was held is dropped. Numbers skipped within the same stream (no reset) were never
    /// played: they count as concealed (the buffer concealed, then faded to silence in their
    /// place), so that concealed = lost + late still holds.
    fn restart_after_gap(&mut self, ext: u64, now: u64) {
        let held = self.held_between(self.play, ext);
        self.drop_all();
        let resets = self.counters.resets;
        self.check_sequence_jump(ext, now);
        if self.counters.resets == resets && self.seg_active && ext > self.play {
            self.counters.concealed += (ext - self.play).saturating_sub(held);
        }
        self.restart(ext, now);
    }

    /// A jump to `ext` that elapsed time cannot explain is a restarted numbering: new segment.
    fn check_sequence_jump(&mut self, ext: u64, now: u64) {
        if !self.seg_active || ext <= self.seg_highest {
            return;
        }
        let gap = self.nominal(ext) - self.nominal(self.seg_highest);
        let elapsed = now.saturating_sub(self.last_arrival) as i64;
        if gap > elapsed + self.to_local(self.cap as i64) {
            self.counters.resets += 1;
            self.close_segment();
            self.new_segment(ext);
        }
    }

    /// Packet `ext` carries the previous frame's copy: it is stored in that frame's place when
    /// the frame has not arrived and playout has not reached it yet. It plays as the frame
    /// itself (the same bytes, decoded in order); the frame stays counted as lost (the network
    /// lost it) and is counted recovered instead of concealed.
    fn recover(&mut self, ext: u64, copy: &[u8], now: u64) {
        let Some(prev) = ext.checked_sub(1) else {
            return;
        };
        if prev < self.play || prev < self.seg_lowest || self.is_seen(prev) {
            return;
        }
        self.mark_seen(prev);
        self.counters.recovered += 1;
        self.store(prev, copy, Stored::Opus(copy.len() as u16), now);
    }

    /// Copies a payload into the slot of `ext`.
    fn store(&mut self, ext: u64, payload: &[u8], kind: Stored, now: u64) {
        let i = self.slot_of(ext);
        if self.slots[i].ext == EMPTY {
            // Slots hold at most `n_slots` buffers and the concealer keeps at most
            // `keep`; the layout has more, so a buffer is always free.
            let Some(buf) = self.store.take() else {
                self.counters.discarded += 1;
                return;
            };
            self.slots[i].buf = buf;
            self.buffered += 1;
        } else if self.slots[i].ext != ext {
            // Invariant: only sequence numbers in [play, play + n_slots) are stored, one per
            // slot, so this cannot happen; stay consistent anyway (its buffer is reused).
            self.counters.discarded += 1;
        }
        self.store.write(self.slots[i].buf, payload, kind);
        self.slots[i].ext = ext;
        self.slots[i].arrival = now;
        self.slots[i].note = self.pushed_note;
    }

    /// Empties slot `i` and frees its buffer.
    pub(super) fn free_slot(&mut self, i: usize) {
        self.slots[i].ext = EMPTY;
        self.store.release(self.slots[i].buf);
    }
}
