//! Round-trip probe: clicks sent into our outgoing stream and found again in a peer's incoming
//! one, timed on the local audio clock.
//!
//! A loopback measures everything between our engine's input and its output that the stages of
//! [`crate::latency`] only estimate piece by piece. Two uses:
//!
//! - **self loopback**: our stream comes back to us unchanged (the app's sound check routes it
//!   through a loopback channel into a peer slot); a click goes out with the packets and is heard
//!   in that slot after packetization, the net side, the jitter buffer and drift correction;
//! - **peer loopback**: a remote peer echoes our stream ([`crate::engine::Engine::set_echo`] on
//!   its side, once its user allowed it: its outgoing audio TO US becomes our stream as it played
//!   there, everyone else still getting its input); a click makes the round trip to the peer and
//!   back, with both ends' send, network, delivery and jitter-buffer stages.
//!
//! While a probe runs, our outgoing audio is silence and the clicks (so that music in the
//! microphone cannot be mistaken for a click, and the peer hears only clicks); one click is in
//! flight at a time. A click is one sample at [`CLICK_LEVEL`] at the start of a quantum that
//! begins an audio callback (the host says which: with callbacks that carry several quanta at
//! once, only the first one's audio is sent at the moment it was complete, so only its frame
//! number and its send time agree, as the stages assume); it is
//! found as the first sample of the probed peer's signal (as it left its jitter buffer and drift
//! correction, before the fader) whose magnitude reaches [`DETECT_LEVEL`], refined to the
//! largest sample among the next few (interpolation spreads an impulse over neighbouring
//! samples). The round trip is the frame where it was found minus the frame where it was sent:
//! exact to the frame on the local audio clock. A click not found within [`TIMEOUT_FRAMES`]
//! counts as lost, and the next one is sent after a pause that varies with the click's number,
//! so that the clicks fall at different phases of the audio callbacks' rhythm.
//!
//! Everything here is real-time safe: no allocation, no lock, no panic on any input.

/// Most clicks one probe sends.
pub const MAX_CLICKS: usize = 16;
/// Level of a click (linear).
pub const CLICK_LEVEL: f32 = 0.8;
/// Smallest magnitude (linear) taken as a returning click: about −14 dBFS, far above the noise
/// of PCM16 and of concealment's fades, below what interpolation leaves of a click.
pub const DETECT_LEVEL: f32 = 0.2;
/// Samples after the first one over [`DETECT_LEVEL`] searched for the click's peak.
pub const PEAK_SEARCH: usize = 4;
/// A click goes out only once the probed signal has stayed below this level (linear) for
/// [`QUIET_FRAMES`]: what was in flight before the probe muted us (or the tail of the previous
/// click) has passed, and a peer that does not echo us but plays music cannot fake a click.
pub const QUIET_LEVEL: f32 = 0.05;
/// See [`QUIET_LEVEL`]: 50 ms at 48 kHz.
pub const QUIET_FRAMES: u64 = 2_400;
/// A click not heard within this many frames (1 s at 48 kHz) is lost; so is a click that could
/// not be sent for as long because the probed signal never went quiet.
pub const TIMEOUT_FRAMES: u64 = 48_000;
/// Pause between a click's return (or loss) and the next click, frames (about 100 ms), plus
/// [`PAUSE_STEP_FRAMES`] times the click's number.
pub const PAUSE_FRAMES: u64 = 4_800;
/// See [`PAUSE_FRAMES`]: 37 frames is prime to every callback period of 128-frame quanta.
pub const PAUSE_STEP_FRAMES: u64 = 37;

/// Where a probe stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeState {
    /// Never started, or stopped.
    Idle,
    /// Sending clicks and listening.
    Running,
    /// Every click was sent and heard or lost.
    Done,
}

impl ProbeState {
    /// The state as the stats block carries it: 0 idle, 1 running, 2 done.
    pub fn code(self) -> f64 {
        match self {
            ProbeState::Idle => 0.0,
            ProbeState::Running => 1.0,
            ProbeState::Done => 2.0,
        }
    }
}

/// A round-trip probe (see the module docs). Times are local frames.
#[derive(Clone, Debug)]
pub struct ClickProbe {
    state: ProbeState,
    slot: usize,
    clicks: usize,
    sent: usize,
    heard: usize,
    /// Frame the click in flight was sent at.
    in_flight: Option<u64>,
    /// Earliest frame for the next click.
    next_at: u64,
    /// Since when the probed signal has been quiet (see [`QUIET_LEVEL`]).
    quiet_since: Option<u64>,
    /// Round trip per click sent, frames; NaN for a lost click.
    results: [f64; MAX_CLICKS],
}

impl Default for ClickProbe {
    fn default() -> Self {
        ClickProbe::new()
    }
}

impl ClickProbe {
    /// An idle probe.
    pub const fn new() -> ClickProbe {
        ClickProbe {
            state: ProbeState::Idle,
            slot: 0,
            clicks: 0,
            sent: 0,
            heard: 0,
            in_flight: None,
            next_at: 0,
            quiet_since: None,
            results: [f64::NAN; MAX_CLICKS],
        }
    }

    /// Starts a probe of `clicks` clicks (1..=[`MAX_CLICKS`]; clamped) towards the peer in
    /// `slot`, the first click going out at frame `now`. Forgets the previous results.
    pub fn start(&mut self, slot: usize, clicks: usize, now: u64) {
        *self = ClickProbe::new();
        self.state = ProbeState::Running;
        self.slot = slot;
        self.clicks = clicks.clamp(1, MAX_CLICKS);
        self.next_at = now;
    }

    /// Stops a running probe; the results so far stay readable.
    pub fn stop(&mut self) {
        if self.state == ProbeState::Running {
            self.state = ProbeState::Idle;
        }
        self.in_flight = None;
    }

    /// Where the probe stands.
    pub fn state(&self) -> ProbeState {
        self.state
    }

    /// The slot probed while running (meaningless when idle).
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Whether the probe is running towards `slot`.
    pub fn listens_to(&self, slot: usize) -> bool {
        self.state == ProbeState::Running && self.slot == slot
    }

    /// Clicks asked for.
    pub fn clicks(&self) -> usize {
        self.clicks
    }

    /// Clicks sent so far.
    pub fn sent(&self) -> usize {
        self.sent
    }

    /// Clicks heard back so far.
    pub fn heard(&self) -> usize {
        self.heard
    }

    /// Round trip of each click sent so far, in order, frames (NaN: lost).
    pub fn results(&self) -> &[f64] {
        &self.results[..self.sent]
    }

    /// Replaces one quantum of outgoing audio starting at frame `now` while running: silence,
    /// with a click at its first frame when one is due and `callback_start` (the quantum begins
    /// an audio callback). Returns false (and leaves the buffers alone) when no probe is
    /// running.
    pub fn outgoing(
        &mut self,
        now: u64,
        callback_start: bool,
        left: &mut [f32],
        right: &mut [f32],
    ) -> bool {
        if self.state != ProbeState::Running {
            return false;
        }
        left.fill(0.0);
        right.fill(0.0);
        if self.in_flight.is_some() || self.sent >= self.clicks || now < self.next_at {
            return true;
        }
        let quiet = self
            .quiet_since
            .is_some_and(|since| now.saturating_sub(since) >= QUIET_FRAMES);
        if quiet && callback_start {
            if let (Some(l), Some(r)) = (left.first_mut(), right.first_mut()) {
                *l = CLICK_LEVEL;
                *r = CLICK_LEVEL;
                self.in_flight = Some(now);
                self.sent += 1;
            }
        } else if !quiet && now - self.next_at > TIMEOUT_FRAMES {
            // Never quiet: this click is lost without being sent.
            self.sent += 1;
            self.finish_click(f64::NAN, now);
            if self.sent >= self.clicks {
                self.state = ProbeState::Done;
            }
        }
        true
    }

    /// Looks for the click in flight in the probed peer's quantum starting at frame `now`
    /// (`left`/`right`: its signal before the fader). Call once per quantum while running.
    pub fn incoming(&mut self, now: u64, left: &[f32], right: &[f32]) {
        if self.state != ProbeState::Running {
            return;
        }
        let n = left.len().min(right.len());
        let level = |i: usize| left[i].abs().max(right[i].abs());
        if (0..n).all(|i| level(i) < QUIET_LEVEL) {
            self.quiet_since.get_or_insert(now);
        } else {
            self.quiet_since = None;
        }
        if let Some(sent_at) = self.in_flight {
            if let Some(first) = (0..n).find(|&i| level(i) >= DETECT_LEVEL) {
                let end = (first + PEAK_SEARCH).min(n);
                let mut peak = first;
                for i in first..end {
                    if level(i) > level(peak) {
                        peak = i;
                    }
                }
                let found = now + peak as u64;
                if found > sent_at {
                    self.finish_click((found - sent_at) as f64, now);
                }
            } else if now.saturating_sub(sent_at) > TIMEOUT_FRAMES {
                self.finish_click(f64::NAN, now);
            }
        }
        if self.in_flight.is_none() && self.sent >= self.clicks {
            self.state = ProbeState::Done;
        }
    }

    fn finish_click(&mut self, frames: f64, now: u64) {
        let i = self.sent.saturating_sub(1).min(MAX_CLICKS - 1);
        self.results[i] = frames;
        if frames.is_finite() {
            self.heard += 1;
        }
        self.in_flight = None;
        self.next_at = now + PAUSE_FRAMES + PAUSE_STEP_FRAMES * self.sent as u64;
    }
}

#[cfg(test)]
mod tests;
